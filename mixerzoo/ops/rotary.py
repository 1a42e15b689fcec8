"""Rotary position embedding (RoPE), applied by attention-like mixers to queries and keys.

The model owns one :class:`Rotary` (``position: rope``) and passes it to every mixer's
``forward(..., rope=...)``. Length-extrapolation variants (CAT Sec. 6.2, CAT-ws App. D.2
study how models read sequences longer than those they were trained on), chosen by ``scaling``:

  * ``none``: plain RoPE, ``theta_i = base^(-2i/e)`` on pair i of the head width e.
  * ``pi``: position interpolation (Chen et al. 2023): positions are divided by ``scale`` so a
    model trained at length L reads ``scale * L``. With ``scale = 1`` this is plain RoPE.
  * ``yarn``: YaRN (Peng et al. 2023, Sec. 3.2-3.4): "NTK-by-parts" interpolation -- pair i with
    wavelength ``lambda_i = 2 pi / theta_i`` makes ``r_i = original_len / lambda_i`` turns over the
    training context; pairs with ``r_i < alpha`` (long wavelengths) are interpolated
    (``theta_i / scale``), pairs with ``r_i > beta`` keep ``theta_i``, and in between the ramp
    ``gamma = (r_i - alpha) / (beta - alpha)`` blends ``(1 - gamma) theta_i / scale + gamma theta_i``.
    The attention temperature ``sqrt(1/t) = 0.1 ln(scale) + 1`` multiplies both q and k, so
    q.k is scaled by 1/t.
"""

from __future__ import annotations

import math

import torch
from torch import nn

SCALINGS = ("none", "pi", "yarn")


class Rotary(nn.Module):
    """Rotates pairs (2i, 2i+1) of the head width of q and k by ``position * theta_i``.

    Parameters: ``base`` (10000), ``scale`` (1.0, the context extension factor s), ``scaling``
    ("pi": see the module docstring), ``original_len`` (training context length, YaRN only),
    ``yarn_alpha`` (1.0) and ``yarn_beta`` (32.0): YaRN's ramp bounds (Peng et al. use 1 and 32
    for LLaMA).
    """

    def __init__(
        self,
        base: float = 10000.0,
        scale: float = 1.0,
        scaling: str = "pi",
        original_len: int | None = None,
        yarn_alpha: float = 1.0,
        yarn_beta: float = 32.0,
    ) -> None:
        super().__init__()
        if scaling not in SCALINGS:
            raise ValueError(f"rope scaling = {scaling!r}: must be one of {', '.join(SCALINGS)}")
        if scale <= 0:
            raise ValueError(f"rope scale = {scale}: must be > 0")
        if scaling == "none" and scale != 1.0:
            raise ValueError(f"rope scale = {scale} with scaling = 'none': use scaling 'pi' or 'yarn'")
        if scaling == "yarn":
            if original_len is None or original_len < 1:
                raise ValueError("rope scaling = 'yarn' needs original_len (the training context length)")
            if not 0 <= yarn_alpha < yarn_beta:
                raise ValueError(f"rope yarn_alpha = {yarn_alpha}, yarn_beta = {yarn_beta}: need 0 <= a < b")
        self.base = base
        self.scale = scale
        self.scaling = scaling
        self.original_len = original_len
        self.yarn_alpha = yarn_alpha
        self.yarn_beta = yarn_beta

    def forward(self, q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """q, k: (b, h, l, e) with even e -> rotated (b, h, l, e)."""
        return self.rotate(q), self.rotate(k)

    def inv_freq(self, e: int, device=None, dtype: torch.dtype = torch.float64) -> torch.Tensor:
        """Per-pair angular frequencies (e/2,) after the chosen scaling, in ``dtype``."""
        theta = self.base ** (-torch.arange(0, e, 2, device=device, dtype=dtype) / e)
        if self.scaling == "pi":
            return theta / self.scale
        if self.scaling == "yarn":
            turns = self.original_len * theta / (2 * math.pi)  # r_i = L / lambda_i
            gamma = ((turns - self.yarn_alpha) / (self.yarn_beta - self.yarn_alpha)).clamp(0.0, 1.0)
            return (1 - gamma) * theta / self.scale + gamma * theta
        return theta

    def magnitude(self) -> float:
        """Factor applied to both q and k: YaRN's ``sqrt(1/t) = 0.1 ln(s) + 1`` (1 otherwise)."""
        if self.scaling == "yarn" and self.scale > 1:
            return 0.1 * math.log(self.scale) + 1.0
        return 1.0

    def angles(
        self, l: int, e: int, device, offset: int = 0, dtype: torch.dtype = torch.float32
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """cos and sin of ``position * inv_freq`` for positions offset..offset+l-1 -> (l, e/2) each.

        The angles are computed in float64 only for float64 outputs, in float32 otherwise (float64
        runs at a fraction of the speed on most GPUs and not at all on Apple's MPS); a float32
        angle ``position * freq`` is off by at most ~6e-8 of itself, as in the reference RoPE codes.
        """
        calc = torch.float64 if dtype == torch.float64 else torch.float32
        pos = torch.arange(offset, offset + l, device=device, dtype=calc)
        ang = torch.outer(pos, self.inv_freq(e, device, calc))
        return ang.cos().to(dtype), ang.sin().to(dtype)

    def rotate(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        """x: (..., l, e) -> rotated (..., l, e), positions starting at ``offset``."""
        l, e = x.shape[-2], x.shape[-1]
        if e % 2:
            raise ValueError(f"RoPE needs an even head width, got {e}")
        work = torch.promote_types(x.dtype, torch.float32)
        cos, sin = self.angles(l, e, x.device, offset, dtype=work)
        x1, x2 = x[..., 0::2].to(work), x[..., 1::2].to(work)
        out = torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).flatten(-2)
        mag = self.magnitude()
        if mag != 1.0:
            out = out * mag
        return out.to(x.dtype)
