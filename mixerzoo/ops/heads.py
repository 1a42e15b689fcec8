"""Heads and chunks: the reshapes shared by the attention-like and chunked mixers.

Shapes: ``b`` batch, ``l`` length, ``h`` heads, ``e`` head width, ``n`` chunks of ``c`` steps.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from einops import rearrange


def split_heads(x: torch.Tensor, h: int) -> torch.Tensor:
    """(b, l, h*e) -> (b, h, l, e)."""
    return rearrange(x, "b l (h e) -> b h l e", h=h)


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """(b, h, l, e) -> (b, l, h*e)."""
    return rearrange(x, "b h l e -> b l (h e)")


def split_chunks(x: torch.Tensor, chunk: int, dim: int = -2) -> torch.Tensor:
    """Zero-pad axis ``dim`` (length l) to a multiple of ``chunk`` and split it into (n, chunk).

    E.g. (b, h, l, e) with dim=-2 -> (b, h, n, c, e), n = ceil(l / c). The zeros sit after
    every real position, so in a causal computation they are every real step's future.
    """
    dim = dim % x.ndim
    pad = (-x.shape[dim]) % chunk
    if pad:
        x = F.pad(x, (0, 0) * (x.ndim - 1 - dim) + (0, pad))
    return x.unflatten(dim, (-1, chunk))
