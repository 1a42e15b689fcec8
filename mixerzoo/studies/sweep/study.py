"""Grid studies: a sweep of run configs (``studies/sweep/runner.py``) and the MAD protocol over one.

Both plan their runs from an experiment file, run them into the results store through the local
or the Ray executor, and read them back by config hash; they differ in how the finished runs
become numbers: a sweep's cells and figure (``plots.py``, ``report.py``), MAD's scores per task
(``mad.py``).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from mixerzoo.registry import ConfigError, count
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

PRESETS = ("quick", "paper")
#: run options that only a grid study takes (a computed study runs in this process)
GRID_OPTIONS = (
    "executor",
    "workers",
    "runs_per_gpu",
    "address",
    "num_cpus",
    "num_gpus",
    "skip_failed",
    "reuse_stale",
    "track",
    "track_dir",
    "track_project",
    "track_entity",
    "track_mode",
    "gpu",
    "utilisation",
)


class SweepStudy(Study):
    """A grid sweep: base config x variants x grid x seeds, with presets, a figure and claims."""

    kind = "sweep"

    def file(self):
        """The experiment file without a preset (its axes and claims as written)."""
        from mixerzoo.studies.sweep.config import load_experiment

        return load_experiment(self.name)

    def load(self, preset: str, sets: dict[str, Any] | None = None):
        """The experiment with ``preset`` and the ``--set`` overrides applied."""
        from mixerzoo.studies.sweep.config import load_experiment
        from mixerzoo.studies.sweep.overrides import load_with_sets

        exp = self.file()
        if preset not in exp.presets:
            raise ConfigError(f"--preset {preset!r}: {exp.name} has presets {', '.join(exp.presets)}")
        return load_with_sets(self.name, preset, sets) if sets else load_experiment(self.name, preset=preset)

    # -- list / show -------------------------------------------------------------------------
    def row(self) -> dict[str, Any]:
        from mixerzoo.studies.sweep.config import resolve_experiment_path
        from mixerzoo.studies.sweep.run_count import count_planned

        exp = self.file()
        loaded = {preset: self.load(preset) for preset in exp.presets}
        return {
            "name": exp.name,
            "kind": self.kind,
            "paper_ref": exp.paper,
            "runs": {preset: count_planned(one) for preset, one in loaded.items()},
            "paper_only": {preset: one.paper_only for preset, one in loaded.items() if one.paper_only},
            "claims_paper_only": {
                p: one.claims_paper_only for p, one in loaded.items() if one.claims_paper_only
            },
            "claims": quoted_claims(exp.claims),
            "description": exp.description,
            "path": str(resolve_experiment_path(self.name)),
        }

    def claim_row(self) -> dict[str, Any]:
        exp = self.file()
        return {
            "name": exp.name,
            "kind": self.kind,
            "paper_ref": exp.paper,
            "presets": list(exp.presets),
            "claims": quoted_claims(exp.claims),
        }

    def describe(self) -> dict[str, Any]:
        exp = self.file()
        axes = {
            axis: [str(v) if isinstance(v, dict) else v for v in values]
            for axis, values in exp.axes().items()
        }
        return {**self.row(), "claim": exp.claim, "axes": axes, "presets": list(exp.presets)}

    # -- run --------------------------------------------------------------------------------
    def run(self, preset, sets, where: ResultsDir, opts: RunOptions, out: Console) -> int:
        from mixerzoo.runs.tracking import TrackSpec
        from mixerzoo.studies.sweep.overrides import ADD_MODEL, override_text
        from mixerzoo.studies.sweep.runner import run_sweep

        preset = preset or "quick"
        exp = self.load(preset, sets)
        if opts.address is not None and opts.executor != "ray":
            raise ConfigError("--address is for --executor ray")
        if opts.json_out is not None:
            raise ConfigError(
                f"--json: {exp.name} is a {self.kind}; its JSON is `mixerzoo study report --json`"
            )
        if exp.paper_only:
            label = f"{exp.name} ({preset})"
            say_paper_only(label, self.name, "no runs", exp.paper_only, where, opts.dry_run, out.echo)
            return 0
        if exp.claims_paper_only:
            why = " ".join(exp.claims_paper_only.split())
            out.echo(f"{exp.name} ({preset}): its claims are for the paper preset only: {why}")
        if opts.dry_run:
            self._dry_run(exp, preset, where, out, opts)
            return 0
        if opts.changed("gpu", "utilisation"):
            raise ConfigError(f"{', '.join(opts.changed('gpu', 'utilisation'))}: for the cost of --dry-run")
        workers = self._workers(opts)
        tracking = None
        if opts.track:  # checked before the store is created: a missing package is one line
            tracking = TrackSpec(
                backends=opts.track,
                log_dir=str(opts.track_dir or where.root / "tracking"),
                project=opts.track_project,
                entity=opts.track_entity,
                mode=opts.track_mode,
            ).check()
        store = where.open(create=True)
        t0 = time.perf_counter()
        summary = run_sweep(
            exp,
            store,
            executor=opts.executor,
            workers=workers,
            address=opts.address,
            num_cpus=opts.num_cpus,
            num_gpus=opts.num_gpus,
            skip_failed=opts.skip_failed,
            reuse_stale=opts.reuse_stale,
            # an added model changes no run of the preset's own: its runs record only the paths
            overrides={k: v for k, v in (sets or {}).items() if k != ADD_MODEL} or None,
            tracking=tracking,
            progress=not opts.quiet,
        )
        made = f"{preset}, modified: {override_text(sets)}" if sets else preset
        out.echo(f"{exp.name} ({made}): {summary.line()}; wall time {time.perf_counter() - t0:.1f} s")
        nxt = f"mixerzoo study plot {self.name}{opts.again} / mixerzoo study report {self.name}{opts.again}"
        out.echo(f"results: {store.root}  (next: {nxt})")
        return 0

    @staticmethod
    def _workers(opts: RunOptions) -> int:
        """Local worker processes: ``--workers``, or ``--runs-per-gpu`` K per visible GPU."""
        from mixerzoo.studies.sweep.executors.local import cuda_device_count, local_workers

        if opts.runs_per_gpu is None:
            return opts.workers
        if opts.executor != "local":
            raise ConfigError("--runs-per-gpu is for --executor local (ray: --num-gpus per run)")
        return local_workers(opts.workers, opts.runs_per_gpu, cuda_device_count())

    def _dry_run(self, exp, preset: str, where: ResultsDir, out: Console, opts: RunOptions) -> None:
        """List the planned runs, which are finished (reading the store, never creating it), and
        what each costs (``studies/sweep/cost.py``)."""
        from mixerzoo.store.results import DB_NAME
        from mixerzoo.studies.sweep.cost import (
            cost_summary,
            pool_seconds,
            summary_line,
            sweep_cost,
            wall_time,
            wall_time_line,
            workers_line,
        )
        from mixerzoo.studies.sweep.plan import finished_hashes

        root = where.root
        absent = not root.exists() or (root.is_dir() and not (root / DB_NAME).exists())
        store = None if absent else where.open()
        planned = exp.expand()
        costs = sweep_cost([p.config for p in planned], opts.gpu, opts.utilisation)
        current, stale = finished_hashes(store.runs()) if store is not None else (set(), set())
        reused = current | stale if opts.reuse_stale else current
        done = 0
        for p, c in zip(planned, costs):
            h = p.config_hash
            done += h in reused
            state = "finished" if h in reused else "stale" if h in stale else "pending"
            cost = f"{c.tokens:.3g} tokens  {c.flops:.3g} FLOPs  {c.gpu_hours:.3g} GPU-h"
            out.echo(f"{state:<8} {p.config_hash[:12]}  {p.config.name}  {cost}")
        todo = len(planned) - done
        out.echo(f"{exp.name} ({preset}): {count(len(planned), 'run')}, {done} finished, {todo} to run")
        out.echo(summary_line(cost_summary(costs, opts.gpu, opts.utilisation)))
        left = [p.config for p in planned if p.config_hash not in reused]
        finished = store.runs(status="finished") if store is not None else []
        sequential = wall_time(left, finished) if left else None
        out.echo(wall_time_line(left, store, sequential))
        if opts.workers > 1 and sequential is not None:
            seconds = pool_seconds(left, finished, opts.workers, sequential)
            out.echo(workers_line(seconds, opts.workers, sequential.device))

    # -- reading the store ------------------------------------------------------------------
    def open_for_reading(self, preset, sets, where: ResultsDir, out: Console):
        """(experiment, store, preset): a bad name or value is reported before the store is opened,
        which is opened read-only (a typo'd folder is never created)."""
        self.load(preset or "quick", sets)
        store = where.open()
        preset = self.pick_preset(preset, store, sets, out)
        return self.load(preset, sets), store, preset

    def changes(self, preset: str, sets, planned):
        """What ``sets`` change (:class:`~mixerzoo.studies.sweep.overrides.Changes`): which of the
        ``planned`` runs the preset as shipped does not plan."""
        from mixerzoo.studies.sweep.overrides import changes_of

        return changes_of(sets, planned, self.load(preset).expand() if sets else None)

    def pick_preset(self, preset, store, sets, out: Console) -> str:
        """The given preset, else the one whose planned runs are most often finished in the store."""
        if preset is not None:
            return preset
        finished = {r.config_hash for r in store.runs(status="finished")}
        counts = {
            name: sum(p.config_hash in finished for p in self.load(name, sets).expand()) for name in PRESETS
        }
        best = max(counts, key=lambda k: (counts[k], k == "quick"))
        out.echo(f"preset: {best} ({counts[best]} finished runs; pass --preset to choose)", err=True)
        return best

    def plot(self, preset, sets, where, out_dir, out: Console, style=None) -> None:
        """``style``: a :class:`~mixerzoo.studies.sweep.plots.FigureStyle` (title, formats, dpi, band)."""
        from mixerzoo.studies.sweep.cells import collect_results, series
        from mixerzoo.studies.sweep.plots import plot_experiment

        exp, store, preset = self.open_for_reading(preset, sets, where, out)
        res = collect_results(exp, store, sets)
        changes = self.changes(preset, sets, [p for c in res.cells for p in c.planned])
        folder = out_dir or store.root / "figures"
        paths = plot_experiment(res, folder, stem=changes.stem(exp.name), style=style, changes=changes)
        for (row, panel, line), pts in sorted(series(res).items(), key=lambda kv: str(kv[0])):
            at = " ".join(str(v) for v in (row, panel) if v is not None)
            out.echo(f"{at:<20} {str(line):<16} " + "  ".join(f"{x}:{y:.4f}" for x, y in pts))
        out.echo(f"x = {exp.figure.x}; {res.n_finished}/{res.n_runs} runs finished")
        for note in res.provenance.notes():
            out.echo(note)
        for p in paths:
            out.echo(f"wrote {p}")

    def report(self, preset, sets, where, out_file, as_json, out: Console) -> None:
        from mixerzoo.studies.sweep.cells import collect_results
        from mixerzoo.studies.sweep.config import resolve_experiment_path
        from mixerzoo.studies.sweep.report import claim_results, our_summary, report_json, write_report

        exp, store, preset = self.open_for_reading(preset, sets, where, out)
        res = collect_results(exp, store, sets)
        changes = self.changes(preset, sets, [p for c in res.cells for p in c.planned])
        name = changes.stem(exp.name)  # a modified preset never overwrites the study's own report
        target = Path(out_file) if out_file else store.root / "reports" / f"{name}.html"
        yaml_text = resolve_experiment_path(self.name).read_text()
        scope = self.scope(sets)
        path = write_report(res, target, preset, yaml_text, scope, changes)
        claims = claim_results(res, preset, scope, changes)
        self.log_verdicts(where, preset, sets, claims, out)
        if as_json:
            out.write_json("-", report_json(res, preset, scope, changes))
            out.echo(f"wrote {path}", err=True)
            return
        out.echo(f"{exp.name} ({res.provenance.describe(preset)})")
        for note in res.provenance.notes():
            out.echo(note)
        if exp.claim:
            out.echo(exp.claim)
        echo_claims(claims, out.echo)
        for line in our_summary(res):
            out.echo(f"ours:  {line}")
        out.echo(f"wrote {path}")

    def verdicts(self, preset, sets, where, out: Console):
        from mixerzoo.studies.sweep.cells import collect_results
        from mixerzoo.studies.sweep.report import claim_results

        exp, store, preset = self.open_for_reading(preset, sets, where, out)
        res = collect_results(exp, store, sets)
        changes = self.changes(preset, sets, [p for c in res.cells for p in c.planned])
        claims = claim_results(res, preset, self.scope(sets), changes)
        stale = f"; {res.provenance.stale_text()}" if res.provenance.stale else ""
        described = res.provenance.describe(preset)
        return claims, f"{exp.name} ({described}): {res.n_finished}/{res.n_runs} runs finished{stale}", preset

    def log_name(self) -> str:
        return self.file().name

    def claim_plan(self, preset, sets) -> ClaimPlan:
        """The preset's planned cells as the aggregated cells have them (axes, variant, seed)."""
        preset = preset or "quick"
        exp = self.load(preset, sets)
        return self._plan_of(exp, preset)

    def scope(self, sets) -> list[dict[str, Any]] | None:
        """The paper preset's cells (one run of each: the axes a cell reduces over are fixed to
        their first value, which leaves the cells as they are and skips thousands of configs)."""
        from mixerzoo.studies.sweep.config import SEED, SEED_PATH

        try:
            exp = self.load("paper", sets)
        except ConfigError:
            return None
        over = {SEED if o == SEED_PATH else o for o in exp.aggregate.over}
        grid = {a: v[:1] if a in over else v for a, v in exp.grid.items()}
        seeds = exp.seeds[:1] if SEED in over else exp.seeds
        exp = exp.model_copy(update={"grid": grid, "seeds": seeds})
        return self._plan_of(exp, "paper").cells

    def _plan_of(self, exp, preset: str) -> ClaimPlan:
        from mixerzoo.studies.sweep.cells import CellResult, ExperimentResults
        from mixerzoo.studies.sweep.report import claim_cells, own_cells

        cells: dict[str, CellResult] = {}
        for p in exp.expand():
            cells.setdefault(p.cell_key, CellResult(cell=p.cell)).planned.append(p)
        planned, axes = claim_cells(ExperimentResults(exp, list(cells.values())))
        planned = own_cells(planned, exp.added_variants)  # the claims never read an added model
        return ClaimPlan(exp.claims, exp.aggregate.metric, planned, axes, exp.metrics, exp.stand_ins, preset)


class MadStudy(SweepStudy):
    """The MAD protocol: every task at each difficulty level over MAD's lr x weight-decay grid."""

    kind = "mad"

    def scope(self, sets) -> list[dict[str, Any]] | None:
        """The paper preset's (variant, task) cells."""
        return Study.scope(self, sets)

    def load(self, preset: str, sets: dict[str, Any] | None = None):
        from mixerzoo.studies.mad.levels import mad_experiment

        exp = self.file()
        if preset not in exp.presets:
            raise ConfigError(f"--preset {preset!r}: {exp.name} has presets {', '.join(exp.presets)}")
        return mad_experiment(self.name, preset, sets or {})

    def _payload(self, preset, sets, where, out: Console):
        """The report payload, with the overrides and stale runs behind it (``provenance.py``)."""
        from mixerzoo.studies.mad.report import mad_report
        from mixerzoo.studies.sweep.cells import collect_results

        exp, store, preset = self.open_for_reading(preset, sets, where, out)
        res = collect_results(exp, store, sets)
        changes = self.changes(preset, sets, [p for c in res.cells for p in c.planned])
        payload = mad_report(exp, store, preset, changes, res.provenance)
        payload.update(res.provenance.as_json(), described=res.provenance.describe(preset))
        payload["stem"] = changes.stem(exp.name)  # a modified preset never overwrites the study's own files
        return exp, store, preset, payload

    def plot(self, preset, sets, where, out_dir, out: Console) -> None:
        from mixerzoo.studies.mad.report import plot_mad, score_lines

        _, store, _, payload = self._payload(preset, sets, where, out)
        for line in score_lines(payload):
            out.echo(line)
        for p in plot_mad(payload, out_dir or store.root / "figures", stem=payload["stem"]):
            out.echo(f"wrote {p}")

    def report(self, preset, sets, where, out_file, as_json, out: Console) -> None:
        from mixerzoo.studies.mad.report import score_lines, write_mad_report

        exp, store, preset, payload = self._payload(preset, sets, where, out)
        self.log_verdicts(where, preset, sets, payload["claims"], out)
        path = write_mad_report(
            payload, Path(out_file) if out_file else store.root / "reports" / f"{payload['stem']}.html"
        )
        if as_json:
            out.write_json("-", payload)
            out.echo(f"wrote {path}", err=True)
            return
        out.echo(f"{exp.name} ({payload['described']})")
        out.echo(exp.claim)
        echo_claims(payload["claims"], out.echo)
        for line in score_lines(payload):
            out.echo(line)
        out.echo(f"wrote {path}")

    def verdicts(self, preset, sets, where, out: Console):
        _, _, preset, payload = self._payload(preset, sets, where, out)
        runs = payload["runs"]
        stale = f"; {payload['stale_runs']} runs reused from other code" if payload["stale_runs"] else ""
        counts = f"{runs['finished']}/{runs['planned']} runs finished"
        return payload["claims"], f"{payload['experiment']} ({payload['described']}): {counts}{stale}", preset

    def claim_plan(self, preset, sets) -> ClaimPlan:
        """One cell per (variant, task) the preset plans, and each variant's mean over tasks."""
        from mixerzoo.studies.mad.levels import TASK_AXIS
        from mixerzoo.studies.mad.scoring import MEAN, SCORE
        from mixerzoo.studies.sweep.config import VARIANT

        preset = preset or "quick"
        exp = self.load(preset, sets)
        added = set(exp.added_variants)  # the claims never read an added model
        pairs = dict.fromkeys(
            (p.cell[VARIANT], _task_of(p)) for p in exp.expand() if p.cell[VARIANT] not in added
        )
        variants = dict.fromkeys(v for v, _ in pairs)
        cells = [{VARIANT: v, TASK_AXIS: t} for v, t in [*pairs, *((v, MEAN) for v in variants)]]
        return ClaimPlan(exp.claims, SCORE, cells, [VARIANT, TASK_AXIS], exp.metrics, exp.stand_ins, preset)


def _task_of(planned) -> str:
    """The MAD task of a planned run (its run config's task name)."""
    return planned.config.data.task.name
