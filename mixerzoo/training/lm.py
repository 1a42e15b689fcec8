"""Language-model training on a corpus: nanoGPT's loop, with exact resume and torchrun DDP.

    mixerzoo lm train configs/nanogpt_cpu_char.yaml --data-dir data/shakespeare_char --out runs/sc
    torchrun --nproc_per_node 2 -m mixerzoo.train_lm configs/nanogpt_cpu_char.yaml --data-dir DIR

Each optimizer step reads ``grad_accum`` micro-batches of ``batch_size`` random contiguous
blocks of ``block_size + 1`` tokens from the training split (nanoGPT's ``get_batch``); the
loss is the next-token cross-entropy at every position. Validation loss is estimated on
``eval_iters`` random blocks every ``eval_every`` steps and reported as bits per character /
byte (loss / ln 2) for character and byte corpora, or as perplexity (exp(loss)) for BPE / word
corpora.

Checkpoints (``<out>/checkpoint.pt``, written atomically every ``ckpt_every`` steps in the format
of ``mixerzoo/checkpoint.py``: safetensors + JSON, never unpickled) hold the model, optimizer,
grad scaler, step, loss history, and every rank's data-sampling and torch RNG states: the data
position of a random-block stream is its RNG state. A run started again on
the same ``--out`` continues from there, and its loss curve equals that of an uninterrupted
run with the same seed (tests/training/test_lm.py kills a run with SIGKILL to check).

``train.dtype`` and ``train.compile`` are those of task training (``training/precision.py``: autocast,
loss scaling for float16, ``torch.compile`` with an eager fallback); evaluation is always eager.

Under torchrun (``WORLD_SIZE`` > 1) every rank draws its own blocks (RNG seeded by
(seed, rank)), DDP averages the gradients (gloo on CPU, NCCL on CUDA), and rank 0 alone
evaluates and writes files. The global batch per step is batch_size x grad_accum x world size.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from mixerzoo import checkpoint
from mixerzoo.model import build_model, count_parameters
from mixerzoo.registry import ConfigError
from mixerzoo.training import precision
from mixerzoo.training.allocator import keep_freed_memory
from mixerzoo.training.lm_config import LMRunConfig
from mixerzoo.training.lm_steps import (
    DistInfo,
    NextTokenLoss,
    bits_or_perplexity,
    estimate_loss,
    make_lm_optimizer,
    setup_distributed,
    train_step,
    wrap_distributed,
)
from mixerzoo.training.progress import StepHook
from mixerzoo.training.schedule import lr_factor

CHECKPOINT = checkpoint.LM_CHECKPOINT


# -- checkpoints -----------------------------------------------------------------------
def _gather(obj: Any, info: DistInfo) -> list[Any]:
    if info.world_size == 1:
        return [obj]
    import torch.distributed as dist

    out: list[Any] = [None] * info.world_size
    dist.all_gather_object(out, obj)
    return out


#: what a checkpoint needs to resume a run
RESUME_KEYS = ("config_hash", "step", "model", "optimizer", "scaler", "rng", "torch_rng", "history")


def read_checkpoint(path: Path) -> dict[str, Any]:
    """The state of an ``lm train`` checkpoint (``mixerzoo/checkpoint.py``; never unpickled)."""
    try:
        ckpt = checkpoint.load_checkpoint(path, kind="lm")
    except ConfigError as err:
        raise ConfigError(f"{err}; delete it to restart") from None
    ckpt.require(*RESUME_KEYS)
    return ckpt.state


def _resume(ckpt: dict[str, Any], path: Path, parts: dict[str, Any], info: DistInfo) -> tuple[int, list]:
    """Load the checkpoint's model, optimizer, scaler and this rank's RNG states -> (step, history)."""
    if not isinstance(ckpt["rng"], list) or len(ckpt["rng"]) != info.world_size:
        n = len(ckpt["rng"]) if isinstance(ckpt["rng"], list) else "?"
        raise ConfigError(
            f"checkpoint {str(path)!r} was written by {n} processes, "
            f"this run has {info.world_size}; resume with the same number"
        )
    try:
        parts["model"].load_state_dict(ckpt["model"])
        parts["opt"].load_state_dict(ckpt["optimizer"])
        parts["scaler"].load_state_dict(ckpt["scaler"])
        parts["rng"].bit_generator.state = ckpt["rng"][info.rank]
        torch.set_rng_state(ckpt["torch_rng"][info.rank])
        if not all(isinstance(row, dict) for row in ckpt["history"]):
            raise ValueError("its history rows are not mappings")
        return int(ckpt["step"]), list(ckpt["history"])
    except (RuntimeError, ValueError, TypeError, KeyError, IndexError, AttributeError) as err:
        first = next((line.strip() for line in str(err).splitlines() if line.strip()), "")
        raise ConfigError(
            f"checkpoint {str(path)!r} cannot be resumed ({type(err).__name__}: {first[:200]}); "
            "delete it to restart"
        ) from None


@dataclass
class LMResult:
    metrics: dict[str, float]
    history: list[dict[str, Any]]
    steps: int
    params: int
    resumed_from: int = 0
    train_s: float = 0.0
    tokens_per_s: float | None = None
    #: seconds of the first step when ``train.compile`` (compiling included; in ``train_s`` too)
    compile_s: float | None = None


@dataclass
class _LMRun:
    """One :func:`train_lm` call: its processes, model, optimizer, data stream and what it recorded."""

    cfg: LMRunConfig
    corpus: Any
    info: DistInfo
    amp: torch.dtype | None
    out: Path | None
    say: Callable[[str], None]
    model: nn.Module
    loss_fn: NextTokenLoss
    eager_fn: nn.Module
    step_fn: nn.Module
    opt: torch.optim.Optimizer
    scaler: torch.amp.GradScaler
    rng: np.random.Generator
    train_data: np.ndarray
    val_data: np.ndarray
    step: int = 0
    history: list[dict[str, Any]] = field(default_factory=list)
    resumed_from: int = 0
    logged: int = 0
    compile_s: float | None = None
    train_s: float = 0.0
    timed_tokens: int = 0

    @property
    def ckpt_path(self) -> Path | None:
        return self.out / CHECKPOINT if self.out is not None else None

    def warn(self, msg: str) -> None:
        """One line on stderr, from rank 0 only."""
        if self.info.is_main:
            print(msg, file=sys.stderr, flush=True)


def _start_lm(
    cfg: LMRunConfig, corpus, out_dir: str | os.PathLike | None, log: Callable[[str], None] | None
) -> _LMRun:
    """Join the processes, then build the model, its loss, optimizer and this rank's seeded streams."""
    t = cfg.train
    info = setup_distributed(t.device)
    if t.threads is not None:
        torch.set_num_threads(t.threads)
    keep_freed_memory()  # ~1,100 page faults per step otherwise at the nanoGPT CPU setting (~3% of it)
    device = info.device
    amp = precision.amp_dtype(t.dtype, device)
    out = Path(out_dir) if out_dir is not None else None
    say = log if (log is not None and info.is_main) else (lambda _msg: None)

    torch.manual_seed(t.seed)  # the same initial weights on every rank
    model = build_model(cfg.model).to(device)
    loss_fn = NextTokenLoss(model)
    eager_fn = wrap_distributed(loss_fn, info)
    step_fn = precision.compile_module(eager_fn) if t.compile else eager_fn
    opt = make_lm_optimizer(model, t, device)
    scaler = precision.grad_scaler(device, amp)
    rng = np.random.default_rng([t.seed, info.rank])
    torch.manual_seed(t.seed + 1 + info.rank)  # dropout streams differ per rank
    train_data, val_data = corpus.splits["train"], corpus.splits["val"]
    return _LMRun(
        cfg=cfg,
        corpus=corpus,
        info=info,
        amp=amp,
        out=out,
        say=say,
        model=model,
        loss_fn=loss_fn,
        eager_fn=eager_fn,
        step_fn=step_fn,
        opt=opt,
        scaler=scaler,
        rng=rng,
        train_data=train_data,
        val_data=val_data,
    )


def _resume_or_begin(run: _LMRun) -> None:
    """Resume from the run folder's checkpoint if it has one (of this config only); write the folder."""
    ckpt_path, out = run.ckpt_path, run.out
    if ckpt_path is not None and ckpt_path.is_file():
        ckpt = read_checkpoint(ckpt_path)
        if ckpt["config_hash"] != run.cfg.config_hash():
            raise ConfigError(
                f"{str(out)!r} holds a checkpoint of a different config; use another --out or delete it"
            )
        parts = {"model": run.model, "opt": run.opt, "scaler": run.scaler, "rng": run.rng}
        run.step, run.history = _resume(ckpt, ckpt_path, parts, run.info)
        run.resumed_from = run.step
        run.say(f"resumed from {ckpt_path} at step {run.step}")
    if out is not None and run.info.is_main:
        out.mkdir(parents=True, exist_ok=True)
        (out / "config.json").write_text(json.dumps(run.cfg.model_dump(mode="json"), indent=2) + "\n")
        _write_log(out, run.history)
    run.logged = len(run.history)


def _save(run: _LMRun, now: int) -> None:
    """Write the checkpoint (rank 0), after gathering every rank's RNG states (all ranks call this)."""
    rngs = _gather(run.rng.bit_generator.state, run.info)
    torch_rngs = _gather(torch.get_rng_state(), run.info)
    if run.ckpt_path is None or not run.info.is_main:
        return
    payload = {
        "config": run.cfg.model_dump(mode="json"),
        "config_hash": run.cfg.config_hash(),
        "step": now,
        "model": run.model.state_dict(),
        "optimizer": run.opt.state_dict(),
        "scaler": run.scaler.state_dict(),
        "rng": rngs,
        "torch_rng": torch_rngs,
        "history": run.history,
    }
    checkpoint.save_checkpoint(run.ckpt_path, "lm", payload)


def _evaluate(run: _LMRun, now: int) -> dict[str, Any]:
    """Train and val loss on random blocks (a stream of their own), and val bits or perplexity."""
    t = run.cfg.train
    eval_rng = np.random.default_rng([t.seed, 1_000_003, now])  # independent of the training stream
    row: dict[str, Any] = {"step": now}
    for split, data in (("train", run.train_data), ("val", run.val_data)):
        row[f"{split}_loss"] = estimate_loss(
            run.loss_fn, data, t.batch_size, t.block_size, t.eval_iters, eval_rng, run.info.device, run.amp
        )
    row.update({f"val_{k}": v for k, v in bits_or_perplexity(row["val_loss"], run.corpus.unit).items()})
    return row


def _take_step(run: _LMRun, t0: float) -> tuple[torch.Tensor, float]:
    """Set the step's learning rate and take it (the first compiled step may fall back) -> (loss, lr)."""
    t = run.cfg.train
    lr = t.lr * lr_factor(run.step, t.steps, t.warmup, t.schedule, t.min_lr_frac)
    for group in run.opt.param_groups:
        group["lr"] = lr

    def step(f: nn.Module) -> torch.Tensor:
        return train_step(f, run.model, run.opt, run.scaler, run.train_data, t, run.rng, run.info, run.amp)

    if run.step_fn is not run.eager_fn and run.compile_s is None:  # the first step compiles (or falls back)
        total, run.step_fn = precision.first_step_or_eager(
            step, run.step_fn, run.eager_fn, run.opt, run.warn, run.rng
        )
        run.compile_s = time.perf_counter() - t0
    else:
        total = step(run.step_fn)
    return total, lr


def _record_loss(run: _LMRun, total: torch.Tensor, lr: float) -> None:
    """Add the step's loss to the history every ``log_every`` steps (and at the last); refuse NaN / inf."""
    t = run.cfg.train
    if run.step % t.log_every == 0 or run.step == t.steps:
        loss_value = float(total)
        if not math.isfinite(loss_value):
            raise RuntimeError(f"training loss is {loss_value} at step {run.step} (lower train.lr?)")
        run.history.append({"step": run.step, "loss": loss_value, "lr": lr})


def _evaluate_and_save(run: _LMRun, on_eval: Callable[[dict[str, Any]], None] | None) -> None:
    """Evaluate (rank 0) and checkpoint when due; append the new history rows to ``metrics.jsonl``."""
    t, step, info = run.cfg.train, run.step, run.info
    if (t.eval_every and step % t.eval_every == 0) or step == t.steps:
        if info.is_main:
            row = _evaluate(run, step)
            run.history.append(row)
            run.say(_format_eval(row, run.corpus.unit))
            if on_eval is not None:
                on_eval(row)
    if (t.ckpt_every and step % t.ckpt_every == 0) or step == t.steps:
        _save(run, step)
    if run.out is not None and info.is_main:
        run.logged = _append_log(run.out, run.history, run.logged)


def _finish(run: _LMRun) -> LMResult:
    """The result of the run; on rank 0 of a finished run with a folder, also its ``result.json``."""
    finals = [h for h in run.history if "val_loss" in h]
    metrics = {k: v for k, v in (finals[-1] if finals else {}).items() if k != "step"}
    rate = run.timed_tokens / run.train_s if run.train_s > 0 else None
    params = count_parameters(run.model)
    result = LMResult(
        metrics, run.history, run.step, params, run.resumed_from, run.train_s, rate, run.compile_s
    )
    if run.out is not None and run.info.is_main and run.step >= run.cfg.train.steps:
        summary = {"steps": run.step, "params": result.params, "metrics": metrics}
        summary.update({"tokens_per_s": rate, "train_s": run.train_s, "resumed_from": run.resumed_from})
        summary["compile_s"] = run.compile_s
        (run.out / "result.json").write_text(json.dumps(summary, indent=2) + "\n")
    return result


def train_lm(
    cfg: LMRunConfig,
    corpus,
    out_dir: str | os.PathLike | None = None,
    log: Callable[[str], None] | None = None,
    stop_after: int | None = None,
    on_start: Callable[[int], None] | None = None,
    on_step: StepHook | None = None,
    on_eval: Callable[[dict[str, Any]], None] | None = None,
) -> LMResult:
    """Train (or resume, when ``out_dir`` holds a checkpoint of the same config) and evaluate.

    ``on_start(step)`` is called once the run is set up (model built, checkpoint resumed, run
    folder written) and before its first step: the caller records the attempt from there, so a
    mistake found while setting up records nothing. ``stop_after`` returns after that step as if
    the process had died there (tests). On rank 0, ``on_step(step, loss, lr, total)`` is called
    after every step (``progress.py``; it reads the loss, a device sync) and ``on_eval(row)`` after
    every evaluation.
    """
    t = cfg.train
    run = _start_lm(cfg, corpus, out_dir, log)
    _resume_or_begin(run)
    if on_start is not None:
        on_start(run.step)
    tokens_per_step = t.batch_size * t.block_size * t.grad_accum * run.info.world_size
    run.loss_fn.train()
    while run.step < t.steps:
        t0 = time.perf_counter()
        total, lr = _take_step(run, t0)
        run.step += 1
        if on_step is not None and run.info.is_main:
            on_step(run.step, float(total), lr, t.steps)
        _record_loss(run, total, lr)
        run.train_s += time.perf_counter() - t0
        run.timed_tokens += tokens_per_step
        _evaluate_and_save(run, on_eval)
        if stop_after is not None and run.step >= stop_after:
            break
    return _finish(run)


def _format_eval(row: dict[str, Any], unit: str) -> str:
    extra = f"val bpc {row['val_bpc']:.4f}" if "val_bpc" in row else f"val ppl {row['val_ppl']:.2f}"
    return f"step {row['step']}: train loss {row['train_loss']:.4f}, val loss {row['val_loss']:.4f}, {extra}"


def _write_log(out: Path, history: list[dict[str, Any]]) -> None:
    """Rewrite ``metrics.jsonl`` from the history (on resume: what the checkpoint knew)."""
    text = "".join(json.dumps(h) + "\n" for h in history)
    (out / "metrics.jsonl").write_text(text)


def _append_log(out: Path, history: list[dict[str, Any]], logged: int) -> int:
    """Append the history rows past the first ``logged`` to ``metrics.jsonl``; the new count."""
    if len(history) > logged:
        with (out / "metrics.jsonl").open("a") as fh:
            fh.writelines(json.dumps(h) + "\n" for h in history[logged:])
    return len(history)
