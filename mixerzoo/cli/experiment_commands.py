"""``mixerzoo run / plot / report / experiments``: experiment-level commands (sweeps, figures, reports).

    mixerzoo experiments                                  # shipped experiments and their presets
    mixerzoo run cat-mqar --preset quick                  # the CAT MQAR figure on a laptop (minutes)
    mixerzoo run cat-mqar --preset paper --executor ray --address ray://head:10001 --num-gpus 1
    mixerzoo plot cat-mqar --out figures/                 # PNG + SVG in the paper's layout
    mixerzoo report cat-mqar                              # one self-contained HTML page
    mixerzoo report cat-mqar --json                       # {"claims": [{claim, paper_ref, verdict, ...}]}
    mixerzoo check cat-mqar                               # exit 1 when a claim is not reproduced

EXPERIMENT is a shipped name or a path to an experiment YAML file. ``plot`` and ``report`` read
the runs from the results store by config hash; without ``--preset`` they use the preset with
the most finished runs there.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import click

from mixerzoo.cli.common import RESULTS_HELP, open_store, write_json
from mixerzoo.registry import ConfigError

PRESET_CHOICES = click.Choice(["quick", "paper"])


def _load(experiment: str, preset: str):
    from mixerzoo.experiments.experiment_config import load_experiment

    return load_experiment(experiment, preset=preset)


def _pick_preset(experiment: str, preset: str | None, store) -> str:
    """The given preset, else the one whose planned runs are most often finished in the store."""
    if preset is not None:
        return preset
    finished = {r.config_hash for r in store.runs(status="finished")}
    counts = {}
    for name in ("quick", "paper"):
        counts[name] = sum(p.config_hash in finished for p in _load(experiment, name).expand())
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
@click.option("--num-cpus", default=1.0, show_default=True, type=float, help="ray: CPUs per run")
@click.option("--num-gpus", default=0.0, show_default=True, type=float, help="ray: GPUs per run")
@click.option("--skip-failed", is_flag=True, help="do not retry configs that failed before")
@click.option("--dry-run", is_flag=True, help="list the planned runs and which are finished; train nothing")
@click.option(
    "--track",
    multiple=True,
    type=click.Choice(["tensorboard", "wandb"]),
    help="also mirror runs into TensorBoard / W&B offline (extras; repeatable)",
)
@click.option("--track-dir", default=None, help="tracker output directory (default: <results>/tracking)")
@click.option("--quiet", is_flag=True, help="no progress bar")
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
) -> None:
    """Run every not-yet-finished run of EXPERIMENT (resumable: finished configs are skipped)."""
    from mixerzoo.experiments.sweep import run_sweep
    from mixerzoo.experiments.tracking import make_trackers

    exp = _load(experiment, preset)
    if address is not None and executor != "ray":
        raise ConfigError("--address is for --executor ray")
    store = open_store(results)
    if dry_run:
        planned = exp.expand()
        done = 0
        for p in planned:
            rec = store.finished(p.config_hash)
            done += rec is not None
            click.echo(f"{'finished' if rec else 'pending ':<8} {p.config_hash[:12]}  {p.config.name}")
        click.echo(
            f"{exp.name} ({preset}): {len(planned)} runs, {done} finished, {len(planned) - done} to run"
        )
        return
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
    click.echo(
        f"results: {store.root}  (next: mixerzoo plot {experiment} / mixerzoo report {experiment}"
        f"{'' if results is None else f' --results {results}'})"
    )


@click.command()
@click.argument("experiment")
@click.option(
    "--preset", type=PRESET_CHOICES, default=None, help="default: the preset with most finished runs"
)
@click.option("--out", "out_dir", default=None, help="output directory (default: <results>/figures)")
@click.option("--results", default=None, help=RESULTS_HELP)
def plot(experiment, preset, out_dir, results) -> None:
    """Draw EXPERIMENT's figure (PNG and SVG) from the results store, and print its numbers."""
    from mixerzoo.experiments.plots import collect_results, plot_experiment, series

    _load(experiment, preset or "quick")  # a bad experiment or name is reported before the store
    _load(experiment, preset or "quick")  # a bad experiment or name is reported before the store
    store = open_store(results, create=False)  # read-only: never create a typo'd directory
    preset = _pick_preset(experiment, preset, store)
    res = collect_results(_load(experiment, preset), store)
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
    from mixerzoo.experiments.results_store import default_results_dir
    from mixerzoo.theory.experiments import load_theory, theory_experiments

    if experiment not in theory_experiments():
        return None
    exp = load_theory(experiment)
    path = (Path(results) if results else default_results_dir()) / "theory" / f"{exp.name}.json"
    if not path.is_file():
        hint = f"no result in {str(path.parent)!r} yet: run `mixerzoo theory run {exp.name}`"
        claims = [
            {"claim": c.claim, "paper_ref": c.paper_ref, "verdict": NOT_RUN, "evidence": hint}
            for c in exp.claims
        ]
        return {"name": exp.name, "paper_ref": exp.paper_ref, "preset": None, "claims": claims, "cells": []}
    try:
        payload = json.loads(path.read_text())
        payload["claims"], payload["name"]
    except (OSError, ValueError, KeyError, TypeError):
        raise ConfigError(f"{str(path)!r} is not a theory result written by `mixerzoo theory run`") from None
    return payload


@click.command()
@click.argument("experiment")
@click.option(
    "--preset", type=PRESET_CHOICES, default=None, help="default: the preset with most finished runs"
)
@click.option(
    "--out", "out_file", default=None, help="HTML file (default: <results>/reports/<experiment>.html)"
)
@click.option("--results", default=None, help=RESULTS_HELP)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help='print {"claims": [{claim, paper_ref, verdict, evidence}], "runs", "cells", ...} instead of text',
)
def report(experiment, preset, out_file, results, as_json) -> None:
    """Write a self-contained HTML report: the paper's claims checked, figure, table, run configs."""
    from mixerzoo.experiments.experiment_config import resolve_experiment_path
    from mixerzoo.experiments.plots import collect_results
    from mixerzoo.experiments.report import claim_results, our_summary, report_json, write_report

    theory = _theory_result(experiment, results)
    if theory is not None:
        from mixerzoo.experiments.report import write_theory_report
        from mixerzoo.experiments.results_store import default_results_dir

        root = Path(results) if results else default_results_dir()
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
    _load(experiment, preset or "quick")  # a bad experiment or name is reported before the store
    store = open_store(results, create=False)  # read-only: never create a typo'd directory
    preset = _pick_preset(experiment, preset, store)
    exp = _load(experiment, preset)
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
def check(experiment, preset, results) -> None:
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
        _load(experiment, preset or "quick")  # a bad experiment or name is reported before the store
        store = open_store(results, create=False)  # read-only: never create a typo'd directory
        preset = _pick_preset(experiment, preset, store)
        res = collect_results(_load(experiment, preset), store)
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
        runs = {preset: len(load_experiment(path, preset).expand()) for preset in exp.presets}
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
