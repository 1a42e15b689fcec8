"""The ``mixerzoo`` command line.

    mixerzoo demo                          # the quick demo (CAT vs attention vs BaseConv on MQAR)
    mixerzoo train run.yaml                # one run into the results store
    mixerzoo data mqar --set seq_len=256 --n 100000 --out mqar.npz
    mixerzoo eval results/checkpoints/<run>.pt --data mqar.npz
    mixerzoo results | mixers | tasks [--json]
    mixerzoo bench [--mixers attention,cat --seq-lens 256,1024]

Bad input (unknown name, missing file, invalid value) exits with code 2 and one line that
says what is wrong and what is allowed.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from mixerzoo.cli.common import RESULTS_HELP, open_store, write_json
from mixerzoo.registry import ConfigError

#: metrics printed after a run, when present (each output kind reports its own)
SUMMARY_METRICS = ("accuracy_per_query", "accuracy_per_example", "accuracy", "r2", "loss")


def _parse_sets(items: tuple[str, ...]) -> dict[str, Any]:
    import yaml

    out: dict[str, Any] = {}
    for item in items:
        if "=" not in item:
            raise ConfigError(f"--set {item!r}: expected key=value")
        key, value = item.split("=", 1)
        out[key.strip()] = yaml.safe_load(value)
    return out


def _csv(value: str | None, kind=str) -> list | None:
    if value is None:
        return None
    try:
        return [kind(v.strip()) for v in value.split(",") if v.strip()]
    except ValueError:
        raise ConfigError(f"{value!r}: expected a comma-separated list of {kind.__name__}") from None


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="mixerzoo")
def cli() -> None:
    """mixerzoo: train, compare and understand sequence mixers on mechanistic tasks."""


@cli.command()
@click.argument("config", type=click.Path(dir_okay=False))
@click.option("--results", default=None, help=RESULTS_HELP)
@click.option("--json", "json_out", default=None, help="also write the run record as JSON (- for stdout)")
@click.option("--quiet", is_flag=True, help="no progress bar")
def train(config: str, results: str | None, json_out: str | None, quiet: bool) -> None:
    """Train one run described by a YAML/JSON CONFIG file."""
    from mixerzoo.config import load_run_config
    from mixerzoo.experiments.runs import execute_run

    cfg = load_run_config(config)
    store = open_store(results)
    rec = execute_run(cfg, store, progress=not quiet)
    shown = [k for k in SUMMARY_METRICS if k in rec.metrics]
    shown += sorted(k for k in rec.metrics if k.startswith(("accuracy@", "regbench_")))
    summary = "  ".join(f"{k} {rec.metrics[k]:.4f}" for k in shown)
    click.echo(f"run {rec.run_id} ({rec.name}): {summary}  {rec.wall_s:.1f} s  {rec.params:,} params")
    click.echo(f"checkpoint: {rec.checkpoint}")
    if json_out:
        write_json(json_out, rec.to_json())


@cli.command()
@click.option("--results", default=None, help=RESULTS_HELP)
@click.option("--json", "json_out", default=None, help="write {'models': [...]} as JSON (- for stdout)")
@click.option("--plot", "plot_path", default=None, help="bar chart PNG (default: <results>/demo.png)")
@click.option("--quiet", is_flag=True, help="no progress bars")
def demo(results: str | None, json_out: str | None, plot_path: str | None, quiet: bool) -> None:
    """Train 1-layer CAT, 1-/2-layer attention and 2-layer BaseConv on MQAR (a few minutes on CPU)."""
    import time
    from dataclasses import asdict

    from mixerzoo.experiments.demo import format_table, plot_demo, run_demo

    t0 = time.perf_counter()
    store = open_store(results)
    rows = run_demo(store, progress=not quiet, log=click.echo)
    click.echo("")
    click.echo(format_table(rows))
    png = plot_demo(rows, Path(plot_path) if plot_path else store.root / "demo.png")
    total = time.perf_counter() - t0
    click.echo(f"\nplot: {png}\ntotal wall time: {total:.1f} s")
    if json_out:
        write_json(json_out, {"models": [asdict(r) for r in rows], "total_wall_s": total})


@cli.command(name="eval")
@click.argument("checkpoint", type=click.Path(dir_okay=False))
@click.option("--data", "data_path", required=True, help=".npz file with int64 arrays 'inputs' and 'labels'")
@click.option("--json", "json_out", default=None, help="write metrics as JSON (- for stdout)")
@click.option("--batch-size", default=256, show_default=True)
def eval_cmd(checkpoint: str, data_path: str, json_out: str | None, batch_size: int) -> None:
    """Evaluate a trained CHECKPOINT on externally supplied arrays (labels -100 = unsupervised)."""
    import numpy as np
    import torch

    from mixerzoo.evaluation import evaluate_tokens
    from mixerzoo.experiments.runs import load_checkpoint

    model, cfg = load_checkpoint(checkpoint)
    if cfg.model.head != "lm":
        raise ConfigError(
            f"checkpoint {checkpoint!r} has a {cfg.model.head} head; `mixerzoo eval` scores token "
            "(language-model) checkpoints on int64 inputs/labels arrays"
        )
    p = Path(data_path)
    if not p.is_file():
        raise ConfigError(f"data file {data_path!r} does not exist")
    try:
        arrays = np.load(p)
    except Exception as err:  # noqa: BLE001
        raise ConfigError(f"data file {data_path!r} is not a readable .npz: {err}") from None
    for key in ("inputs", "labels"):
        if key not in arrays:
            raise ConfigError(
                f"data file {data_path!r} has no array {key!r} (has: {', '.join(arrays.files)})"
            )
    inputs, labels = arrays["inputs"], arrays["labels"]
    if inputs.ndim != 2 or inputs.shape != labels.shape:
        raise ConfigError(f"'inputs' {inputs.shape} and 'labels' {labels.shape} must be equal [n, l] shapes")
    vocab = cfg.model.vocab_size
    if inputs.min() < 0 or inputs.max() >= vocab:
        raise ConfigError(f"'inputs' token ids must lie in [0, {vocab}) for this model")
    metrics = evaluate_tokens(
        model,
        torch.from_numpy(inputs.astype(np.int64)),
        torch.from_numpy(labels.astype(np.int64)),
        batch_size,
    )
    click.echo("  ".join(f"{k} {v:.4f}" if isinstance(v, float) else f"{k} {v}" for k, v in metrics.items()))
    if json_out:
        payload = {"accuracy": metrics["accuracy_per_query"], **metrics}
        write_json(json_out, {**payload, "checkpoint": checkpoint, "data": data_path})


@cli.command()
@click.argument("task")
@click.option("--set", "sets", multiple=True, help="task parameter key=value (repeatable)")
@click.option("--n", "n", default=1000, show_default=True, help="number of examples")
@click.option("--seed", default=0, show_default=True)
@click.option("--split", default="train", show_default=True, type=click.Choice(["train", "test", "valid"]))
@click.option("--out", default=None, help="output .npz path")
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
    t0 = time.perf_counter()
    task_obj = build_task(task, **_parse_sets(sets))
    d = task_obj.make(n, seed, split)
    shape = tuple(d.inputs.shape)
    if out is not None:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        np.savez(out, **d.arrays())
        writer = getattr(task_obj, "write_sidecar", None)
        extra = writer(d, Path(out)) if writer else None
        click.echo(
            f"wrote {len(d)} examples of {task} (shape {shape}) to {out}"
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
@click.option("--json", "as_json", is_flag=True, help="print the documented JSON list")
@click.option("--experiment", default=None, help="only runs of this experiment")
def results(results: str | None, as_json: bool, experiment: str | None) -> None:
    """List the runs in the results store."""
    store = open_store(results)
    records = store.runs(experiment=experiment)
    if as_json:
        click.echo(json.dumps([r.to_json() for r in records], indent=2))
        return
    if not records:
        click.echo(f"no runs in {store.root}")
        return
    click.echo(f"{'run_id':<20} {'status':<9} {'name':<24} {'accuracy':>9} {'wall_s':>8}")
    for r in records:
        acc = r.metrics.get("accuracy_per_query")
        acc_s = f"{acc:.4f}" if isinstance(acc, (int, float)) else "-"
        wall = f"{r.wall_s:.1f}" if r.wall_s is not None else "-"
        click.echo(f"{r.run_id:<20} {r.status:<9} {(r.name or '-')[:24]:<24} {acc_s:>9} {wall:>8}")


def mixer_rows() -> list[dict[str, Any]]:
    from mixerzoo.mixers import SEQUENCE_MIXERS, STATE_MIXERS
    from mixerzoo.params import defaults_of

    rows = []
    for kind, reg in (("sequence", SEQUENCE_MIXERS), ("state", STATE_MIXERS)):
        for name in reg.names():
            cls = reg.get(name)
            doc = (cls.__doc__ or "").strip().splitlines()
            row: dict[str, Any] = {
                "name": name,
                "kind": kind,
                "description": doc[0] if doc else "",
                "defaults": defaults_of(cls.Params),
            }
            module = cls(64, 256) if kind == "sequence" else cls(64)
            row["params_d64"] = sum(p.numel() for p in module.parameters())
            if kind == "sequence":
                row["recurrent"] = bool(cls.recurrent)
                row["state_size_d64"] = module.state_size()
                row["needs_input_ids"] = bool(cls.needs_input_ids)
            rows.append(row)
    return rows


@cli.command()
@click.option("--json", "as_json", is_flag=True)
def mixers(as_json: bool) -> None:
    """List registered sequence and state mixers with their default parameters."""
    rows = mixer_rows()
    if as_json:
        click.echo(json.dumps(rows, indent=2, default=str))
        return
    for r in rows:
        extra = f" (params at d=64: {r['params_d64']:,})"
        click.echo(f"{r['name']:<22} {r['kind']:<9} {r['description']}{extra}")


@cli.command()
@click.option("--json", "as_json", is_flag=True)
def tasks(as_json: bool) -> None:
    """List registered tasks with their parameters and defaults."""
    from mixerzoo.params import defaults_of
    from mixerzoo.tasks import TASKS

    rows = []
    for name in TASKS.names():
        cls = TASKS.get(name)
        doc = (cls.__doc__ or "").strip().splitlines()
        params = {
            k: {"default": f.get_default(call_default_factory=True), "description": f.description}
            for k, f in cls.Params.model_fields.items()
        }
        rows.append(
            {
                "name": name,
                "description": doc[0] if doc else "",
                "defaults": defaults_of(cls.Params),
                "parameters": params,
                "output": cls.output,
            }
        )
    if as_json:
        click.echo(json.dumps(rows, indent=2, default=str))
        return
    for r in rows:
        click.echo(f"{r['name']:<16} {r['description']}")


@cli.command()
@click.option(
    "--mixers",
    "mixer_names",
    default="attention,base_conv",
    show_default=True,
    help="comma-separated mixers (attention and base_conv use zoology's Fig. 2 specs)",
)
@click.option("--seq-lens", default="64", show_default=True, help="comma-separated sequence lengths")
@click.option("--batch", default=64, show_default=True)
@click.option("--d-model", default=64, show_default=True)
@click.option("--layers", default=2, show_default=True)
@click.option("--vocab", default=8192, show_default=True)
@click.option("--steps", default=20, show_default=True, help="timed steps (median reported)")
@click.option("--warmup", default=5, show_default=True)
@click.option("--device", default="cpu", show_default=True)
@click.option("--threads", default=None, type=int, help="torch CPU threads (default: all cores)")
@click.option("--json", "json_out", default=None, help="write {'results': [...]} as JSON (- for stdout)")
def bench(
    mixer_names, seq_lens, batch, d_model, layers, vocab, steps, warmup, device, threads, json_out
) -> None:
    """Training-step throughput (tokens/s, median after warm-up) and peak memory per mixer and length."""
    import torch

    from mixerzoo.mixers import SEQUENCE_MIXERS
    from mixerzoo.training.throughput import bench_isolated, bench_one, bench_results_json

    if threads:
        torch.set_num_threads(threads)
    names = _csv(mixer_names)
    lens = _csv(seq_lens, int)
    for name in names:
        SEQUENCE_MIXERS.get(name)
    out = []
    click.echo(f"{'mixer':<20} {'seq_len':>7} {'batch':>5} {'step_ms':>9} {'tokens/s':>11} {'peak_MB':>8}")
    for name in names:
        for L in lens:
            kwargs = dict(
                mixer=name,
                seq_len=L,
                batch=batch,
                d_model=d_model,
                n_layers=layers,
                vocab_size=vocab,
                steps=steps,
                warmup=warmup,
                device=device,
            )
            r = bench_one(**kwargs) if device.startswith("cuda") else bench_isolated(**kwargs)
            out.append(r)
            click.echo(
                f"{r.mixer:<20} {r.seq_len:>7} {r.batch:>5} {r.step_s * 1e3:>9.2f}"
                f" {r.tokens_per_s:>11,.0f} {r.peak_mem_mb:>8.1f}"
            )
    if json_out:
        write_json(json_out, bench_results_json(out))


def _add_experiment_commands() -> None:
    from mixerzoo.cli.experiment_commands import COMMANDS

    for command in COMMANDS:
        cli.add_command(command)


_add_experiment_commands()


def main(argv: list[str] | None = None) -> None:
    """Entry point: user mistakes become exit code 2 with a one-line message, never a traceback."""
    try:
        cli.main(args=argv, prog_name="mixerzoo", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except click.ClickException as err:
        err.show()
        sys.exit(2 if isinstance(err, click.UsageError) else err.exit_code)
    except ConfigError as err:
        click.echo(f"error: {err}", err=True)
        sys.exit(2)
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        sys.exit(130)
    except SystemExit:
        raise
    except (FileNotFoundError, IsADirectoryError, PermissionError) as err:
        click.echo(f"error: {err}", err=True)
        sys.exit(2)


if __name__ == "__main__":
    main()
