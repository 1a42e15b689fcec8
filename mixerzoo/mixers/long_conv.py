"""Pure long convolution, no gating (Fu et al. 2023c, "Simple Hardware-Efficient Long Convolutions").

Zoology uses it as the gate-free reference point (Sec. 3, App. C "Pure long convolution",
Table 16), with the reference implementation's regularisation of the explicit filter
``k in R^{d x max_len}``, applied at every forward pass (Fu et al. 2023c Sec. 3.1):

  * smoothing: ``k <- AvgPool1d(k)`` over the filter taps (window ``smoothing_width``), then
  * squash: ``k <- sign(k) · max(|k| - λ, 0)`` (soft threshold, λ = 0.001 in Table 16),

then ``y = out_proj(GELU(k * u + D ⊙ u))`` with the convolution done by FFT (Table 16:
channels 1, GeLU activation). Filters are initialised ``N(0, 0.002^2)`` as in the reference code.
Smoothing mixes neighbouring *taps* of the filter, never time steps of the input, so it keeps
the convolution causal.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from pydantic import Field
from torch import nn

from mixerzoo.mixers import SEQUENCE_MIXERS
from mixerzoo.mixers.base import SequenceMixer
from mixerzoo.ops.conv import fft_causal_conv
from mixerzoo.registry import ConfigError


def squash(k: torch.Tensor, lam: float) -> torch.Tensor:
    """Soft threshold ``sign(k) · max(|k| - λ, 0)``: small taps become exactly zero (sparse filters)."""
    return torch.sign(k) * F.relu(k.abs() - lam)


def smooth(k: torch.Tensor, width: int) -> torch.Tensor:
    """Moving average over the taps of each filter. k: (c, w) -> (c, w); ``width`` odd."""
    if width <= 1:
        return k
    return F.avg_pool1d(k.unsqueeze(1), width, stride=1, padding=width // 2).squeeze(1)


@SEQUENCE_MIXERS.register("long_conv")
class LongConv(SequenceMixer):
    """Explicit long convolution with squash + smoothing regularisation (Fu et al. 2023c).

    Shapes: x (b, l, d) -> (b, l, d), l <= max_len. Parameters (defaults from Zoology Table 16
    and the reference implementation):
      * ``lam`` (0.001): squash threshold λ.
      * ``smoothing_width`` (7): taps averaged by the smoothing pool (odd; 1 = off).
      * ``kernel_dropout`` (0.0): dropout on the filter taps in training (Table 16 uses 0.1).
      * filter length = ``max_len`` (d x max_len free parameters).
    """

    examples = [{}, {"lam": 0.0, "smoothing_width": 1}, {"lam": 0.01, "smoothing_width": 3}]

    class Params(SequenceMixer.Params):
        lam: float = Field(0.001, ge=0, description="squash: soft threshold λ on the filter taps")
        smoothing_width: int = Field(7, ge=1, description="smoothing: moving-average window (odd)")
        kernel_dropout: float = Field(0.0, ge=0, lt=1, description="dropout on filter taps (training)")

    def __init__(self, d_model: int, max_len: int = 2048, **params) -> None:
        super().__init__(d_model, max_len, **params)
        if self.p.smoothing_width % 2 == 0:
            raise ConfigError(
                f"mixer[long_conv].smoothing_width = {self.p.smoothing_width}: must be odd (centred window)"
            )
        self.kernel = nn.Parameter(torch.randn(d_model, max_len) * 0.002)
        self.D = nn.Parameter(torch.randn(d_model))
        self.kernel_drop = nn.Dropout(self.p.kernel_dropout)
        self.out_proj = nn.Linear(d_model, d_model)

    def filters(self) -> torch.Tensor:
        """The regularised filter (d, max_len): smooth, then squash (reference-code order)."""
        return self.kernel_drop(squash(smooth(self.kernel, self.p.smoothing_width), self.p.lam))

    def forward(self, x, input_ids=None, rope=None):
        """x: (b, l, d) -> (b, l, d)."""
        l = x.shape[1]
        if l > self.max_len:
            raise ConfigError(
                f"sequence length {l} exceeds the long_conv filter length max_len = {self.max_len}"
            )
        y = fft_causal_conv(x.transpose(1, 2), self.filters()).transpose(1, 2) + x * self.D
        return self.out_proj(F.gelu(y))
