"""``mixerzoo baselines`` and the RegBench file interchange commands (ICLL, Sec. 4.3, App. C-D).

    mixerzoo data regbench --set preset=reference --split test --n 1000 --out rb.npz
    mixerzoo baselines list                                   # names and parameters
    mixerzoo baselines run ngram --set n=3 --data rb.npz --json out.json
    mixerzoo baselines run baum_welch --data rb.npz --limit 200
    mixerzoo baselines run lnw --set n_train=1000 --data rb.npz
    mixerzoo baselines pairwise-tvd --data rb.npz --baseline true --baseline ngram:n=2 \
        --baseline ngram:n=3 --model TF=results/checkpoints/<run>.pt --out fig5.png
    mixerzoo export-regbench rb.npz --out rb.tsv             # the reference's generations layout
    mixerzoo import-regbench rb.tsv --out rb2.npz            # ... and back (npz + automata sidecar)
"""

from __future__ import annotations

import time

import click

from mixerzoo.cli.common import parse_sets, text_echo
from mixerzoo.cli.paths import OutputPath
from mixerzoo.outputs import write_json
from mixerzoo.registry import ConfigError


@click.group()
def baselines() -> None:
    """In-context baselines on RegBench: n-gram with backoff, Baum-Welch, LNW, the true PFA."""


@baselines.command(name="list")
def list_cmd() -> None:
    """Registered baselines and their parameters."""
    from mixerzoo.baselines import BASELINES

    for name in BASELINES.names():
        cls = BASELINES.get(name)
        doc = (cls.__doc__ or "").strip().splitlines()[0]
        fields = ", ".join(f"{k}={f.default!r}" for k, f in cls.Params.model_fields.items())
        click.echo(f"{name:<12} {doc}\n{'':<12} {fields}")


@baselines.command(name="run")
@click.argument("name")
@click.option("--data", "data_path", required=True, help="RegBench .npz (mixerzoo data regbench --out ...)")
@click.option("--set", "sets", multiple=True, help="baseline parameter key=value (repeatable)")
@click.option("--limit", default=None, type=click.IntRange(min=1), help="score only the first N instances")
@click.option(
    "--separator-targets/--no-separator-targets",
    default=True,
    show_default=True,
    help="also score positions whose next token is a separator (Eq. 8-9 sum over every symbol)",
)
@click.option(
    "--json",
    "json_out",
    default=None,
    type=OutputPath(stdout=True),
    help="write the scores as JSON (- for stdout)",
)
def run_cmd(name, data_path, sets, limit, separator_targets, json_out) -> None:
    """Score baseline NAME on a RegBench file: Eq. 8 accuracy and Eq. 9 TVD."""
    from mixerzoo.baselines import build_baseline, check_rows
    from mixerzoo.baselines.regbench_files import load_regbench
    from mixerzoo.evaluation.regbench_metrics import score_distributions
    from mixerzoo.tasks.base import TaskData

    params = parse_sets(sets)
    baseline = build_baseline(name, **params)
    data = load_regbench(data_path)
    if limit is not None and limit < len(data):
        data = TaskData(
            data.inputs[:limit], data.labels[:limit], {k: v[:limit] for k, v in data.extras.items()}
        )
    t0 = time.perf_counter()
    dist = baseline.distributions(data)
    wall = time.perf_counter() - t0
    row_err = check_rows(dist, deficit_ok=not baseline.rows_sum_to_one)
    scores = score_distributions(dist, data, score_separator_targets=separator_targets)
    text_echo(json_out)(
        f"{name} {params or ''}: accuracy {scores['accuracy']:.4f}  tvd {scores['tvd']:.4f}  "
        f"({scores['n_scored']} positions of {len(data)} instances, {wall:.1f} s; "
        + (
            f"rows sum to 1 +- {row_err:.1e})"
            if baseline.rows_sum_to_one
            else f"rows sum to at most 1, the smallest {float(dist.sum(-1).min()):.3f})"
        )
    )
    if json_out:
        write_json(
            json_out,
            {
                "baseline": name,
                "params": baseline.p.model_dump(),
                "data": data_path,
                "instances": len(data),
                **scores,
                "max_row_sum_error": row_err,  # the excess over 1 where rows may sum to less
                "rows_sum_to_one": baseline.rows_sum_to_one,
                "wall_s": wall,
            },
        )


def _baseline_spec(spec: str) -> tuple[str, str, dict]:
    """``NAME`` or ``NAME:k=v,k=v`` -> (label, name, params)."""
    import yaml

    name, _, rest = spec.partition(":")
    params = {}
    for item in filter(None, rest.split(",")):
        if "=" not in item:
            raise ConfigError(f"--baseline {spec!r}: expected NAME or NAME:key=value,key=value")
        k, v = item.split("=", 1)
        params[k.strip()] = yaml.safe_load(v)
    label = name + (f"({','.join(f'{k}={v}' for k, v in params.items())})" if params else "")
    return label, name, params


@baselines.command(name="pairwise-tvd")
@click.option("--data", "data_path", required=True, help="RegBench .npz")
@click.option("--baseline", "specs", multiple=True, help="NAME or NAME:k=v,k=v (repeatable), e.g. ngram:n=2")
@click.option("--model", "models", multiple=True, help="LABEL=CHECKPOINT of a trained model (repeatable)")
@click.option(
    "--max-tokens",
    default=100,
    show_default=True,
    type=click.IntRange(min=1),
    help="first tokens of each instance compared (Fig. 5: 100)",
)
@click.option("--limit", default=None, type=click.IntRange(min=1), help="only the first N instances")
@click.option("--out", default=None, type=OutputPath(), help="heat-map PNG")
@click.option(
    "--json",
    "json_out",
    default=None,
    type=OutputPath(stdout=True),
    help="write {names, tvd} as JSON (- for stdout)",
)
def pairwise_tvd_cmd(data_path, specs, models, max_tokens, limit, out, json_out) -> None:
    """Pairwise TVD between models and baselines on a RegBench file (ICLL Fig. 5)."""
    from mixerzoo.analysis.pairwise_tvd import pairwise_tvd, plot_pairwise_tvd
    from mixerzoo.baselines import build_baseline
    from mixerzoo.baselines.regbench_files import load_regbench
    from mixerzoo.tasks.base import TaskData

    if len(specs) + len(models) < 2:
        raise ConfigError("pairwise-tvd: give at least two predictors (--baseline / --model)")
    data = load_regbench(data_path)
    if limit is not None and limit < len(data):
        data = TaskData(
            data.inputs[:limit], data.labels[:limit], {k: v[:limit] for k, v in data.extras.items()}
        )
    dists = {}
    for spec in specs:
        label, name, params = _baseline_spec(spec)
        dists[label] = build_baseline(name, **params).distributions(data)
    for item in models:
        import torch

        from mixerzoo.evaluation.regbench_metrics import model_distributions
        from mixerzoo.runs.task import load_checkpoint

        label, sep, path = item.partition("=")
        if not sep:
            label, path = item, item
        model, _ = load_checkpoint(path)
        dists[label] = model_distributions(model, torch.from_numpy(data.inputs))
    names, matrix = pairwise_tvd(dists, data, max_tokens)
    width = max(len(n) for n in names)
    echo = text_echo(json_out)
    echo(" " * width + " " + " ".join(f"{n:>{width}}" for n in names))
    for n, row in zip(names, matrix):
        echo(f"{n:<{width}} " + " ".join(f"{v:>{width}.3f}" for v in row))
    if out:
        echo(f"heat-map: {plot_pairwise_tvd(names, matrix, out)}")
    if json_out:
        write_json(
            json_out, {"names": names, "tvd": matrix.tolist(), "max_tokens": max_tokens, "data": data_path}
        )


@click.command(name="import-regbench")
@click.argument("source")
@click.option(
    "--out",
    required=True,
    type=OutputPath(),
    help="output .npz (an .automata.json sidecar is written beside it)",
)
@click.option(
    "--num-symbols",
    default=18,
    show_default=True,
    type=click.IntRange(1, 26),
    help="shared symbol set size |V| (letters a, b, ... are tokens 1, 2, ...)",
)
@click.option(
    "--seq-len", default=None, type=click.IntRange(min=2), help="pad/cut to this length (default: longest)"
)
def import_regbench(source, out, num_symbols, seq_len) -> None:
    """Read a RegBench file in the reference implementation's layout (berlino/seq_icl TSV) into ours."""
    from mixerzoo.baselines.regbench_files import read_reference, write_regbench

    data = read_reference(source, num_symbols=num_symbols, seq_len=seq_len)
    path = write_regbench(data, out)
    click.echo(f"imported {len(data)} instances (shape {tuple(data.inputs.shape)}) from {source} to {path}")


@click.command(name="export-regbench")
@click.argument("source")
@click.option(
    "--out", required=True, type=OutputPath(), help="output TSV in the reference implementation's layout"
)
def export_regbench(source, out) -> None:
    """Write a RegBench .npz of ours in the reference implementation's layout (berlino/seq_icl TSV)."""
    from mixerzoo.baselines.regbench_files import load_regbench, write_reference

    data = load_regbench(source)
    path = write_reference(data, out)
    click.echo(f"exported {len(data)} instances from {source} to {path}")


COMMANDS: list[click.Command] = [baselines, import_regbench, export_regbench]
