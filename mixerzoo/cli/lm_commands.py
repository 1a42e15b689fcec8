"""``mixerzoo lm train``: train a language model on a corpus; resumable, torchrun.

    mixerzoo lm train configs/nanogpt_cpu_char.yaml --data-dir data/shakespeare_char --out runs/sc
    mixerzoo lm train configs/lm_kjv_quick.yaml --set train.steps=100 --set model.d_model=64
    torchrun --nproc_per_node 2 -m mixerzoo.train_lm configs/lm_kjv_quick.yaml --out runs/ddp

Running the same command again on the same ``--out`` resumes from its last checkpoint.
"""

from __future__ import annotations

import click

from mixerzoo.cli.common import RESULTS_HELP, open_store, parse_sets, track_options, track_spec
from mixerzoo.cli.paths import OutputPath
from mixerzoo.store.lookup import results_root


@click.command(name="train")
@click.argument("config", type=click.Path(dir_okay=False))
@click.option("--data-dir", default=None, help="folder holding the corpus files (overrides corpus.data_dir)")
@click.option(
    "--cache-dir",
    default=None,
    type=OutputPath("dir"),
    help="token-array cache (default: <data-dir>/.mixerzoo-cache)",
)
@click.option(
    "--out",
    "out_dir",
    default=None,
    type=OutputPath("dir"),
    help="run folder: checkpoint, metrics.jsonl, result.json",
)
@click.option("--set", "sets", multiple=True, help="override a config value: train.steps=100 (repeatable)")
@click.option("--quiet", is_flag=True, help="no per-evaluation lines")
@click.option(
    "--results", default=None, type=OutputPath("dir"), help=RESULTS_HELP + "; the run is recorded there"
)
@track_options
def train_lm_cmd(config: str, data_dir, cache_dir, out_dir, sets, quiet: bool, results, **track) -> None:
    """Train a language model described by CONFIG (corpus, model, train sections).

    Honours torchrun's RANK / WORLD_SIZE / LOCAL_RANK: DDP over gloo (CPU) or NCCL (CUDA),
    each rank its own data stream, rank 0 writes checkpoints and logs and records the run (one
    attempt per invocation, a resumed run included) in the results store.
    """
    tracking = track_spec(track, results_root(results) / "tracking")
    run_train_lm(config, data_dir, cache_dir, out_dir, parse_sets(tuple(sets)), quiet, results, tracking)


def run_train_lm(
    config, data_dir, cache_dir, out_dir, sets, quiet: bool = False, results=None, tracking=None
) -> None:
    """``tracking`` (a ``tracking.TrackSpec``): stream the run's steps and evaluations live (rank 0)."""
    from mixerzoo.runs.lm import execute_lm_run
    from mixerzoo.training.lm_config import load_lm_config
    from mixerzoo.training.lm_steps import finish_distributed

    cfg, corpus = load_lm_config(config, data_dir=data_dir, sets=sets, cache_dir=cache_dir)
    result, made = execute_lm_run(
        cfg,
        corpus,
        lambda: open_store(results),  # opened (or made) once training is set up
        out_dir,
        echo=click.echo,
        log=None if quiet else click.echo,
        tracking=tracking,
    )
    if made is not None:  # rank 0
        metrics = "  ".join(f"{k} {v:.4f}" for k, v in result.metrics.items())
        rate = f"{result.tokens_per_s:,.0f} tokens/s" if result.tokens_per_s else ""
        click.echo(f"step {result.steps}: {metrics}  {result.params:,} params  {rate}")
        if out_dir:
            click.echo(f"run folder: {out_dir}")
        click.echo(f"recorded as run {made.run_id} in {made.store.root}")
    finish_distributed()
