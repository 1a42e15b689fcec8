"""``mixerzoo run / plot / report / experiments``: experiment-level commands (sweeps, figures, reports).

    mixerzoo experiments                                  # shipped experiments and their presets
    mixerzoo run cat-mqar --preset quick                  # the CAT MQAR figure on a laptop (minutes)
    mixerzoo run cat-mqar --preset paper --executor ray --address ray://head:10001 --num-gpus 1
    mixerzoo plot cat-mqar --out figures/                 # PNG + SVG in the paper's layout
    mixerzoo report cat-mqar                              # one self-contained HTML page
    mixerzoo report cat-mqar --json                       # {"claims": [{claim, paper_ref, verdict, ...}]}
    mixerzoo check cat-mqar                               # exit 1 when a claim is not reproduced
    mixerzoo run mad --preset quick --set model=attention # the MAD protocol for one architecture
    mixerzoo report mad --set model=attention --json      # per-task MAD scores and their mean

``--set`` (repeatable, on run / plot / report / check) overrides the experiment: ``model=NAME``
keeps one variant of the file, or scores a registered sequence mixer NAME as a new variant;
``model={d_model: 64, mixer: gla}`` (YAML) is a variant ``custom`` merged into ``base.model``;
``PATH=VALUE`` (a dotted run-config path: ``model.d_model=64``, ``train.max_steps=500``) is set at
every run, after the preset. Give report / check / plot the same ``--set`` as the run.

EXPERIMENT is a shipped name or a path to an experiment YAML file. ``plot`` and ``report`` read
the runs from the results store by config hash; without ``--preset`` they use the preset with
the most finished runs there.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import click

from mixerzoo.cli.common import RESULTS_HELP, open_store, results_root, write_json
from mixerzoo.cli.paths import OutputPath
from mixerzoo.registry import ConfigError

PRESET_CHOICES = click.Choice(["quick", "paper"])


class Resource(click.FloatRange):
    """Ray resources per run (``--num-cpus``, ``--num-gpus``): a finite count or fraction, at least 0."""

    def __init__(self) -> None:
        super().__init__(min=0, max=1_000_000)

    def convert(self, value, param, ctx):
        value = super().convert(value, param, ctx)
        if value != value:  # NaN passes every range comparison
            self.fail("nan is not a number of devices", param, ctx)
        return value


RESOURCE = Resource()
SET_OPTION = click.option(
    "--set",
    "sets",
    multiple=True,
    metavar="KEY=VALUE",
    help="override: model=NAME (a variant or a mixer), model={...}, or a dotted path (model.d_model=64)",
)


def _load(experiment: str, preset: str, sets: tuple[str, ...] = ()):
    """The experiment with its preset and ``--set`` overrides; MAD experiments with their levels."""
    from mixerzoo.cli.common import parse_sets
    from mixerzoo.experiments.experiment_config import load_experiment
    from mixerzoo.experiments.mad import is_mad, load_with_sets, mad_experiment

    overrides = parse_sets(tuple(sets))
    if is_mad(experiment):
        return mad_experiment(experiment, preset, overrides)
    if overrides:
        return load_with_sets(experiment, preset, overrides)
    return load_experiment(experiment, preset=preset)


def _is_mad(experiment: str) -> bool:
    from mixerzoo.experiments.mad import is_mad

    return is_mad(experiment)


def _pick_preset(experiment: str, preset: str | None, store, sets: tuple[str, ...] = ()) -> str:
    """The given preset, else the one whose planned runs are most often finished in the store."""
    if preset is not None:
        return preset
    finished = {r.config_hash for r in store.runs(status="finished")}
    counts = {}
    for name in ("quick", "paper"):
        counts[name] = sum(p.config_hash in finished for p in _load(experiment, name, sets).expand())
    best = max(counts, key=lambda k: (counts[k], k == "quick"))
    click.echo(f"preset: {best} ({counts[best]} finished runs; pass --preset to choose)", err=True)
    return best


@click.command()
@click.argument("experiment")
@click.option(
    "--preset",
    type=PRESET_CHOICES,
    default="quick",
    show_default=True,
    help="quick: CPU, minutes; paper: the paper appendix's exact settings",
)
@click.option("--results", default=None, help=RESULTS_HELP)
@click.option("--executor", type=click.Choice(["local", "ray"]), default="local", show_default=True)
@click.option(
    "--workers",
    default=1,
    show_default=True,
    type=click.IntRange(min=1),
    help="local: worker processes (torch threads = cores // workers)",
)
@click.option("--address", default=None, help="ray: cluster address (default: start a local Ray instance)")
@click.option("--num-cpus", default=1.0, show_default=True, type=RESOURCE, help="ray: CPUs per run")
@click.option("--num-gpus", default=0.0, show_default=True, type=RESOURCE, help="ray: GPUs per run")
@click.option("--skip-failed", is_flag=True, help="do not retry configs that failed before")
@click.option("--dry-run", is_flag=True, help="list the planned runs and which are finished; train nothing")
@click.option(
    "--track",
    multiple=True,
    type=click.Choice(["tensorboard", "wandb"]),
    help="also mirror runs into TensorBoard / W&B offline (extras; repeatable)",
)
@click.option(
    "--track-dir",
    default=None,
    type=OutputPath("dir"),
    help="tracker output directory (default: <results>/tracking)",
)
@click.option("--quiet", is_flag=True, help="no progress bar")
@SET_OPTION
def run(
    experiment,
    preset,
    results,
    executor,
    workers,
    address,
    num_cpus,
    num_gpus,
    skip_failed,
    dry_run,
    track,
    track_dir,
    quiet,
    sets,
) -> None:
    """Run every not-yet-finished run of EXPERIMENT (resumable: finished configs are skipped).

    A run that fails is recorded with its error and the sweep goes on; a full disk stops it
    (exit 1, the run recorded as failed: no space left on device).
    """
    from mixerzoo.experiments.sweep import run_sweep
    from mixerzoo.experiments.tracking import make_trackers

    exp = _load(experiment, preset, sets)
    if address is not None and executor != "ray":
        raise ConfigError("--address is for --executor ray")
    if dry_run:
        _dry_run(exp, preset, results)
        return
    store = open_store(results)
    trackers = make_trackers(list(track), track_dir or store.root / "tracking", exp.name)
    t0 = time.perf_counter()
    summary = run_sweep(
        exp,
        store,
        executor=executor,
        workers=workers,
        address=address,
        num_cpus=num_cpus,
        num_gpus=num_gpus,
        skip_failed=skip_failed,
        trackers=trackers,
        progress=not quiet,
    )
    click.echo(f"{exp.name} ({preset}): {summary.line()}; wall time {time.perf_counter() - t0:.1f} s")
    again = "".join(f" --set {item}" for item in sets) + ("" if results is None else f" --results {results}")
    click.echo(
        f"results: {store.root}  (next: mixerzoo plot {experiment}{again} / "
        f"mixerzoo report {experiment}{again})"
    )


def _dry_run(exp, preset: str, results: str | None) -> None:
    """List the planned runs and which are finished, reading the store (never creating it)."""
    from mixerzoo.experiments.results_store import DB_NAME

    root = results_root(results)
    absent = not root.exists() or (root.is_dir() and not (root / DB_NAME).exists())
    store = None if absent else open_store(results, create=False)
    planned = exp.expand()
    done = 0
    for p in planned:
        rec = store.finished(p.config_hash) if store is not None else None
        done += rec is not None
        click.echo(f"{'finished' if rec else 'pending ':<8} {p.config_hash[:12]}  {p.config.name}")
    click.echo(f"{exp.name} ({preset}): {len(planned)} runs, {done} finished, {len(planned) - done} to run")


@click.command()
@click.argument("experiment")
@click.option(
    "--preset", type=PRESET_CHOICES, default=None, help="default: the preset with most finished runs"
)
@click.option(
    "--out",
    "out_dir",
    default=None,
    type=OutputPath("dir"),
    help="output directory (default: <results>/figures)",
)
@click.option("--results", default=None, help=RESULTS_HELP)
@SET_OPTION
def plot(experiment, preset, out_dir, results, sets) -> None:
    """Draw EXPERIMENT's figure (PNG and SVG) from the results store, and print its numbers."""
    from mixerzoo.experiments.plots import collect_results, plot_experiment, series

    _load(experiment, preset or "quick", sets)  # a bad experiment or name is reported before the store
    store = open_store(results, create=False)  # read-only: never create a typo'd directory
    preset = _pick_preset(experiment, preset, store, sets)
    if _is_mad(experiment):
        from mixerzoo.experiments.mad import mad_report, plot_mad, score_lines

        payload = mad_report(_load(experiment, preset, sets), store, preset)
        for line in score_lines(payload):
            click.echo(line)
        for p in plot_mad(payload, out_dir or store.root / "figures"):
            click.echo(f"wrote {p}")
        return
    res = collect_results(_load(experiment, preset, sets), store)
    paths = plot_experiment(res, out_dir or store.root / "figures")
    fig = res.experiment.figure
    for (row, panel, line), pts in sorted(series(res).items(), key=lambda kv: str(kv[0])):
        where = " ".join(str(v) for v in (row, panel) if v is not None)
        click.echo(f"{where:<20} {str(line):<16} " + "  ".join(f"{x}:{y:.4f}" for x, y in pts))
    click.echo(f"x = {fig.x}; {res.n_finished}/{res.n_runs} runs finished")
    for p in paths:
        click.echo(f"wrote {p}")


def _theory_result(experiment: str, results: str | None) -> dict | None:
    """A theory experiment (``mixerzoo theory run``) is reported from its stored result JSON;
    None when EXPERIMENT is not one. Before it has run, every claim is "not run"."""
    from mixerzoo.experiments.claims import NOT_RUN
    from mixerzoo.theory.experiments import load_theory, read_theory_result, theory_experiments

    root = results_root(results)
    if experiment not in theory_experiments():
        return None
    exp = load_theory(experiment)
    path = root / "theory" / f"{exp.name}.json"
    if not path.is_file():
        hint = f"no result in {str(path.parent)!r} yet: run `mixerzoo theory run {exp.name}`"
        claims = [
            {"claim": c.claim, "paper_ref": c.paper_ref, "verdict": NOT_RUN, "evidence": hint}
            for c in exp.claims
        ]
        return {"name": exp.name, "paper_ref": exp.paper_ref, "preset": None, "claims": claims, "cells": []}
    return read_theory_result(path)


@click.command()
@click.argument("experiment")
@click.option(
    "--preset", type=PRESET_CHOICES, default=None, help="default: the preset with most finished runs"
)
@click.option(
    "--out",
    "out_file",
    default=None,
    type=OutputPath(),
    help="HTML file (default: <results>/reports/<experiment>.html)",
)
@click.option("--results", default=None, help=RESULTS_HELP)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help='print {"claims": [{claim, paper_ref, verdict, evidence}], "runs", "cells", ...} instead of text',
)
@SET_OPTION
def report(experiment, preset, out_file, results, as_json, sets) -> None:
    """Write a self-contained HTML report: the paper's claims checked, figure, table, run configs."""
    from mixerzoo.experiments.experiment_config import resolve_experiment_path
    from mixerzoo.experiments.plots import collect_results
    from mixerzoo.experiments.report import claim_results, our_summary, report_json, write_report

    theory = _theory_result(experiment, results)
    if theory is not None:
        from mixerzoo.experiments.report import write_theory_report

        root = results_root(results)
        if results is not None and out_file is None and not root.is_dir():  # never create a typo'd one
            raise ConfigError(f"results directory {results!r} does not exist")
        path = write_theory_report(
            theory, Path(out_file) if out_file else root / "reports" / f"{experiment}.html"
        )
        if as_json:
            keys = ("name", "paper_ref", "preset", "claims", "cells")
            write_json("-", {"experiment": theory["name"], **{k: theory.get(k) for k in keys[1:]}})
            click.echo(f"wrote {path}", err=True)
        else:
            _echo_claims(theory["claims"])
            click.echo(f"wrote {path}")
        return
    _load(experiment, preset or "quick", sets)  # a bad experiment or name is reported before the store
    store = open_store(results, create=False)  # read-only: never create a typo'd directory
    preset = _pick_preset(experiment, preset, store, sets)
    exp = _load(experiment, preset, sets)
    if _is_mad(experiment):
        from mixerzoo.experiments.mad import mad_report, score_lines, write_mad_report

        payload = mad_report(exp, store, preset)
        path = write_mad_report(
            payload, Path(out_file) if out_file else store.root / "reports" / f"{exp.name}.html"
        )
        if as_json:
            write_json("-", payload)
            click.echo(f"wrote {path}", err=True)
            return
        click.echo(exp.claim)
        _echo_claims(payload["claims"])
        for line in score_lines(payload):
            click.echo(line)
        click.echo(f"wrote {path}")
        return
    res = collect_results(exp, store)
    out = Path(out_file) if out_file else store.root / "reports" / f"{exp.name}.html"
    path = write_report(
        res, out, preset=preset, experiment_yaml=resolve_experiment_path(experiment).read_text()
    )
    if as_json:
        write_json("-", report_json(res, preset))
        click.echo(f"wrote {path}", err=True)
        return
    if exp.claim:
        click.echo(exp.claim)
    _echo_claims(claim_results(res))
    for line in our_summary(res):
        click.echo(f"ours:  {line}")
    click.echo(f"wrote {path}")


def _echo_claims(claims: list[dict]) -> None:
    for c in claims:
        click.echo(f"[{c['verdict']}] {c['claim']} ({c['paper_ref']})")
        click.echo(f"    {c['evidence']}")


@click.command()
@click.argument("experiment")
@click.option(
    "--preset", type=PRESET_CHOICES, default=None, help="default: the preset with most finished runs"
)
@click.option("--results", default=None, help=RESULTS_HELP)
@SET_OPTION
def check(experiment, preset, results, sets) -> None:
    """Check EXPERIMENT's claims against the results store: exit 1 when one is not reproduced.

    Only cells whose runs have all finished decide a verdict; a claim with none is "not run"
    (printed, exit 0). Usable in CI: `mixerzoo run EXP --preset quick && mixerzoo check EXP`.
    """
    from mixerzoo.experiments.claims import NOT_REPRODUCED, NOT_RUN, REPRODUCED
    from mixerzoo.experiments.plots import collect_results
    from mixerzoo.experiments.report import claim_results

    theory = _theory_result(experiment, results)
    if theory is not None:
        claims, what = theory["claims"], f"{theory['name']} (theory, {theory['preset'] or 'not run'})"
    else:
        _load(experiment, preset or "quick", sets)  # a bad experiment or name is reported before the store
        store = open_store(results, create=False)  # read-only: never create a typo'd directory
        preset = _pick_preset(experiment, preset, store, sets)
        if _is_mad(experiment):
            from mixerzoo.experiments.mad import mad_report

            payload = mad_report(_load(experiment, preset, sets), store, preset)
            claims = payload["claims"]
            runs = payload["runs"]
            what = f"{payload['experiment']} ({preset}): {runs['finished']}/{runs['planned']} runs finished"
        else:
            res = collect_results(_load(experiment, preset, sets), store)
            claims = claim_results(res)
            what = f"{res.experiment.name} ({preset}): {res.n_finished}/{res.n_runs} runs finished"
    _echo_claims(claims)
    counts = {v: sum(c["verdict"] == v for c in claims) for v in (REPRODUCED, NOT_REPRODUCED, NOT_RUN)}
    click.echo(f"{what}; claims: " + ", ".join(f"{n} {v}" for v, n in counts.items()))
    if counts[NOT_REPRODUCED]:
        raise SystemExit(1)


@click.command()
@click.option(
    "--json", "as_json", is_flag=True, help="print [{name, paper, description, claim, claims, runs}]"
)
def experiments(as_json: bool) -> None:
    """List the shipped experiments with their presets and run counts."""
    from mixerzoo.experiments.experiment_config import load_experiment, shipped_experiments

    rows = []
    for name, path in shipped_experiments().items():
        exp = load_experiment(path)
        runs = {preset: len(_load(str(path), preset).expand()) for preset in exp.presets}
        rows.append(
            {
                "name": name,
                "paper": exp.paper,
                "description": exp.description,
                "claim": exp.claim,
                "claims": [{"claim": c.claim, "paper_ref": c.paper_ref} for c in exp.claims],
                "runs": runs,
                "path": str(path),
            }
        )
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    for r in rows:
        counts = ", ".join(f"{k}: {v} runs" for k, v in r["runs"].items())
        click.echo(f"{r['name']:<28} {r['paper']:<28} {counts}; {len(r['claims'])} claims")


COMMANDS: list[click.Command] = [run, plot, report, check, experiments]
