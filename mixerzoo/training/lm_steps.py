"""The pieces of language-model training: random-block batches, the loss module, DDP setup,
the loss estimate, and one optimizer step.

``training/lm.py`` runs them (and re-exports them).
"""

from __future__ import annotations

import math
import os
from contextlib import nullcontext
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn

from mixerzoo.ops.cross_entropy import linear_cross_entropy
from mixerzoo.training import precision
from mixerzoo.training.lm_config import LMTrainConfig
from mixerzoo.training.precision import autocast
from mixerzoo.training.train import make_optimizer, resolve_device


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


def finish_distributed() -> None:
    """End a run of several processes: every rank reaches this point, the group closes, the process exits.

    Each rank leaves with ``os._exit(0)`` once its output is flushed, skipping the interpreter's
    teardown: there gloo's worker threads, destroyed with the objects that hold them, now and then
    abort a rank whose work is done ("terminate called without an active exception", exit -6), which
    torchrun then reports as a failed run. Call it last; in a single process it does nothing.
    """
    import sys

    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return
    dist.barrier()  # every rank reaches the end (rank 0 writes the store) before the group closes
    dist.destroy_process_group()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


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
