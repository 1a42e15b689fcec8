"""Language-model training on a corpus: nanoGPT's loop, with exact resume and torchrun DDP.

    mixerzoo train-lm configs/nanogpt_cpu_char.yaml --data-dir data/shakespeare_char --out runs/sc
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

import hashlib
import json
import math
import os
import sys
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch
from pydantic import Field, model_validator
from torch import nn

from mixerzoo import checkpoint
from mixerzoo.config import (
    COMPILE_HELP,
    DEVICES,
    DTYPE_HELP,
    MAX_TRAIN_STEPS,
    Device,
    DType,
    apply_sets,
    load_config_file,
)
from mixerzoo.model import ModelConfig, build_model, count_parameters
from mixerzoo.ops.cross_entropy import linear_cross_entropy
from mixerzoo.params import Betas, StrictModel, validate
from mixerzoo.registry import ConfigError, short_repr
from mixerzoo.training import precision
from mixerzoo.training.allocator import keep_freed_memory
from mixerzoo.training.precision import autocast
from mixerzoo.training.progress import StepHook
from mixerzoo.training.schedule import lr_factor
from mixerzoo.training.train import make_optimizer, resolve_device

CHECKPOINT = checkpoint.LM_CHECKPOINT
#: train fields that do not change the numbers a run produces (left out of the resume check)
#: (``compile`` changes float rounding only, as the device does)
HASH_EXCLUDED_TRAIN = {"device", "ckpt_every", "log_every", "threads", "compile"}


class CorpusSection(StrictModel):
    name: str = Field(description="registered corpus (mixerzoo/corpora): char, kjv, text8, enwik8, ...")
    data_dir: str | None = Field(None, description="folder holding the corpus files (--data-dir overrides)")
    cache_dir: str | None = Field(None, description="token-array cache (default: <data_dir>/.mixerzoo-cache)")
    params: dict[str, Any] = Field(default_factory=dict, description="the corpus's parameters")


class LMTrainConfig(StrictModel):
    steps: int = Field(2000, ge=1, le=MAX_TRAIN_STEPS, description="optimizer steps")
    batch_size: int = Field(12, ge=1, description="blocks per micro-batch, per process")
    block_size: int = Field(64, ge=1, description="tokens per block (context length)")
    grad_accum: int = Field(1, ge=1, description="micro-batches per optimizer step")
    lr: float = Field(1e-3, gt=0, description="peak learning rate")
    min_lr_frac: float = Field(0.1, ge=0, le=1, description="final lr / peak lr (nanoGPT: min_lr = lr / 10)")
    warmup: int = Field(100, ge=0, description="linear warmup steps")
    schedule: Literal["cosine", "linear", "constant"] = Field("cosine", description="decay after warmup")
    weight_decay: float = Field(0.1, ge=0, description="AdamW weight decay on matrices")
    betas: Betas = Field((0.9, 0.99), description="AdamW (beta1, beta2), each in [0, 1)")
    grad_clip: float = Field(1.0, ge=0, description="max gradient norm (0: no clipping)")
    eval_every: int = Field(250, ge=0, description="estimate train/val loss every N steps (0: at the end)")
    eval_iters: int = Field(20, ge=1, description="random blocks-batches per loss estimate")
    log_every: int = Field(1, ge=1, description="record the training loss every N steps")
    ckpt_every: int = Field(250, ge=0, description="checkpoint every N steps (0: at the end only)")
    seed: int = Field(1337, ge=0, description="model init and data sampling seed")
    device: Device = Field("auto", description=DEVICES)
    dtype: DType = Field("auto", description=DTYPE_HELP)
    threads: int | None = Field(None, ge=1, description="CPU threads (default: torch's choice)")
    compile: bool = Field(False, description=COMPILE_HELP)


class LMRunConfig(StrictModel):
    """A language-model run: corpus + model (vocab_size filled from the corpus) + training."""

    name: str | None = Field(None, description="label (not part of the config hash)")
    corpus: CorpusSection
    model: ModelConfig
    train: LMTrainConfig = Field(default_factory=LMTrainConfig)

    @model_validator(mode="after")
    def _check_model(self) -> LMRunConfig:
        if self.model.input != "tokens" or self.model.head != "lm":
            raise ValueError("model: a language model needs input = tokens and head = lm")
        if self.model.resolved_position() == "learned" and self.model.max_len < self.train.block_size:
            raise ValueError(
                f"model.max_len = {self.model.max_len} < train.block_size = {self.train.block_size} "
                "(learned positions)"
            )
        return self

    def config_hash(self) -> str:
        """sha256 of what determines the numbers (not the name, paths, device or cadence of files)."""
        dump = self.model_dump(mode="json", exclude={"name"})
        dump["corpus"] = {"name": self.corpus.name, "params": self.corpus.params}
        dump["train"] = {k: v for k, v in dump["train"].items() if k not in HASH_EXCLUDED_TRAIN}
        return hashlib.sha256(json.dumps(dump, sort_keys=True).encode()).hexdigest()


def load_lm_config(
    source: str | os.PathLike | dict[str, Any],
    data_dir: str | None = None,
    sets: dict[str, Any] | None = None,
    cache_dir: str | None = None,
):
    """Validate a run config and load its corpus -> ``(LMRunConfig, Corpus)``.

    ``model.vocab_size`` is filled from the corpus (a larger one is kept, a smaller one is an
    error) and ``model.max_len`` defaults to ``train.block_size``.
    """
    from mixerzoo.corpora import load_corpus

    raw = source if isinstance(source, dict) else load_config_file(source)
    raw = apply_sets(raw, sets or {})
    extra = set(raw) - set(LMRunConfig.model_fields)
    if extra:
        allowed = ", ".join(LMRunConfig.model_fields)
        raise ConfigError(f"unknown field {short_repr(sorted(extra)[0])} (allowed: {allowed})")
    if "corpus" not in raw:
        raise ConfigError("missing required field 'corpus'")
    corpus_cfg = validate(CorpusSection, raw["corpus"], where="corpus")
    train_cfg = validate(LMTrainConfig, raw.get("train", {}), where="train")
    if data_dir is not None:
        corpus_cfg = corpus_cfg.model_copy(update={"data_dir": data_dir})
    if cache_dir is not None:
        corpus_cfg = corpus_cfg.model_copy(update={"cache_dir": cache_dir})
    corpus = load_corpus(
        corpus_cfg.name, data_dir=corpus_cfg.data_dir, cache_dir=corpus_cfg.cache_dir, **corpus_cfg.params
    )
    if not isinstance(raw.get("model", {}), dict):
        raise ConfigError("model: must be a mapping")
    model = dict(raw.get("model") or {})
    given = model.get("vocab_size")
    if isinstance(given, int) and not isinstance(given, bool) and given < corpus.vocab_size:
        raise ConfigError(
            f"model.vocab_size = {given} is smaller than the corpus's vocabulary ({corpus.vocab_size}); "
            "leave it out to use the corpus's"
        )
    model.setdefault("vocab_size", corpus.vocab_size)
    model.setdefault("max_len", train_cfg.block_size)
    cfg = validate(
        LMRunConfig,
        {
            "name": raw.get("name"),
            "corpus": corpus_cfg.model_dump(),
            "model": model,
            "train": raw.get("train", {}),
        },
    )
    _check_splits(cfg, corpus)
    return cfg, corpus


def _check_splits(cfg: LMRunConfig, corpus) -> None:
    """Refuse (ConfigError) a corpus whose train or val split is missing or no longer than a block."""
    for split in ("train", "val"):
        if split not in corpus.splits or len(corpus.splits[split]) <= cfg.train.block_size:
            n = len(corpus.splits.get(split, ()))
            raise ConfigError(
                f"corpus {corpus.name!r}: the {split} split has {n:,} tokens, not more than "
                f"train.block_size = {cfg.train.block_size}"
            )


# -- data ------------------------------------------------------------------------------
def get_batch(
    data: np.ndarray, batch_size: int, block_size: int, rng: np.random.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """``batch_size`` random blocks: x = data[i : i + block], y = data[i + 1 : i + block + 1] (int64)."""
    starts = rng.integers(0, len(data) - block_size, size=batch_size)
    chunk = data[starts[:, None] + np.arange(block_size + 1)].astype(np.int64)
    t = torch.from_numpy(chunk)
    return t[:, :-1], t[:, 1:]


# -- model -----------------------------------------------------------------------------
class NextTokenLoss(nn.Module):
    """Mean next-token cross-entropy over every position: (x, y) (b, l) -> scalar.

    A module so that DDP wraps the whole forward (features, head and loss). The head and the
    loss are fused (``ops/cross_entropy.py``): no (b, l, V) logits tensor is kept for backward.
    """

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        h = self.model.features(x)
        # under autocast the fused op falls back to the unfused head (softmax in float32)
        return linear_cross_entropy(h.reshape(-1, h.shape[-1]), self.model.lm_head.weight, y.reshape(-1))


@dataclass
class DistInfo:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def setup_distributed(device_name: str = "auto") -> DistInfo:
    """Read torchrun's RANK / WORLD_SIZE / LOCAL_RANK; init gloo (CPU) or NCCL (CUDA) when > 1 process."""
    import torch.distributed as dist

    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local = int(os.environ.get("LOCAL_RANK", "0"))
    device = resolve_device(device_name)
    if device.type == "cuda" and world > 1:
        device = torch.device("cuda", local)
        torch.cuda.set_device(device)
    if world > 1 and not dist.is_initialized():
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    return DistInfo(rank, world, local, device)


def wrap_distributed(loss_fn: nn.Module, info: DistInfo) -> nn.Module:
    """DDP around the loss module when there are several processes (gradients averaged over ranks)."""
    if info.world_size == 1:
        return loss_fn
    from torch.nn.parallel import DistributedDataParallel

    ids = [info.device.index] if info.device.type == "cuda" else None
    return DistributedDataParallel(loss_fn, device_ids=ids)


# -- evaluation ------------------------------------------------------------------------
@torch.no_grad()
def estimate_loss(
    loss_fn: NextTokenLoss,
    data: np.ndarray,
    batch_size: int,
    block_size: int,
    iters: int,
    rng: np.random.Generator,
    device: torch.device,
    amp: torch.dtype | None = None,
) -> float:
    """Mean loss over ``iters`` random batches (nanoGPT's ``estimate_loss``)."""
    was_training = loss_fn.training
    loss_fn.eval()
    total = 0.0
    for _ in range(iters):
        x, y = get_batch(data, batch_size, block_size, rng)
        with autocast(device, amp):
            total += float(loss_fn(x.to(device), y.to(device)))
    loss_fn.train(was_training)
    return total / iters


def bits_or_perplexity(loss: float, unit: str) -> dict[str, float]:
    """Nats per token -> bits per character / byte (char, byte corpora) or perplexity (token)."""
    if unit in ("char", "byte"):
        return {"bpc": loss / math.log(2)}
    return {"ppl": math.exp(min(loss, 700.0))}


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
    """The state of a train-lm checkpoint (``mixerzoo/checkpoint.py``; never unpickled)."""
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


def clip_grad_norm(params: list[nn.Parameter], max_norm: float) -> torch.Tensor:
    """``torch.nn.utils.clip_grad_norm_`` (2-norm) with the per-tensor norms and scaling in one call each.

    torch's version loops over the parameters in Python on CPU (its foreach path is GPU only);
    the norms, the total ``||(||g_1||, ..., ||g_n||)||`` and the factor ``min(1, max / (total +
    1e-6))`` are the same. On CPU the multiplication is skipped when that factor is 1 (the norm is
    below ``max_norm``): reading the norm costs no device sync there, and the result is the same to
    the bit. Returns the total norm before clipping.
    """
    grads = [p.grad for p in params if p.grad is not None]
    if not grads:
        return torch.zeros(())
    if len({(g.device, g.dtype) for g in grads}) > 1:  # one stacked norm needs one device and dtype
        return torch.nn.utils.clip_grad_norm_(params, max_norm)
    total = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads)))
    coef = max_norm / (total + 1e-6)
    if total.device.type != "cpu" or not coef >= 1.0:  # a factor of 1 changes nothing: skip it on CPU
        torch._foreach_mul_(grads, torch.clamp(coef, max=1.0))
    return total


def train_step(
    step_fn: nn.Module,
    model: nn.Module,
    opt: torch.optim.Optimizer,
    scaler: torch.amp.GradScaler,
    data: np.ndarray,
    t: LMTrainConfig,
    rng: np.random.Generator,
    info: DistInfo,
    amp: torch.dtype | None,
) -> torch.Tensor:
    """One optimizer step over ``grad_accum`` micro-batches; returns the step's mean loss (detached)."""
    device = info.device
    total = torch.zeros((), device=device)
    for micro in range(t.grad_accum):
        x, y = get_batch(data, t.batch_size, t.block_size, rng)
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        sync = info.world_size > 1 and micro < t.grad_accum - 1  # DDP all-reduces on the last one only
        with step_fn.no_sync() if sync else nullcontext(), autocast(device, amp):
            loss = step_fn(x, y)
            if t.grad_accum > 1:
                loss = loss / t.grad_accum
        scaler.scale(loss).backward()
        total += loss.detach()
    precision.optimizer_step(opt, scaler, list(model.parameters()), t.grad_clip, clip_grad_norm)
    opt.zero_grad(set_to_none=True)
    return total


def make_lm_optimizer(model: nn.Module, t: LMTrainConfig, device: torch.device) -> torch.optim.AdamW:
    """``make_optimizer``'s AdamW groups, with the fused kernel (one pass over all parameters).

    For a small model the per-parameter loop of the default CPU AdamW is ~5% of a step. Only the
    groups' parameters and weight decay are taken over: a group that carries its own ``fused``
    (an optimizer's ``param_groups`` list every option) would override the constructor's.
    """
    groups = [
        {"params": g["params"], "weight_decay": g["weight_decay"]}
        for g in make_optimizer(model, t.lr, t.weight_decay, t.betas).param_groups
    ]
    return torch.optim.AdamW(groups, lr=t.lr, betas=t.betas, fused=device.type in ("cpu", "cuda"))


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
