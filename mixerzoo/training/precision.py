"""Mixed precision and compilation: the one implementation that task training and LM training share.

``train.dtype`` (``config.DTYPES``): ``auto`` is float32 on the CPU and MPS and bfloat16 on CUDA
(float16 where the GPU has no bfloat16); ``float32`` trains without autocast; ``bfloat16`` and ``float16`` run
the forward (and so the backward) under ``torch.autocast`` on any device, the CPU included: weights,
gradients and the optimizer's moments stay float32. float16 adds loss scaling (``GradScaler``), as
its range is too narrow for small gradients; bfloat16 has float32's range and needs none.

``train.compile`` runs the loss module through ``torch.compile`` (:func:`compile_module`); the first
step compiles, and if compiling fails the step is undone and the run goes on eagerly after one
warning line (:func:`first_step_or_eager`). Evaluation is always eager.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext

import torch
from torch import nn

_REDUCED = {"bfloat16": torch.bfloat16, "float16": torch.float16}


def amp_dtype(name: str, device: torch.device) -> torch.dtype | None:
    """The autocast dtype of ``train.dtype = name`` on ``device``; None: train in float32."""
    if name == "auto":
        if device.type != "cuda":
            return None
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    return _REDUCED.get(name)


def autocast(device: torch.device, amp: torch.dtype | None) -> AbstractContextManager:
    """``torch.autocast`` to ``amp`` on ``device``; no context at all for float32 (``amp`` None)."""
    return torch.autocast(device.type, dtype=amp) if amp is not None else nullcontext()


def grad_scaler(device: torch.device, amp: torch.dtype | None) -> torch.amp.GradScaler:
    """Loss scaling for float16 autocast; a disabled scaler (every call passes through) otherwise."""
    return torch.amp.GradScaler(device.type, enabled=amp == torch.float16)


def optimizer_step(
    opt: torch.optim.Optimizer,
    scaler: torch.amp.GradScaler,
    params: list[nn.Parameter],
    max_norm: float | None,
    clip: Callable[[list[nn.Parameter], float], object] = torch.nn.utils.clip_grad_norm_,
) -> None:
    """Clip the (unscaled) gradients to ``max_norm`` (None or 0: no clipping), then step and update
    the scaler; the gradients were computed from ``scaler.scale(loss)``."""
    if max_norm:
        scaler.unscale_(opt)
        clip(params, max_norm)
    scaler.step(opt)
    scaler.update()


#: torch.compile backend of ``train.compile`` (tests swap in a cheaper or a failing one)
COMPILE_BACKEND: str | Callable = "inductor"


def compile_module(module: nn.Module, backend: str | Callable | None = None) -> nn.Module:
    """``torch.compile`` of a loss module (static shapes: the training batches share one shape).

    Compiling is lazy: the forward graph compiles at the first call and the backward graph at the
    first backward, so a failure shows in the first step (see :func:`first_step_or_eager`).
    """
    return torch.compile(module, backend=backend or COMPILE_BACKEND, dynamic=False)


def first_step_or_eager(
    step: Callable[[nn.Module], torch.Tensor],
    compiled: nn.Module,
    eager: nn.Module,
    opt: torch.optim.Optimizer,
    warn: Callable[[str], None],
    rng=None,
) -> tuple[torch.Tensor, nn.Module]:
    """The first step with the compiled loss -> ``(loss, the loss module to use from now on)``.

    ``step(loss_module)`` runs one optimizer step; ``rng`` is the numpy generator it draws batches
    from, if any. If compiling fails (no C++ compiler, an unsupported operation, ...) the step is
    undone: the data and torch RNG states are restored and the partial gradients dropped
    (compilation fails in the forward or the backward, before the optimizer step), one warning line
    is given, and the step runs again eagerly, so the run goes on with the numbers an eager run
    produces. An error that is not the compiler's shows again in the eager step, with its message.
    """
    np_state = rng.bit_generator.state if rng is not None else None
    torch_state = torch.get_rng_state()
    try:
        return step(compiled), compiled
    except Exception as err:  # noqa: BLE001 - any compile failure: fall back, say so in one line
        if rng is not None:
            rng.bit_generator.state = np_state
        torch.set_rng_state(torch_state)
        opt.zero_grad(set_to_none=True)
        warn(
            f"warning: train.compile = true: torch.compile failed ({root_cause(err)}); "
            "training without it (set train.compile = false to skip compiling)"
        )
        return step(eager), eager


def root_cause(err: BaseException) -> str:
    """``Outer: Inner: first line of the innermost message`` (torch wraps a backend's error, and
    the wrapper's own text is a multi-line report)."""
    names, inner = [type(err).__name__], err
    for _ in range(5):
        nxt = getattr(inner, "inner_exception", None) or inner.__cause__
        if nxt is None or nxt is inner:
            break
        inner = nxt
        names.append(type(inner).__name__)
    first = next((line for line in str(inner).splitlines() if line.strip()), "").strip()
    return ": ".join(dict.fromkeys(names)) + (f": {first[:160]}" if first else "")
