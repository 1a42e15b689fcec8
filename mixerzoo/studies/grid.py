"""Grid studies: a sweep of run configs (``experiments/sweep.py``) and the MAD protocol over one.

Both plan their runs from an experiment file, run them into the results store through the local
or the Ray executor, and read them back by config hash; they differ in how the finished runs
become numbers: a sweep's cells and figure (``plots.py``, ``report.py``), MAD's scores per task
(``mad.py``).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from mixerzoo.registry import ConfigError
from mixerzoo.studies.base import Console, ResultsDir, RunOptions, Study, echo_claims, quoted_claims

PRESETS = ("quick", "paper")
#: run options that only a grid study takes (a computed study runs in this process)
GRID_OPTIONS = ("executor", "workers", "address", "num_cpus", "num_gpus", "skip_failed", "track", "track_dir")


class SweepStudy(Study):
    """A grid sweep: base config x variants x grid x seeds, with presets, a figure and claims."""

    kind = "sweep"

    def file(self):
        """The experiment file without a preset (its axes and claims as written)."""
        from mixerzoo.experiments.experiment_config import load_experiment

        return load_experiment(self.name)

    def load(self, preset: str, sets: dict[str, Any] | None = None):
        """The experiment with ``preset`` and the ``--set`` overrides applied."""
        from mixerzoo.experiments.experiment_config import load_experiment
        from mixerzoo.experiments.mad.levels import load_with_sets

        exp = self.file()
        if preset not in exp.presets:
            raise ConfigError(f"--preset {preset!r}: {exp.name} has presets {', '.join(exp.presets)}")
        return load_with_sets(self.name, preset, sets) if sets else load_experiment(self.name, preset=preset)

    # -- list / show -------------------------------------------------------------------------
    def row(self) -> dict[str, Any]:
        from mixerzoo.experiments.experiment_config import resolve_experiment_path

        exp = self.file()
        return {
            "name": exp.name,
            "kind": self.kind,
            "paper_ref": exp.paper,
            "runs": {preset: len(self.load(preset).expand()) for preset in exp.presets},
            "claims": quoted_claims(exp.claims),
            "description": exp.description,
            "path": str(resolve_experiment_path(self.name)),
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
        from mixerzoo.experiments.sweep import run_sweep
        from mixerzoo.experiments.tracking import make_trackers

        preset = preset or "quick"
        exp = self.load(preset, sets)
        if opts.address is not None and opts.executor != "ray":
            raise ConfigError("--address is for --executor ray")
        if opts.json_out is not None:
            raise ConfigError(
                f"--json: {exp.name} is a {self.kind}; its JSON is `mixerzoo study report --json`"
            )
        if opts.dry_run:
            self._dry_run(exp, preset, where, out)
            return 0
        store = where.open(create=True)
        trackers = make_trackers(list(opts.track), opts.track_dir or store.root / "tracking", exp.name)
        t0 = time.perf_counter()
        summary = run_sweep(
            exp,
            store,
            executor=opts.executor,
            workers=opts.workers,
            address=opts.address,
            num_cpus=opts.num_cpus,
            num_gpus=opts.num_gpus,
            skip_failed=opts.skip_failed,
            trackers=trackers,
            progress=not opts.quiet,
        )
        out.echo(f"{exp.name} ({preset}): {summary.line()}; wall time {time.perf_counter() - t0:.1f} s")
        nxt = f"mixerzoo study plot {self.name}{opts.again} / mixerzoo study report {self.name}{opts.again}"
        out.echo(f"results: {store.root}  (next: {nxt})")
        return 0

    def _dry_run(self, exp, preset: str, where: ResultsDir, out: Console) -> None:
        """List the planned runs and which are finished, reading the store (never creating it)."""
        from mixerzoo.experiments.results_store import DB_NAME

        root = where.root
        absent = not root.exists() or (root.is_dir() and not (root / DB_NAME).exists())
        store = None if absent else where.open()
        planned = exp.expand()
        done = 0
        for p in planned:
            rec = store.finished(p.config_hash) if store is not None else None
            done += rec is not None
            out.echo(f"{'finished' if rec else 'pending ':<8} {p.config_hash[:12]}  {p.config.name}")
        out.echo(f"{exp.name} ({preset}): {len(planned)} runs, {done} finished, {len(planned) - done} to run")

    # -- reading the store ------------------------------------------------------------------
    def open_for_reading(self, preset, sets, where: ResultsDir, out: Console):
        """(experiment, store, preset): a bad name or value is reported before the store is opened,
        which is opened read-only (a typo'd folder is never created)."""
        self.load(preset or "quick", sets)
        store = where.open()
        preset = self.pick_preset(preset, store, sets, out)
        return self.load(preset, sets), store, preset

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

    def plot(self, preset, sets, where, out_dir, out: Console) -> None:
        from mixerzoo.experiments.cells import collect_results, series
        from mixerzoo.experiments.plots import plot_experiment

        exp, store, preset = self.open_for_reading(preset, sets, where, out)
        res = collect_results(exp, store)
        paths = plot_experiment(res, out_dir or store.root / "figures")
        for (row, panel, line), pts in sorted(series(res).items(), key=lambda kv: str(kv[0])):
            at = " ".join(str(v) for v in (row, panel) if v is not None)
            out.echo(f"{at:<20} {str(line):<16} " + "  ".join(f"{x}:{y:.4f}" for x, y in pts))
        out.echo(f"x = {exp.figure.x}; {res.n_finished}/{res.n_runs} runs finished")
        for p in paths:
            out.echo(f"wrote {p}")

    def report(self, preset, sets, where, out_file, as_json, out: Console) -> None:
        from mixerzoo.experiments.cells import collect_results
        from mixerzoo.experiments.experiment_config import resolve_experiment_path
        from mixerzoo.experiments.report import claim_results, our_summary, report_json, write_report

        exp, store, preset = self.open_for_reading(preset, sets, where, out)
        res = collect_results(exp, store)
        target = Path(out_file) if out_file else store.root / "reports" / f"{exp.name}.html"
        yaml_text = resolve_experiment_path(self.name).read_text()
        path = write_report(res, target, preset=preset, experiment_yaml=yaml_text)
        if as_json:
            out.write_json("-", report_json(res, preset))
            out.echo(f"wrote {path}", err=True)
            return
        if exp.claim:
            out.echo(exp.claim)
        echo_claims(claim_results(res), out.echo)
        for line in our_summary(res):
            out.echo(f"ours:  {line}")
        out.echo(f"wrote {path}")

    def verdicts(self, preset, sets, where, out: Console):
        from mixerzoo.experiments.cells import collect_results
        from mixerzoo.experiments.report import claim_results

        exp, store, preset = self.open_for_reading(preset, sets, where, out)
        res = collect_results(exp, store)
        return claim_results(res), f"{exp.name} ({preset}): {res.n_finished}/{res.n_runs} runs finished"


class MadStudy(SweepStudy):
    """The MAD protocol: every task at each difficulty level over MAD's lr x weight-decay grid."""

    kind = "mad"

    def load(self, preset: str, sets: dict[str, Any] | None = None):
        from mixerzoo.experiments.mad.levels import mad_experiment

        exp = self.file()
        if preset not in exp.presets:
            raise ConfigError(f"--preset {preset!r}: {exp.name} has presets {', '.join(exp.presets)}")
        return mad_experiment(self.name, preset, sets or {})

    def _payload(self, preset, sets, where, out: Console):
        from mixerzoo.experiments.mad.report import mad_report

        exp, store, preset = self.open_for_reading(preset, sets, where, out)
        return exp, store, preset, mad_report(exp, store, preset)

    def plot(self, preset, sets, where, out_dir, out: Console) -> None:
        from mixerzoo.experiments.mad.report import plot_mad, score_lines

        _, store, _, payload = self._payload(preset, sets, where, out)
        for line in score_lines(payload):
            out.echo(line)
        for p in plot_mad(payload, out_dir or store.root / "figures"):
            out.echo(f"wrote {p}")

    def report(self, preset, sets, where, out_file, as_json, out: Console) -> None:
        from mixerzoo.experiments.mad.report import score_lines, write_mad_report

        exp, store, _, payload = self._payload(preset, sets, where, out)
        path = write_mad_report(
            payload, Path(out_file) if out_file else store.root / "reports" / f"{exp.name}.html"
        )
        if as_json:
            out.write_json("-", payload)
            out.echo(f"wrote {path}", err=True)
            return
        out.echo(exp.claim)
        echo_claims(payload["claims"], out.echo)
        for line in score_lines(payload):
            out.echo(line)
        out.echo(f"wrote {path}")

    def verdicts(self, preset, sets, where, out: Console):
        _, _, preset, payload = self._payload(preset, sets, where, out)
        runs = payload["runs"]
        return payload[
            "claims"
        ], f"{payload['experiment']} ({preset}): {runs['finished']}/{runs['planned']} runs finished"
