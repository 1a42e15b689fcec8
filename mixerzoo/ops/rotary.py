"""Rotary position embedding (RoPE), applied by attention-like mixers to queries and keys.

The model owns one :class:`Rotary` (``position: rope``) and passes it to every mixer's
``forward(..., rope=...)``. ``scale`` > 1 is position interpolation (Chen et al. 2023):
positions are divided by ``scale`` so a model trained at length L reads ``scale * L``.
"""

from __future__ import annotations

import torch
from torch import nn


class Rotary(nn.Module):
    def __init__(self, base: float = 10000.0, scale: float = 1.0) -> None:
        super().__init__()
        self.base = base
        self.scale = scale

    def forward(self, q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """q, k: (b, h, l, e) with even e -> rotated (b, h, l, e)."""
        return self.rotate(q), self.rotate(k)

    def angles(self, l: int, e: int, device, offset: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
        inv_freq = self.base ** (-torch.arange(0, e, 2, device=device, dtype=torch.float32) / e)
        pos = torch.arange(offset, offset + l, device=device, dtype=torch.float32) / self.scale
        ang = torch.outer(pos, inv_freq)  # (l, e/2)
        return ang.cos(), ang.sin()

    def rotate(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        l, e = x.shape[-2], x.shape[-1]
        if e % 2:
            raise ValueError(f"RoPE needs an even head width, got {e}")
        cos, sin = self.angles(l, e, x.device, offset)
        x1, x2 = x[..., 0::2].float(), x[..., 1::2].float()
        out = torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)
        return out.flatten(-2).to(x.dtype)
