"""``mixerzoo bench``: training-step time and peak memory per mixer and sequence length (the
training tokens/s of a language-model run config is ``mixerzoo lm bench``).
"""

from __future__ import annotations

import click

from mixerzoo.cli.common import text_echo
from mixerzoo.cli.paths import OutputPath
from mixerzoo.outputs import write_json
from mixerzoo.registry import ConfigError


def _csv(value: str | None, kind=str) -> list | None:
    if value is None:
        return None
    try:
        return [kind(v.strip()) for v in value.split(",") if v.strip()]
    except ValueError:
        raise ConfigError(f"{value!r}: expected a comma-separated list of {kind.__name__}") from None


@click.command()
@click.option(
    "--mixers",
    "mixer_names",
    default="attention,base_conv",
    show_default=True,
    help="comma-separated mixers (attention and base_conv use zoology's Fig. 2 specs)",
)
@click.option("--seq-lens", default="64", show_default=True, help="comma-separated sequence lengths")
@click.option(
    "--batch",
    default=None,
    type=click.IntRange(min=1),
    help="sequences per step (default: --tokens / L per length, at least 1)",
)
@click.option("--tokens", default=4096, show_default=True, type=click.IntRange(min=1), help="tokens per step")
@click.option("--d-model", default=64, show_default=True, type=click.IntRange(min=1))
@click.option("--layers", default=2, show_default=True, type=click.IntRange(min=1))
@click.option("--vocab", default=8192, show_default=True, type=click.IntRange(min=2))
@click.option("--steps", default=20, show_default=True, type=click.IntRange(min=1), help="timed steps")
@click.option("--warmup", default=5, show_default=True, type=click.IntRange(min=0))
@click.option("--device", default="auto", show_default=True, help="auto, cpu, cuda, cuda:N or mps")
@click.option(
    "--dtype",
    type=click.Choice(["auto", "float32", "bfloat16", "float16"]),
    default="float32",
    show_default=True,
    help="the step's precision, as train.dtype (bfloat16 / float16: autocast)",
)
@click.option(
    "--threads", default=None, type=click.IntRange(min=1, max=4096), help="CPU threads (default: all cores)"
)
@click.option(
    "--timeout",
    default=3600.0,
    show_default=True,
    type=click.FloatRange(min=0, min_open=True),
    help="seconds one measurement may take before it is reported as failed",
)
@click.option(
    "--max-mem-mb",
    default=None,
    type=click.FloatRange(min=0, min_open=True),
    help="skip measurements estimated to need more (default: the memory available now)",
)
@click.option("--markdown", is_flag=True, help="also print the README's scaling table (Markdown)")
@click.option(
    "--json",
    "json_out",
    default=None,
    type=OutputPath(stdout=True),
    help="write {'results', 'fits'} as JSON (- for stdout)",
)
def bench(
    mixer_names,
    seq_lens,
    batch,
    tokens,
    d_model,
    layers,
    vocab,
    steps,
    warmup,
    device,
    dtype,
    threads,
    timeout,
    max_mem_mb,
    markdown,
    json_out,
) -> None:
    """Training-step time and peak memory per mixer and length, with the fitted exponent of time ∝ L^k.

    A measurement that is estimated not to fit is skipped, one whose process dies (e.g. killed
    for memory) or overruns --timeout is reported as failed; the others go on. The training
    tokens/s of a language-model run config is `mixerzoo lm bench`.
    """
    import torch

    from mixerzoo.training import throughput as tp
    from mixerzoo.training.bench_grid import bench_grid

    device = tp.check_device(device)  # auto -> the device it means here
    echo = text_echo(json_out)
    if threads:
        torch.set_num_threads(threads)
    names, lens = _bench_names_and_lens(mixer_names, seq_lens)
    header = f"{'mixer':<20} {'seq_len':>7} {'batch':>5} {'step_ms':>9} {'tokens/s':>11} {'peak_MB':>8}"
    echo(f"{header} {'est_MB':>8}")
    model = dict(d_model=d_model, n_layers=layers, vocab_size=vocab, steps=steps, warmup=warmup, dtype=dtype)
    grid = dict(batch=batch, tokens=tokens, timeout_s=timeout, max_mem_mb=max_mem_mb)
    out = bench_grid(names, lens, **grid, on_row=lambda r: _echo_bench_row(echo, r), device=device, **model)
    _report_bench(echo, out, len(lens) > 1, markdown, json_out)


def _bench_names_and_lens(mixer_names: str, seq_lens: str) -> tuple[list[str], list[int]]:
    """``--mixers`` and ``--seq-lens`` as lists, each name a known mixer and each length >= 1."""
    from mixerzoo.mixers import SEQUENCE_MIXERS

    names = _csv(mixer_names)
    lens = _csv(seq_lens, int)
    if not names or not lens:
        raise ConfigError("--mixers and --seq-lens need at least one value each")
    for L in lens:
        if L < 1:
            raise ConfigError(f"--seq-lens {L}: lengths must be >= 1")
    for name in names:
        SEQUENCE_MIXERS.get(name)
    return names, lens


def _echo_bench_row(echo, r) -> None:
    """One row of the bench table: its time, rate and memory, or why it did not run."""
    if r.status == "ok":
        echo(
            f"{r.mixer:<20} {r.seq_len:>7} {r.batch:>5} {r.step_s * 1e3:>9.2f}"
            f" {r.tokens_per_s:>11,.0f} {r.peak_mem_mb:>8.1f} {r.est_mem_mb:>8.0f}"
        )
    else:
        echo(f"{r.mixer:<20} {r.seq_len:>7} {r.batch:>5} {r.status}: {r.error}")


def _report_bench(echo, rows: list, fits: bool, markdown: bool, json_out) -> None:
    """After the table: each mixer's fitted exponents in the length (``fits``), the Markdown table, JSON."""
    from mixerzoo.training import throughput as tp

    payload = tp.bench_results_json(rows)
    if fits:
        echo("")
        for fit in payload["fits"]:
            k_t, k_m = fit["time_exponent"], fit["mem_exponent"]
            echo(
                f"{fit['mixer']:<20} time per sequence ∝ L^{k_t if k_t is not None else '?'}"
                f"  memory ∝ L^{k_m if k_m is not None else '?'}  ratios {fit['time_ratio']}"
            )
    if markdown:
        echo("")
        echo(tp.scaling_markdown(rows))
    if json_out:
        write_json(json_out, payload)


COMMANDS = [bench]
