"""Studies that are one run, stored as one result file: computed results (constructions and
bounds), language-model studies and probe studies (``kind: computed | lm | probe`` in
``studies/configs/*.yaml``). The run executes in this process, or as one Ray task
(``--executor ray``, ``studies/computed/remote.py``) whose result this process writes and records.

``run`` validates the parameters (preset over ``params``, then ``--set``), runs the result,
prints what the statement predicts beside what was measured and the claims' verdicts, and writes
``<results>/theory/NAME.json`` (and the figure, if the result draws one). ``plot``, ``report``
and ``check`` read that file; before it exists every claim is "not run".
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mixerzoo.registry import ConfigError
from mixerzoo.studies.base import (
    ClaimPlan,
    Console,
    ResultsDir,
    RunOptions,
    Study,
    echo_claims,
    quoted_claims,
    say_paper_only,
)
from mixerzoo.studies.sweep.study import GRID_OPTIONS
from mixerzoo.studies.verdict_log import PAPER_ONLY_EVIDENCE

RESULT_FOLDER = "theory"
#: the run options a computed study takes: where its one run executes
COMPUTED_RUN_OPTIONS = ("executor", "workers", "address", "num_cpus", "num_gpus")
#: the options of ``--dry-run``'s cost estimate (``studies/computed/cost.py``)
COST_OPTIONS = ("gpu", "utilisation")


class ComputedStudy(Study):
    """A theory experiment file: a result's parameters, presets and the paper's claims."""

    def __init__(self, name: str) -> None:
        from mixerzoo.studies.computed.files import load_theory

        super().__init__(name)
        self.exp = load_theory(name)
        self.kind = self.exp.kind  # the file's ``kind:``, checked against its result by the loader

    def result_path(self, where: ResultsDir) -> Path:
        return where.root / RESULT_FOLDER / f"{self.exp.name}.json"

    def row(self) -> dict[str, Any]:
        from mixerzoo.studies.computed.files import theory_experiments

        exp = self.exp
        path = theory_experiments().get(self.name, Path(self.name))
        return {
            "name": exp.name,
            "kind": self.kind,
            "paper_ref": exp.paper_ref,
            "runs": {preset: 0 if exp.paper_only(preset) else 1 for preset in exp.presets},
            "paper_only": {p: exp.paper_only(p) for p in exp.presets if exp.paper_only(p)},
            "claims": quoted_claims(exp.claims),
            "description": exp.module().STATEMENT,
            "path": str(path),
        }

    def claim_row(self) -> dict[str, Any]:
        exp = self.exp
        return {
            "name": exp.name,
            "kind": self.kind,
            "paper_ref": exp.paper_ref,
            "presets": list(exp.presets),
            "claims": quoted_claims(exp.claims),
        }

    def describe(self) -> dict[str, Any]:
        exp = self.exp
        params = {preset: self._params(preset).model_dump(mode="json") for preset in exp.presets}
        return {
            **self.row(),
            "details": " ".join(exp.description.split()),
            "presets": list(exp.presets),
            "default_preset": exp.default_preset,
            "parameters": params,
        }

    def _params(self, preset: str | None, sets: dict[str, Any] | None = None):
        from mixerzoo.studies.computed.files import resolve_params

        return resolve_params(self.exp, preset, sets or {})[1]

    # -- run --------------------------------------------------------------------------------
    def run(self, preset, sets, where: ResultsDir, opts: RunOptions, out: Console) -> int:
        from mixerzoo.studies.computed.cost import study_cost_lines
        from mixerzoo.studies.computed.files import any_not_reproduced
        from mixerzoo.studies.computed.records import record_theory, verdict_counts

        exp = self.exp
        self._check_options(opts, out)
        params = self._params(preset, sets)  # bad --preset / --set: one line, before any work
        folder = self.result_path(where).parent
        out.check_dir(folder, "--results")  # $MIXERZOO_RESULTS too, before any work
        echo = out.text(opts.json_out)  # stdout holds only the JSON with --json -
        chosen = preset or exp.default_preset
        if why := exp.paper_only(chosen):
            say_paper_only(f"{exp.name} ({chosen})", exp.name, "no run", why, where, opts.dry_run, echo)
            return 0
        if opts.dry_run:
            cost = study_cost_lines(exp, params, opts.gpu, opts.utilisation)  # a bad --gpu: one line first
            state = "present" if self.result_path(where).is_file() else "absent"
            echo(f"{exp.name} ({preset or exp.default_preset}): one {self.kind} run; result file {state}")
            echo(f"params: {params.model_dump_json()}")
            for line in cost:
                echo(line)
            return 0
        store = where.open(create=True)  # the result is recorded there as a run of kind computed
        echo(f"{exp.name}: {exp.paper_ref}")
        chosen, dumped = preset or exp.default_preset, params.model_dump(mode="json")
        with self._runner(opts, echo, store) as execute, record_theory(store, exp, chosen, dumped) as made:
            payload = execute(exp, preset, sets, folder, echo)
            out.write_json(str(self.result_path(where)), payload)
            made.metrics, made.output = verdict_counts(payload), self.result_path(where)
        if sets:
            store.stamp_overrides(made.run_id, sets, made.attempt)
        self._echo_payload(payload, echo)
        written = [str(self.result_path(where)), *payload["figures"]]
        echo(f"\n{payload['wall_s']:.1f} s; wrote {', '.join(written)}; recorded as run {made.run_id}")
        if opts.json_out:
            out.write_json(opts.json_out, payload)
        return 1 if any_not_reproduced(payload) else 0

    def _check_options(self, opts: RunOptions, out: Console) -> None:
        """One line for a grid study's option; the executor's options checked (Ray importable)."""
        exp = self.exp
        extra = opts.changed(*(o for o in GRID_OPTIONS if o not in (*COMPUTED_RUN_OPTIONS, *COST_OPTIONS)))
        if extra:
            raise ConfigError(f"{', '.join(extra)}: {exp.name} is a {self.kind} study, one run; not a sweep")
        if not opts.dry_run and opts.changed(*COST_OPTIONS):
            raise ConfigError(f"{', '.join(opts.changed(*COST_OPTIONS))}: for the cost of --dry-run")
        if opts.executor != "ray" and opts.changed("address", "num_cpus", "num_gpus"):
            raise ConfigError(
                f"{', '.join(opts.changed('address', 'num_cpus', 'num_gpus'))}: for --executor ray"
            )
        if opts.executor == "ray":
            from mixerzoo.studies.sweep.executors.ray_cluster import import_ray

            import_ray()  # the install hint, before any work
        if opts.workers > 1:
            out.echo(
                f"--workers {opts.workers}: {exp.name} is one {self.kind} run, run by one process; "
                "the other workers would have nothing to run",
                err=True,
            )

    @staticmethod
    def _runner(opts: RunOptions, echo, store=None):
        """A context giving ``run(exp, preset, sets, out_dir, log) -> payload``: in this process, or
        as one Ray task (``--executor ray``; Ray is reached before the attempt is recorded). In this
        process a probe study's models are runs of ``store`` (``computed/trained.py``)."""
        from contextlib import nullcontext

        if opts.executor == "ray":
            from mixerzoo.studies.computed.remote import ray_runner

            echo(f"running as one Ray task on {opts.address or 'a local instance'}")
            return ray_runner(opts.address, opts.num_cpus, opts.num_gpus)
        from mixerzoo.studies.computed.files import run_theory

        def run(exp, preset, sets, out_dir, log):
            trainer = None
            if store is not None and exp.kind == "probe":
                from mixerzoo.studies.computed.trained import store_trainer

                trainer = store_trainer(store, exp.name)
            return run_theory(exp, preset, sets, log=log, out_dir=out_dir, trainer=trainer)

        return nullcontext(run)

    @staticmethod
    def _echo_payload(payload: dict[str, Any], echo) -> None:
        echo("")
        echo(f"{'setting':<52} | {'predicted':<44} | measured")
        for line in payload["lines"]:
            echo(f"{line['setting']:<52} | {line['predicted']:<44} | {line['measured']}")
        echo("")
        from mixerzoo.claims import verdict_label

        for c in payload["claims"]:
            echo(f"[{verdict_label(c)}] {c['paper_ref']}: {c['claim']}")
            echo(f"    {c['evidence']}")

    # -- reading the result -----------------------------------------------------------------
    def stored(self, where: ResultsDir, preset: str | None = None) -> dict[str, Any]:
        """The stored result; before a run, every claim "not run" and no cells (with the reason
        where ``preset``, default the file's, is paper only)."""
        from mixerzoo.claims import NOT_RUN
        from mixerzoo.store.provenance import Provenance
        from mixerzoo.studies.computed.files import read_theory_result, rejudged

        exp, path = self.exp, self.result_path(where)
        if path.is_file():
            payload = rejudged(exp, read_theory_result(path), self.scope({}))
            prov = Provenance(payload.get("overrides") or {})
            prov.stamp(payload["claims"])  # "modified preset" when it ran with --set
            return {**payload, **prov.as_json(), "described": prov.describe(payload["preset"])}
        hint = f"no result in {str(path.parent)!r} yet: run `mixerzoo study run {exp.name}`"
        why = exp.paper_only(preset or exp.default_preset)
        hint = PAPER_ONLY_EVIDENCE + why if why else hint
        claims = [
            {
                "claim": c.claim,
                "paper_ref": c.paper_ref,
                "source": c.source,
                "verdict": NOT_RUN,
                "evidence": hint,
                "premise": None,
                "stand_ins": [],
            }
            for c in exp.claims
        ]
        chosen = (preset or exp.default_preset) if why else None  # a paper-only preset's verdicts are logged
        return {"name": exp.name, "paper_ref": exp.paper_ref, "preset": chosen, "claims": claims, "cells": []}

    def plot(self, preset, sets, where, out_dir, out: Console) -> None:
        """A computed result draws its figure when it runs: print its numbers and name the files."""
        payload = self.stored(where)
        if "lines" not in payload:  # nothing ran (a paper-only preset runs nothing either)
            raise ConfigError(
                f"{self.exp.name}: no result yet; run `mixerzoo study run {self.exp.name}` first"
            )
        self._echo_payload(payload, out.echo)
        figures = payload.get("figures") or []
        out.echo(
            f"figures (drawn by the run): {', '.join(figures)}" if figures else "this result draws no figure"
        )

    def report(self, preset, sets, where, out_file, as_json, out: Console) -> None:
        from mixerzoo.studies.sweep.report import write_theory_report

        payload = self.stored(where)
        if where.explicit and out_file is None and not where.root.is_dir():  # never create a typo'd one
            raise ConfigError(f"results directory {str(where.root)!r} does not exist")
        target = Path(out_file) if out_file else where.root / "reports" / f"{self.exp.name}.html"
        path = write_theory_report(payload, target)
        self.log_verdicts(where, payload["preset"], payload.get("overrides") or sets, payload["claims"], out)
        if as_json:
            from mixerzoo.claims import stand_in_labels

            keys = ("paper_ref", "preset", "overrides", "modified_preset", "claims", "cells")
            named = (
                {"stand_ins": stand_in_labels(self.exp.stand_ins, payload["preset"])}
                if payload["preset"]
                else {}
            )
            out.write_json("-", {"experiment": payload["name"], **{k: payload.get(k) for k in keys}, **named})
            out.echo(f"wrote {path}", err=True)
            return
        echo_claims(payload["claims"], out.echo)
        out.echo(f"wrote {path}")

    def verdicts(self, preset, sets, where, out: Console):
        payload = self.stored(where, preset)
        what = f"{payload['name']} ({self.kind}, {payload.get('described') or 'not run'})"
        return payload["claims"], what, payload["preset"]

    def log_name(self) -> str:
        return self.exp.name

    # -- claims without a store -------------------------------------------------------------
    def claim_plan(self, preset, sets) -> ClaimPlan:
        """The cells the result's module plans (``plan_cells(params)``, axis keys only)."""
        exp = self.exp
        chosen = preset or exp.default_preset
        params = self._params(chosen, sets).model_dump(mode="json")
        cells = planned_cells(exp, params)
        axes = list(dict.fromkeys(k for c in cells for k in c))
        default = getattr(exp.module(), "METRIC", None)
        return ClaimPlan(exp.claims, default, cells, axes, exp.metrics, exp.stand_ins, chosen)


def planned_cells(exp, params: dict[str, Any]) -> list[dict[str, Any]]:
    """The result module's ``plan_cells(params)``; a module without it is one ConfigError line."""
    plan = getattr(exp.module(), "plan_cells", None)
    if plan is None:
        raise ConfigError(f"{exp.name} does not plan its cells before running")
    cells = plan(params)
    if not isinstance(cells, list) or not all(isinstance(c, dict) for c in cells):
        raise ConfigError(f"{exp.name}: plan_cells returned {type(cells).__name__}, not a list of mappings")
    return cells
