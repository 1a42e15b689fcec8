"""``mixerzoo lm``: language models on corpora: train, evaluate, measure throughput.

mixerzoo lm train configs/lm_kjv_quick.yaml --out runs/kjv
mixerzoo lm eval ar-slices runs/attn runs/conv
mixerzoo lm bench configs/lm_kjv_quick.yaml --json bench.json
"""

from __future__ import annotations

import click

from mixerzoo.cli.common import text_echo
from mixerzoo.cli.lm_commands import train_lm_cmd
from mixerzoo.cli.lm_eval_commands import lm_eval
from mixerzoo.cli.paths import OutputPath
from mixerzoo.outputs import write_json


@click.group(name="lm")
def lm() -> None:
    """Language models on corpora: train, eval, bench.

    train is torchrun-aware; eval scores run folders by AR-hit slice and at longer lengths; bench
    measures a run config's training tokens/s."""


@lm.command(name="bench")
@click.argument("config", type=click.Path(dir_okay=False))
@click.option("--data-dir", default=None, help="folder holding the corpus files")
@click.option("--steps", default=20, show_default=True, type=click.IntRange(min=1), help="timed steps")
@click.option("--warmup", default=5, show_default=True, type=click.IntRange(min=0))
@click.option(
    "--threads", default=None, type=click.IntRange(min=1, max=4096), help="CPU threads (default: all cores)"
)
@click.option(
    "--json",
    "json_out",
    default=None,
    type=OutputPath(stdout=True),
    help="write {'results': [...]} as JSON (- for stdout)",
)
def bench_cmd(config: str, data_dir, steps: int, warmup: int, threads, json_out) -> None:
    """Training tokens/s of the LM run CONFIG: the median of --steps steps after --warmup.

    Under torchrun, one row per process (DDP all-reduce included), printed by rank 0.
    """
    if threads:
        import torch

        torch.set_num_threads(threads)
    bench_lm_config(config, data_dir, steps, warmup, json_out)


def bench_lm_config(path: str, data_dir: str | None, steps: int, warmup: int, json_out: str | None) -> None:
    """``lm bench``: one row per process, printed and written by rank 0."""
    import torch.distributed as dist

    from mixerzoo.training.lm_config import load_lm_config
    from mixerzoo.training.lm_steps import finish_distributed
    from mixerzoo.training.lm_throughput import bench_lm

    echo = text_echo(json_out)
    cfg, corpus = load_lm_config(path, data_dir=data_dir)
    rows = bench_lm(cfg, corpus, steps=steps, warmup=warmup)
    if not (dist.is_available() and dist.is_initialized()) or dist.get_rank() == 0:
        echo(f"{'config':<24} {'rank':>4} {'step_ms':>9} {'tokens/s':>11} {'params':>10}")
        for r in rows:
            echo(
                f"{r['config'] or path:<24} {r['rank']:>4} {r['step_s'] * 1e3:>9.2f}"
                f" {r['tokens_per_s']:>11,.0f} {r['params']:>10,}"
            )
        if json_out:
            write_json(json_out, {"results": rows})
    finish_distributed()


lm.add_command(train_lm_cmd)
lm.add_command(lm_eval)

COMMANDS: list[click.Command] = [lm]
