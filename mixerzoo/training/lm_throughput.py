"""Training tokens/s of a language-model run config (``mixerzoo lm bench``): the step of
``train_lm``, timed after warmup, per process under torchrun.

``training/throughput.py`` re-exports :func:`bench_lm`.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from mixerzoo.model import build_model, count_parameters
from mixerzoo.training import precision
from mixerzoo.training.allocator import keep_freed_memory


def _warn(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


@dataclass
class _LMBench:
    """What :func:`bench_lm` times: this process's model, loss, optimizer and batch stream."""

    cfg: Any
    info: Any
    model: torch.nn.Module
    eager_fn: torch.nn.Module
    step_fn: torch.nn.Module
    opt: torch.optim.Optimizer
    scaler: torch.amp.GradScaler
    rng: Any
    amp: torch.dtype | None
    data: Any
    train_step: Callable[..., torch.Tensor]

    def step(self, fn: torch.nn.Module) -> torch.Tensor:
        """One optimizer step of ``train_lm`` with the loss module ``fn``."""
        t = self.cfg.train
        return self.train_step(
            fn, self.model, self.opt, self.scaler, self.data, t, self.rng, self.info, self.amp
        )


def _lm_bench_setup(cfg, corpus) -> _LMBench:
    """Join the processes and build what ``train_lm`` builds, with its seeds for the weights and data."""
    import numpy as np

    from mixerzoo.training import lm

    t = cfg.train
    info = lm.setup_distributed(t.device)
    if t.threads is not None:
        torch.set_num_threads(t.threads)
    keep_freed_memory()  # as train_lm() does
    amp = precision.amp_dtype(t.dtype, info.device)
    torch.manual_seed(t.seed)
    model = build_model(cfg.model).to(info.device)
    eager_fn = lm.wrap_distributed(lm.NextTokenLoss(model), info)
    step_fn = precision.compile_module(eager_fn) if t.compile else eager_fn
    opt = lm.make_lm_optimizer(model, t, info.device)
    scaler = precision.grad_scaler(info.device, amp)
    rng = np.random.default_rng([t.seed, info.rank])
    data = corpus.splits["train"]
    return _LMBench(cfg, info, model, eager_fn, step_fn, opt, scaler, rng, amp, data, lm.train_step)


def _time_lm_steps(b: _LMBench, steps: int, warmup: int) -> tuple[float, float | None, torch.Tensor]:
    """Median seconds per step after ``warmup`` (the first compiles, if asked) -> (s, compile_s, loss)."""
    cuda = b.info.device.type == "cuda"
    times = []
    compile_s = None
    for i in range(warmup + steps):
        if cuda:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        if i == 0 and b.step_fn is not b.eager_fn:  # compiles, or falls back to eager with a warning
            loss, b.step_fn = precision.first_step_or_eager(
                b.step, b.step_fn, b.eager_fn, b.opt, _warn, b.rng
            )
        else:
            loss = b.step(b.step_fn)
        float(loss)  # waits for the step (CUDA) as the training loop's logging does
        if i == 0 and b.cfg.train.compile:
            compile_s = time.perf_counter() - t0
        if i >= warmup:
            times.append(time.perf_counter() - t0)
    step_s = statistics.median(times)
    return step_s, compile_s, loss


def bench_lm(cfg, corpus, steps: int = 20, warmup: int = 5) -> list[dict[str, Any]]:
    """Training tokens/s of an LM run config (``mixerzoo lm bench``), the loop of ``train_lm``.

    Median seconds per optimizer step after ``warmup`` steps, on random blocks of the corpus's
    training split. With ``train.compile`` the first (warmup) step compiles: ``compile_s`` is its
    time and ``compile`` says whether the compiled step was measured (false: it fell back).
    Under torchrun each process measures its own steps (DDP all-reduce included) and reports
    ``tokens_per_s`` per process; rank 0 returns every rank's row.
    """
    b = _lm_bench_setup(cfg, corpus)
    t, info = cfg.train, b.info
    step_s, compile_s, loss = _time_lm_steps(b, steps, warmup)
    tokens = t.batch_size * t.block_size * t.grad_accum
    row = {
        "config": cfg.name,
        "corpus": corpus.name,
        "mixer": "+".join(dict.fromkeys(s.name for s in cfg.model.layer_mixers())),
        "params": count_parameters(b.model),
        "batch": t.batch_size,
        "block_size": t.block_size,
        "grad_accum": t.grad_accum,
        "device": str(info.device),
        "threads": torch.get_num_threads(),
        "rank": info.rank,
        "world_size": info.world_size,
        "step_s": step_s,
        "tokens_per_s": tokens / step_s,
        "compile": t.compile and b.step_fn is not b.eager_fn,
        "compile_s": compile_s,
        "loss": float(loss),
        "status": "ok",
    }
    if info.world_size == 1:
        return [row]
    import torch.distributed as dist

    rows: list[Any] = [None] * info.world_size
    dist.all_gather_object(rows, row)
    return rows
