"""Ops that have no reduced-precision kernel, run in float32 when given bf16 / fp16 inputs.

Under ``torch.autocast`` the matmuls before such an op return bf16 (or fp16) tensors, and some
kernels exist only for float32 and float64: ``torch.linalg.solve_triangular`` has no bf16 or
fp16 kernel on the CPU or on CUDA. The wrappers here cast reduced-precision inputs up to
float32, run the op, and cast the result back to the dtype the inputs promote to; float32 and
float64 inputs pass through untouched, so results outside autocast are those of the bare op.
:func:`no_autocast` keeps a precision-sensitive computation out of autocast altogether.
"""

from __future__ import annotations

import contextlib

import torch


def solve_unit_lower(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``X`` with ``A X = B`` for unit lower-triangular ``A`` (only its strict lower triangle is read)."""
    dtype = torch.promote_types(a.dtype, b.dtype)
    work = torch.promote_types(dtype, torch.float32)
    x = torch.linalg.solve_triangular(a.to(work), b.to(work), upper=False, unitriangular=True)
    return x.to(dtype)


def no_autocast(device: torch.device | str) -> contextlib.AbstractContextManager:
    """A context that turns autocast off on ``device``'s type (a no-op where it has no autocast)."""
    kind = torch.device(device).type
    if torch.amp.is_autocast_available(kind):
        return torch.autocast(kind, enabled=False)
    return contextlib.nullcontext()
