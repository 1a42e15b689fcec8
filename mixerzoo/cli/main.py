"""The ``mixerzoo`` command line.

    mixerzoo demo                          # the quick demo (1-layer CAT vs 1-/2-layer attention on MQAR)
    mixerzoo train run.yaml                # one run into the results store
    mixerzoo data mqar --set seq_len=256 --n 100000 --out mqar.npz
    mixerzoo eval results/checkpoints/<run>.pt --data mqar.npz
    mixerzoo results | mixers | tasks [--json]
    mixerzoo bench [--mixers attention,cat --seq-lens 256,1024]

Bad input (unknown name, missing file, invalid value) exits with code 2 and one line that
says what is wrong and what is allowed.
"""

from __future__ import annotations

import errno
import json
import sys
from pathlib import Path

import click

from mixerzoo.cli.common import (
    RESULTS_HELP,
    open_store,
    parse_sets,
    text_echo,
    track_options,
    track_spec,
)
from mixerzoo.cli.grouped import GroupedCli
from mixerzoo.cli.paths import OutputPath
from mixerzoo.outputs import check_output_path, write_json
from mixerzoo.registry import ConfigError
from mixerzoo.store.lookup import results_root

#: metrics printed after a run, when present (each output kind reports its own)
SUMMARY_METRICS = ("accuracy_per_query", "accuracy_per_example", "accuracy_macro", "accuracy", "r2", "loss")


@click.group(cls=GroupedCli, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="mixerzoo")
def cli() -> None:
    """mixerzoo: train, compare and understand sequence mixers on mechanistic tasks."""


@cli.command()
@click.argument("config", type=click.Path(dir_okay=False))
@click.option("--results", default=None, help=RESULTS_HELP)
@click.option(
    "--json",
    "json_out",
    default=None,
    type=OutputPath(stdout=True),
    help="also write the run record as JSON (- for stdout)",
)
@click.option("--quiet", is_flag=True, help="no progress bar")
@click.option(
    "--set",
    "sets",
    multiple=True,
    metavar="KEY=VALUE",
    help="override a config value: train.lr=1e-3, model.d_model=32 (repeatable; part of the run's config)",
)
@track_options
def train(
    config: str, results: str | None, json_out: str | None, quiet: bool, sets: tuple[str, ...], **track
) -> None:
    """Train one run described by a YAML/JSON CONFIG file.

    ``--set PATH=VALUE`` overrides a field of the file (a dotted path, the value read as YAML); the
    overrides are part of the run's config, and so of its config hash. Training the same config again
    adds an attempt to its run. Exit 1 (one line) when the attempt failed (diverged loss, full disk),
    130/143 on Ctrl-C/SIGTERM (recorded as interrupted); a config error exits 2 before anything is
    recorded.
    """
    from mixerzoo.config import load_run_config
    from mixerzoo.runs.task import Terminated, execute_run, preflight, sigterm_as_interrupt

    overrides = parse_sets(sets)
    cfg = load_run_config(config, sets=overrides)
    preflight(cfg)  # a config error is reported before the store is opened (or created)
    tracking = track_spec(track, results_root(results) / "tracking")
    store = open_store(results)
    try:
        with sigterm_as_interrupt():
            rec = execute_run(
                cfg,
                store,
                progress=not quiet,
                raise_errors=False,
                tracking=tracking,
                overrides=overrides or None,
            )
    except Terminated:
        click.echo("terminated (SIGTERM): the run is recorded as interrupted", err=True)
        sys.exit(143)
    if json_out:
        write_json(json_out, rec.to_json())
    made = rec.last_attempt
    if made is None or made.outcome != "finished":
        reason = (made.error if made else None) or "failed"
        click.echo(f"error: run {rec.run_id} ({rec.name}) failed: {reason.strip().splitlines()[0]}", err=True)
        sys.exit(1)
    metrics = made.metrics
    shown = [k for k in SUMMARY_METRICS if k in metrics]
    shown += sorted(k for k in metrics if k.startswith(("accuracy@", "regbench_")))
    summary = "  ".join(f"{k} {metrics[k]:.4f}" for k in shown)
    echo = text_echo(json_out)
    echo(f"run {rec.run_id} ({rec.name}): {summary}  {made.wall_s:.1f} s  {made.params:,} params")
    echo(f"checkpoint: {made.checkpoint}")


@cli.command()
@click.option("--results", default=None, help=RESULTS_HELP)
@click.option(
    "--json",
    "json_out",
    default=None,
    type=OutputPath(stdout=True),
    help="write {'models': [...]} as JSON (- for stdout)",
)
@click.option(
    "--plot", "plot_path", default=None, type=OutputPath(), help="figure PNG (default: <results>/demo.png)"
)
@click.option("--quiet", is_flag=True, help="no progress bars")
def demo(results: str | None, json_out: str | None, plot_path: str | None, quiet: bool) -> None:
    """Train 1-layer CAT and 1-/2-layer attention on MQAR: learning curves, steps to 0.99 (~2 min, CPU)."""
    import time
    from dataclasses import asdict

    from mixerzoo.runs.demo import format_table, plot_demo, run_demo, summary

    t0 = time.perf_counter()
    echo = text_echo(json_out)
    store = open_store(results)
    rows = run_demo(store, progress=not quiet, log=echo)
    echo("")
    echo(format_table(rows))
    echo("\n".join(["", *summary(rows)]))
    png = plot_demo(rows, Path(plot_path) if plot_path else store.root / "demo.png")
    total = time.perf_counter() - t0
    echo(f"\nplot: {png}\ntotal wall time: {total:.1f} s")
    if json_out:
        write_json(json_out, {"models": [asdict(r) for r in rows], "total_wall_s": total})


@cli.command()
@click.argument("task")
@click.option("--set", "sets", multiple=True, help="task parameter key=value (repeatable)")
@click.option(
    "--n", "n", default=1000, show_default=True, type=click.IntRange(min=1), help="number of examples"
)
@click.option("--seed", default=0, show_default=True, type=click.IntRange(min=0))
@click.option("--split", default="train", show_default=True, type=click.Choice(["train", "test", "valid"]))
@click.option("--out", default=None, type=OutputPath(), help="output .npz path")
@click.option("--stats", is_flag=True, help="print mean / std / min / max of each per-example number")
def data(
    task: str, sets: tuple[str, ...], n: int, seed: int, split: str, out: str | None, stats: bool
) -> None:
    """Materialize N examples of TASK as .npz (inputs, labels and task-specific arrays).

    With --stats, also print a summary of the data set (for RegBench: instance length, strings
    and states after minimization); --stats alone generates without writing a file.
    """
    import time

    import numpy as np

    from mixerzoo.tasks import build_task

    if out is None and not stats:
        raise ConfigError("data: give --out PATH (write the examples), --stats (summarize them) or both")
    if out is not None:  # the file np.savez writes: --out with .npz added
        check_output_path(out if out.endswith(".npz") else out + ".npz", "data --out")
    t0 = time.perf_counter()
    task_obj = build_task(task, **parse_sets(sets))
    d = task_obj.make(n, seed, split)
    shape = tuple(d.inputs.shape)
    if out is not None:
        path = Path(out if out.endswith(".npz") else out + ".npz")  # what np.savez writes
        path.parent.mkdir(parents=True, exist_ok=True)
        np.savez(path, **d.arrays())
        writer = getattr(task_obj, "write_sidecar", None)
        extra = writer(d, path) if writer else None
        click.echo(
            f"wrote {len(d)} examples of {task} (shape {shape}) to {path}"
            f" in {time.perf_counter() - t0:.2f} s" + (f"; {extra}" if extra else "")
        )
    else:
        click.echo(
            f"generated {len(d)} examples of {task} (shape {shape}) in {time.perf_counter() - t0:.2f} s"
        )
    if stats:
        table = task_obj.statistics(d)
        width = max(len(k) for k in table)
        click.echo(f"{'per example':<{width}} {'mean':>10} {'std':>10} {'min':>8} {'max':>8}")
        for name, v in table.items():
            click.echo(f"{name:<{width}} {v['mean']:>10.3f} {v['std']:>10.3f} {v['min']:>8g} {v['max']:>8g}")


@cli.command()
@click.option("--results", default=None, help=RESULTS_HELP)
@click.option("--json", "as_json", is_flag=True, help="print the documented JSON list (one entry per run)")
@click.option("--attempts", "show_attempts", is_flag=True, help="also list every attempt of each run")
@click.option(
    "--kind", type=click.Choice(["task", "lm", "computed"]), default=None, help="only runs of this kind"
)
@click.option("--study", default=None, help="only runs of this study (experiment, theory check)")
@click.option("--experiment", default=None, help="the same as --study")
@click.option(
    "--lm-runs",
    multiple=True,
    type=click.Path(),
    help="also list `lm train` run folders the store does not hold (a run folder, or a folder of them)",
)
@click.option(
    "--columns",
    default=None,
    metavar="A,B,...",
    help="columns to show, comma-separated, in order (default: run_id, kind, status, tries, task, mixer, "
    "d_model, params, name, metric, wall_s, stale; also study, n_layers, overrides, package_version)",
)
@click.option(
    "--sort",
    default=None,
    metavar="COLUMN",
    help="sort by a column or a dotted config path; -COLUMN: descending",
)
@click.option(
    "--filter",
    "filters",
    multiple=True,
    metavar="KEY=VALUE",
    help="only runs whose column (mixer=cat, stale=yes) or config path (train.lr=0.001) is VALUE"
    " (repeatable)",
)
@click.option("--curves", is_flag=True, help="with --json: each run's learning curve (its evaluations)")
def results(
    results: str | None,
    as_json: bool,
    show_attempts: bool,
    kind: str | None,
    study: str | None,
    experiment: str | None,
    lm_runs: tuple[str, ...],
    columns: str | None,
    sort: str | None,
    filters: tuple[str, ...],
    curves: bool,
) -> None:
    """List every run: task runs, language-model runs and computed results (one line per run;
    --attempts: each try too). Reads the store without writing it. ``--json --curves``: each run
    with its learning curve (``mixerzoo curves RUN_ID`` plots one).

    Names are wrapped, never cut. A run marked stale was made by other code than the current
    code would use for its config (a mixer, state mixer or task edited since, another mixerzoo
    version): `mixerzoo study run` trains it again unless given --reuse-stale.
    """
    import datetime

    from mixerzoo.cli.results_table import parse_columns, parse_filters, render, select
    from mixerzoo.studies.listing import listed_runs

    if study is not None and experiment is not None and study != experiment:
        raise ConfigError(f"--study {study!r} and --experiment {experiment!r}: give one of them")
    shown, wanted = parse_columns(columns), parse_filters(filters)
    root, records = listed_runs(results, kind, study or experiment, lm_runs)
    records = select(records, wanted, sort)
    if as_json:
        from mixerzoo.studies.listing import listed_curves

        found = listed_curves(results, records) if curves else {}
        rows = [{**r.to_json(), **({"curve": found.get(r.run_id, [])} if curves else {})} for r in records]
        click.echo(json.dumps(rows, indent=2))
        return
    if not records:
        click.echo(f"no runs in {root}" + (" match the --filter options" if wanted else ""))
        return

    def when(t: float | None) -> str:
        return datetime.datetime.fromtimestamp(t).strftime("%Y-%m-%d %H:%M:%S") if t else "-"

    if not show_attempts:
        click.echo("\n".join(render(records, shown)))
        return
    click.echo(render([], shown)[0])
    for r in records:
        click.echo("\n".join(render([r], shown)[1:]))
        if show_attempts:
            for a in r.attempts:
                who = f"pid {a.pid} on {a.host}" if a.pid is not None else "pid -"
                error = f"  {a.error.strip().splitlines()[0][:100]}" if a.error else ""
                span = f"{when(a.started_at)} -> {when(a.ended_at)}"
                code = "  (stale: other code)" if r.attempt_stale(a) else ""
                click.echo(f"    #{a.attempt} {a.outcome:<11} {span}  {who}{code}{error}")


def _add_command_modules() -> None:
    """Each ``cli/*_commands.py`` module of a top-level command lists its click commands in
    ``COMMANDS`` (``lm_commands`` and ``lm_eval_commands`` are ``lm train`` and ``lm eval``)."""
    import importlib

    modules = ["study", "lm_group", "catalog", "baseline", "analysis", "claims", "eval", "bench", "scorecard"]
    for module in modules:
        for command in importlib.import_module(f"mixerzoo.cli.{module}_commands").COMMANDS:
            cli.add_command(command)


_add_command_modules()


def main(argv: list[str] | None = None) -> None:
    """Entry point: user mistakes become exit code 2 with a one-line message, never a traceback
    (a retired command name too: the line names the form that replaced it)."""
    try:
        cli.main(args=argv, prog_name="mixerzoo", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except click.UsageError as err:  # one line, not click's usage preamble
        where = err.ctx.command_path if err.ctx is not None else "mixerzoo"
        click.echo(f"Error: {err.format_message()} (see '{where} --help')", err=True)
        sys.exit(2)
    except click.ClickException as err:
        err.show()
        sys.exit(err.exit_code)
    except ConfigError as err:
        click.echo(f"error: {err}", err=True)
        sys.exit(getattr(err, "exit_code", 2))  # 1 for a full disk (store.errors.NoSpace): a failed run
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        sys.exit(130)
    except OSError as err:  # a path the checks could not foresee (a file vanished, a read-only mount)
        click.echo(f"error: {err}", err=True)
        sys.exit(1 if err.errno in (errno.ENOSPC, errno.EDQUOT) else 2)  # a full disk is no user mistake


if __name__ == "__main__":
    main()
