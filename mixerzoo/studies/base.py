"""What every kind of study offers, and what a study needs from its caller (output, results folder).

A :class:`Study` plans nothing itself here: each kind delegates to its existing implementation
(``studies/sweep/runner.py`` and ``mad.py``, ``studies/computed/files.py``). The caller passes a
:class:`Console` (where text and JSON go, how an output folder is checked) and a
:class:`ResultsDir`, so that no study module knows the command line.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from mixerzoo.claims import Claim, StandIn


@dataclass(frozen=True)
class ClaimPlan:
    """What a study's claims are judged on for one preset, before anything runs: the claims, the
    default metric, the planned cells (axis values only), their axis names, the study's metric
    directions and stand-ins."""

    claims: list[Claim]
    default_metric: str | None
    cells: list[dict[str, Any]]
    axes: list[str]
    directions: dict[str, str]
    stand_ins: list[StandIn]
    preset: str


@dataclass(frozen=True)
class Console:
    """``echo(text, err=False)`` prints a line; ``write_json(path, payload)`` writes JSON (``-``:
    stdout); ``check_dir(path, what)`` refuses, in one line, a folder that cannot be written."""

    echo: Callable[..., None]
    write_json: Callable[[str, Any], None]
    check_dir: Callable[[Path, str], None]

    def text(self, json_out: str | None) -> Callable[..., None]:
        """``echo`` for a command's text: to stderr when its JSON goes to stdout (``--json -``)."""
        to_stderr = json_out == "-"
        return lambda message="": self.echo(message, err=to_stderr)


@dataclass(frozen=True)
class ResultsDir:
    """The results folder; ``explicit`` when the user named it (a missing one is then an error)."""

    root: Path
    explicit: bool = False

    def open(self, create: bool = False):
        """The store; reading passes ``create=False``: opened read-only, never created."""
        from mixerzoo.store.results import ResultsStore

        return ResultsStore(self.root, create=create, read_only=not create)


@dataclass(frozen=True)
class RunOptions:
    """How ``run`` executes; the defaults are what a study that runs in this process accepts."""

    executor: str = "local"
    workers: int = 1
    runs_per_gpu: int | None = None
    address: str | None = None
    num_cpus: float = 1.0
    num_gpus: float = 0.0
    skip_failed: bool = False
    reuse_stale: bool = False
    track: tuple[str, ...] = ()
    track_dir: str | None = None
    track_project: str = "mixerzoo"
    track_entity: str | None = None
    track_mode: str | None = None
    dry_run: bool = False
    gpu: str = "h100"  # the cost estimate of a dry run: this GPU, at this share of its peak
    utilisation: float = 0.4
    quiet: bool = False
    json_out: str | None = None
    again: str = ""  # the options to repeat in the "next:" hint (``--set ...``, ``--results ...``)

    def changed(self, *names: str) -> list[str]:
        """Which of ``names`` differ from their defaults, as command-line options."""
        defaults = {f.name: f.default for f in fields(self)}
        return [f"--{n.replace('_', '-')}" for n in names if getattr(self, n) != defaults[n]]


def say_paper_only(
    label: str, name: str, runs: str, why: str, where: ResultsDir, dry_run: bool, echo
) -> None:
    """What ``study run`` prints for a preset that is paper only (``label``: the study and preset;
    ``runs``: what it plans, "no runs" or "no run"); outside a dry run it also makes the empty
    results folder in which ``study check`` and ``report`` log the claims' verdicts."""
    echo(f"{label}: {runs}; its claims are for the paper preset only: {why}")
    echo(f"(the paper preset: mixerzoo study run {name} --preset paper)")
    if not dry_run:
        where.open(create=True)


class Study:
    """One study; subclasses implement the verbs for their kind."""

    kind = ""
    #: whether ``study run --all`` runs it (a kind that scores a given mixer has nothing to run alone)
    in_run_all = True

    def __init__(self, name: str) -> None:
        self.name = name

    def row(self) -> dict[str, Any]:
        """``study list``: name, kind, paper_ref, runs per preset, claims, description, path."""
        raise NotImplementedError

    def claim_row(self) -> dict[str, Any]:
        """``mixerzoo claims``: name, kind, paper_ref, presets and the quoted claims (cheap: no plan)."""
        raise NotImplementedError

    def describe(self) -> dict[str, Any]:
        """``study show``: the row, and the presets, axes (or parameters) a newcomer needs."""
        raise NotImplementedError

    def run(
        self, preset: str | None, sets: dict[str, Any], where: ResultsDir, opts: RunOptions, out: Console
    ):
        """Run what is not yet done; returns the exit code (1: a claim not reproduced)."""
        raise NotImplementedError

    def plot(self, preset, sets, where: ResultsDir, out_dir: str | None, out: Console) -> None:
        raise NotImplementedError

    def report(self, preset, sets, where: ResultsDir, out_file: str | None, as_json: bool, out: Console):
        raise NotImplementedError

    def verdicts(
        self, preset, sets, where: ResultsDir, out: Console
    ) -> tuple[list[dict[str, Any]], str, Any]:
        """The claims with their verdicts, one line saying what they were judged on, and the preset
        judged (None when nothing was)."""
        raise NotImplementedError

    def log_name(self) -> str:
        """The study's name in verdict logs (a study given by path logs under its ``name:``)."""
        return self.name

    def check(self, preset, sets, where: ResultsDir, out: Console, json_out: str | None = None) -> int:
        """Print each claim's verdict and a count (and log them in the store); 1 when one is not
        reproduced, else 0 (inconclusive and not run included)."""
        claims, what, *judged = self.verdicts(preset, sets, where, out)
        used = judged[0] if judged else preset
        self.log_verdicts(where, used, sets, claims, out)
        return self.print_verdicts(claims, what, used, out, json_out)

    def check_cells(self, preset, sets, table: Any, out: Console, json_out: str | None = None) -> int:
        """``check --cells``: the claims judged on a filled-in template, without a store."""
        plan = self.claim_plan(preset, sets)
        claims = judge_plan(plan, table, scope=self.scope(sets))
        what = f"{self.log_name()} ({plan.preset}): judged on the given cells"
        return self.print_verdicts(claims, what, plan.preset, out, json_out)

    def print_verdicts(self, claims, what: str, preset, out: Console, json_out: str | None) -> int:
        from mixerzoo.claims import PROJECT, count_line, count_verdicts, exit_code

        echo = out.text(json_out)
        echo_claims(claims, echo)
        echo(f"{what}; claims: {count_line(claims)}")
        if json_out:
            payload = {
                "study": self.log_name(),
                "preset": preset,
                "counts": count_verdicts(claims),
                "project_counts": count_verdicts(claims, PROJECT),
            }
            out.write_json(json_out, {**payload, "claims": claims})
        return exit_code(claims)

    def log_verdicts(self, where: ResultsDir, preset, sets, claims, out: Console) -> None:
        """Append the verdicts to ``<results>/verdicts/`` (a read-only store: one note, no log)."""
        from mixerzoo.studies.verdict_log import append_verdicts

        def note(line: str) -> None:
            out.echo(line, err=True)

        append_verdicts(where.root, self.log_name(), preset, claims, overrides=sets, note=note)

    # -- claims without a store --------------------------------------------------------------
    def scope(self, sets: dict[str, Any]) -> list[dict[str, Any]] | None:
        """The cells of the paper's own figure or table (its paper preset's planned cells), against
        which a verdict counts the cells it rests on; None where the study plans no paper preset."""
        from mixerzoo.registry import ConfigError

        try:
            return self.claim_plan("paper", sets).cells
        except ConfigError:
            return None

    def claim_plan(self, preset: str | None, sets: dict[str, Any]) -> ClaimPlan:
        """The claims and the planned cells of ``preset`` (with ``--set`` applied)."""
        raise NotImplementedError

    def template(self, preset: str | None, sets: dict[str, Any]) -> dict[str, Any]:
        """``{"metrics": {METRIC: higher | lower}, "cells": [{AXIS: VALUE, ..., METRIC: None}]}``:
        every planned cell with every metric the claims and their premises read."""
        return plan_template(self.claim_plan(preset, sets))

    def judge_cells(self, preset: str | None, sets: dict[str, Any], table: Any) -> list[dict[str, Any]]:
        """The claims' verdicts on a filled-in template (numbers from anywhere), without a store."""
        return judge_plan(self.claim_plan(preset, sets), table, scope=self.scope(sets))


def plan_template(plan: ClaimPlan) -> dict[str, Any]:
    """:meth:`Study.template` of an already built plan."""
    from mixerzoo.claims import claim_metrics, metric_direction
    from mixerzoo.claims.noise import N_TEST, SEEDS

    metrics = claim_metrics(plan.claims, plan.default_metric)
    sizes = dict.fromkeys((N_TEST, SEEDS))  # the size of each cell's evidence (the noise margin)
    cells = [
        {**{a: c[a] for a in plan.axes if a in c}, **dict.fromkeys(metrics), **sizes} for c in plan.cells
    ]
    return {"metrics": {m: metric_direction(m, plan.directions) for m in metrics}, "cells": cells}


def plan_shapes(plan: ClaimPlan) -> list[list[str]]:
    """The distinct axis sets of the planned cells (a result may plan cells of several shapes)."""
    shapes = {tuple(a for a in plan.axes if a in c): None for c in plan.cells}
    return [list(s) for s in shapes]


def judge_plan(
    plan: ClaimPlan, table: Any, where: str = "--cells", scope: list[dict[str, Any]] | None = None
) -> list[dict[str, Any]]:
    """``evaluate_claims`` over the cells of ``table`` (checked against the plan's axes)."""
    from mixerzoo.claims import evaluate_claims, read_cells_table

    return evaluate_claims(
        plan.claims,
        read_cells_table(table, plan.axes, where, shapes=plan_shapes(plan)),
        plan.default_metric,
        axes=plan.axes,
        directions=plan.directions,
        stand_ins=plan.stand_ins,
        preset=plan.preset,
        scope=scope,
    )


def echo_claims(claims: list[dict[str, Any]], echo: Callable[..., None]) -> None:
    """Each verdict and its evidence; the project's own predicates after the paper's, tagged."""
    from mixerzoo.claims import NOT_RUN, PROJECT, verdict_label

    ordered = [c for c in claims if c.get("source") != PROJECT] + [
        c for c in claims if c.get("source") == PROJECT
    ]
    for c in ordered:
        tag = " [project]" if c.get("source") == PROJECT else ""
        modified = ", modified preset" if c.get("modified_preset") else ""
        echo(f"[{verdict_label(c)}{modified}]{tag} {c['claim']} ({c['paper_ref']})")
        echo(f"    {c['evidence']}")
        if isinstance(c.get("strength"), dict) and c["verdict"] != NOT_RUN:
            echo(f"    strength: {c['strength']['text']}")


def quoted_claims(claims) -> list[dict[str, Any]]:
    """A file's claims as ``{"claim", "paper_ref", "source"}`` (before anything is judged), with
    ``paper_only`` (preset -> the measured reason) where a preset cannot decide the claim."""
    return [
        {"claim": c.claim, "paper_ref": c.paper_ref, "source": c.source}
        | ({"paper_only": dict(c.paper_only)} if c.paper_only else {})
        for c in claims
    ]
