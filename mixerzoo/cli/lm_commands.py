"""``mixerzoo lm train``: train a language model on a corpus; resumable, torchrun.

    mixerzoo lm train configs/nanogpt_cpu_char.yaml --data-dir data/shakespeare_char --out runs/sc
    mixerzoo lm train configs/lm_kjv_quick.yaml --set train.steps=100 --set model.d_model=64
    torchrun --nproc_per_node 2 -m mixerzoo.train_lm configs/lm_kjv_quick.yaml --out runs/ddp

Running the same command again on the same ``--out`` resumes from its last checkpoint.
"""

from __future__ import annotations

from contextlib import contextmanager, nullcontext
from pathlib import Path

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
    from mixerzoo.training.lm import setup_distributed, train_lm
    from mixerzoo.training.lm_config import load_lm_config

    cfg, corpus = load_lm_config(config, data_dir=data_dir, sets=sets, cache_dir=cache_dir)
    info = setup_distributed(cfg.train.device)
    rec = _recording(cfg, out_dir, results) if info.is_main else None  # rank 0 records the run
    if info.is_main:
        click.echo(corpus.describe())
    tracker = _tracker(tracking, cfg, out_dir) if info.is_main else None
    hooks = {"on_step": tracker.on_step, "on_eval": tracker.on_eval} if tracker else {}
    with rec or nullcontext(), _finishing(tracker):
        log = None if quiet else click.echo
        result = train_lm(cfg, corpus, out_dir, log=log, on_start=rec.start if rec else None, **hooks)
        if rec is not None:
            _fill(rec, result, out_dir)
        if tracker is not None:
            tracker.finish("finished", result.metrics)
    if rec is not None:
        metrics = "  ".join(f"{k} {v:.4f}" for k, v in result.metrics.items())
        rate = f"{result.tokens_per_s:,.0f} tokens/s" if result.tokens_per_s else ""
        click.echo(f"step {result.steps}: {metrics}  {result.params:,} params  {rate}")
        if out_dir:
            click.echo(f"run folder: {out_dir}")
        click.echo(f"recorded as run {rec.run_id} in {rec.store.root}")
    _shutdown()


def _recording(cfg, out_dir, results):
    """The attempt of this LM run in the results store, begun once training is set up (the store
    is opened, or made, then: a mistake found before that records nothing)."""
    from mixerzoo.runs.lm import Recording

    name = cfg.name or (Path(out_dir).name if out_dir else None)
    return Recording(lambda: open_store(results), "lm", cfg.model_dump(mode="json"), cfg.config_hash(), name)


def _tracker(tracking, cfg, out_dir):
    """The run's live tracker (None without ``--track``), named after the config or the run folder."""
    from mixerzoo.runs.tracking import open_run

    name = cfg.name or (Path(out_dir).name if out_dir else "lm")
    return open_run(tracking, cfg.model_dump(mode="json"), name, cfg.config_hash()[:12], 1, "lm")


@contextmanager
def _finishing(tracker):
    """Close the tracker's runs as failed / interrupted when training raises."""
    try:
        yield
    except BaseException as err:
        if tracker is not None:
            status = "interrupted" if isinstance(err, KeyboardInterrupt) else "failed"
            tracker.finish(status, error=f"{type(err).__name__}: {err}")
        raise


def _fill(made, result, out_dir) -> None:
    """The attempt's metrics, evaluations, checkpoint and output (the run folder)."""
    from mixerzoo.training.lm import CHECKPOINT

    made.metrics = {"steps": result.steps, **result.metrics}
    if result.tokens_per_s is not None:
        made.metrics["tokens_per_s"] = result.tokens_per_s
    made.params = result.params
    made.evals = [row for row in result.history if "val_loss" in row]
    if out_dir is not None:
        made.output = Path(out_dir)
        if (made.output / CHECKPOINT).is_file():
            made.checkpoint = made.output / CHECKPOINT


def _shutdown() -> None:
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
