"""BaseConv: gated convolution, ``y = (u W + b1) ⊙ (h * u + b2)`` (Zoology Def. 4.1, App. B).

Three filter parameterisations (App. B and the Fig. 2 setup):
  * ``explicit``: a free long filter ``h in R^{d x l_max}`` (Listing 1), applied by FFT.
  * ``short``: a depthwise causal filter of ``kernel_size`` taps (like ``nn.Conv1d``).
  * ``implicit``: ``h = MLP(positional features)`` (Listing 2), length-agnostic.
As in the listings, the layer adds its input back (``return y + u``) unless
``inner_residual`` is false.
"""

from __future__ import annotations

import math
from typing import Literal

import torch
from pydantic import Field
from torch import nn

from mixerzoo.mixers import SEQUENCE_MIXERS
from mixerzoo.mixers.base import SequenceMixer
from mixerzoo.ops.conv import causal_depthwise_conv, fft_causal_conv
from mixerzoo.registry import ConfigError


class ImplicitFilter(nn.Module):
    """``h(t) = MLP([t, cos(f w_t), sin(f w_t)])`` (Listing 2's PositionalEmbedding + filter MLP).

    Features are computed on the fly for any length, with the frequencies fixed by ``l_max``
    so a filter learned at one length extends to longer ones.
    """

    def __init__(self, d_model: int, l_max: int, d_emb: int = 3, d_hidden: int = 16) -> None:
        super().__init__()
        if d_emb < 1 or d_emb % 2 == 0:
            raise ConfigError(f"mixer[base_conv].d_emb = {d_emb}: must be odd and >= 1")
        self.l_max, self.bands = l_max, (d_emb - 1) // 2
        self.mlp = nn.Sequential(nn.Linear(d_emb, d_hidden), nn.ReLU(), nn.Linear(d_hidden, d_model))

    def features(self, l: int, device, dtype=torch.float32) -> torch.Tensor:
        idx = torch.arange(l, device=device, dtype=dtype)[:, None]
        t = idx / max(self.l_max - 1, 1)
        w = 2 * math.pi * idx / self.l_max
        f = torch.linspace(1e-4, self.bands - 1, self.bands, device=device, dtype=dtype)[None, :]
        return torch.cat([t, torch.cos(f * w), -torch.sin(f * w)], dim=-1)  # exp(-i f w)

    def forward(self, l: int, device, dtype=torch.float32) -> torch.Tensor:
        """-> filter (d, l)."""
        return self.mlp(self.features(l, device, dtype)).transpose(0, 1)


@SEQUENCE_MIXERS.register("base_conv")
class BaseConv(SequenceMixer):
    """Gated convolution ``(u W + b1) ⊙ (h * u + b2)`` (Zoology Def. 4.1).

    Shapes: x (b, l, d) -> (b, l, d). Parameters:
      * ``filter`` ("implicit"): ``explicit`` (d x max_len free filter), ``short`` or ``implicit``.
      * ``kernel_size`` (3): taps of the ``short`` filter.
      * ``d_emb`` (3), ``d_hidden`` (16): implicit filter MLP sizes (Listing 2 defaults).
      * ``inner_residual`` (True): ``return y + u`` as in Listings 1-2.
    """

    examples = [{}, {"filter": "explicit"}, {"filter": "short", "kernel_size": 4}]

    class Params(SequenceMixer.Params):
        filter: Literal["explicit", "short", "implicit"] = Field("implicit", description="filter form")
        kernel_size: int = Field(3, ge=1, description="taps of the short filter")
        d_emb: int = Field(3, ge=1, description="implicit filter: positional features (odd)")
        d_hidden: int = Field(16, ge=1, description="implicit filter: MLP hidden width")
        inner_residual: bool = Field(True, description="add the input back, as the listings do")

    def __init__(self, d_model: int, max_len: int = 2048, **params) -> None:
        super().__init__(d_model, max_len, **params)
        p = self.p
        self.projection = nn.Linear(d_model, d_model)
        self.conv_bias = nn.Parameter(torch.zeros(d_model))  # b2 of Def. 4.1
        if p.filter == "explicit":
            self.filter = nn.Parameter(torch.randn(d_model, max_len))
        elif p.filter == "short":
            bound = 1.0 / p.kernel_size**0.5
            self.filter = nn.Parameter(torch.empty(d_model, p.kernel_size).uniform_(-bound, bound))
        else:
            self.implicit = ImplicitFilter(d_model, max_len, p.d_emb, p.d_hidden)

    def convolve(self, u: torch.Tensor) -> torch.Tensor:
        l = u.shape[1]
        if self.p.filter == "short":
            return causal_depthwise_conv(u, self.filter)
        if self.p.filter == "explicit":
            if l > self.max_len:
                raise ConfigError(
                    f"sequence length {l} exceeds the explicit filter length max_len = {self.max_len}"
                )
            k = self.filter
        else:
            k = self.implicit(l, u.device, u.dtype)
        return fft_causal_conv(u.transpose(1, 2), k).transpose(1, 2)

    def forward(self, x, input_ids=None, rope=None):
        """x: (b, l, d) -> (b, l, d)."""
        y = self.projection(x) * (self.convolve(x) + self.conv_bias)
        return y + x if self.p.inner_residual else y
