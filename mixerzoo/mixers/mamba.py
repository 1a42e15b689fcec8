"""Mamba selective state-space mixer (Gu & Dao 2023, Sec. 3 and Alg. 2; ICLL App. A.12, Eq. 90-92).

``x, z = in_proj(u)``; ``x = silu(conv(x))`` with a short causal depthwise conv; per step
``Delta = softplus(dt_proj(x W_dt))``, ``B, C = x W_B, x W_C``; per channel c and state n
``h_t = exp(Delta_t A) ⊙ h_{t-1} + Delta_t B_t x_t`` (ZOH for A, Euler for B as in the
reference code), ``y_t = C_t h_t + D ⊙ x_t``; output ``out_proj(y ⊙ silu(z))``.
``A = -exp(A_log)`` starts at S4D-Real ``A_n = -(n + 1)``; the dt bias is the inverse softplus of a
log-uniform dt in [dt_min, dt_max] (Gu & Dao App. and reference code).

Two scans compute the same states: ``sequential`` (one step per position, the reference) and
``chunked`` (``ops/scan.py``: chunk-local log-space cumulative decays, O(l) work in
``c + l / c`` sequential steps).
"""

from __future__ import annotations

import math
from typing import Literal

import torch
import torch.nn.functional as F
from pydantic import Field
from torch import nn

from mixerzoo.mixers import SEQUENCE_MIXERS
from mixerzoo.mixers.base import SequenceMixer
from mixerzoo.ops.conv import causal_depthwise_conv
from mixerzoo.ops.scan import selective_scan_chunk, selective_scan_recurrent


@SEQUENCE_MIXERS.register("mamba")
class Mamba(SequenceMixer):
    """Selective SSM with input-dependent Delta, B, C and a silu(z) gate.

    Shapes: x (b, l, d) -> (b, l, d); inner width D = expand * d; SSM state (b, D, n);
    conv state (b, D, d_conv - 1). Parameters:
      * ``d_state`` (16): n, state size per inner channel.
      * ``d_conv`` (4): taps of the short causal depthwise conv.
      * ``expand`` (2): D = expand * d.
      * ``dt_rank`` (None): rank of the Delta projection; None means ceil(d / 16).
      * ``dt_min`` (0.001), ``dt_max`` (0.1): range of the initial Delta.
      * ``scan`` ("chunked"): ``chunked`` or ``sequential`` (reference); both give the same result.
      * ``chunk_size`` (64): chunk length of the chunked scan.
    """

    recurrent = True
    examples = [{}, {"scan": "sequential"}, {"d_state": 4, "expand": 1, "chunk_size": 5}]

    class Params(SequenceMixer.Params):
        d_state: int = Field(16, ge=1, description="state size n per inner channel")
        d_conv: int = Field(4, ge=1, description="short conv taps")
        expand: int = Field(2, ge=1, description="inner width / d_model")
        dt_rank: int | None = Field(None, ge=1, description="rank of the Delta projection (None: ceil(d/16))")
        dt_min: float = Field(0.001, gt=0, description="smallest initial Delta")
        dt_max: float = Field(0.1, gt=0, description="largest initial Delta")
        scan: Literal["chunked", "sequential"] = Field("chunked", description="scan implementation")
        chunk_size: int = Field(64, ge=1, description="chunk length of the chunked scan")

    def __init__(self, d_model: int, max_len: int = 2048, **params) -> None:
        super().__init__(d_model, max_len, **params)
        p = self.p
        inner = p.expand * d_model
        self.inner = inner
        self.dt_rank = p.dt_rank or math.ceil(d_model / 16)
        self.in_proj = nn.Linear(d_model, 2 * inner, bias=False)
        bound = 1.0 / math.sqrt(p.d_conv)  # nn.Conv1d's default initialisation
        self.conv_weight = nn.Parameter(torch.empty(inner, p.d_conv).uniform_(-bound, bound))  # lag-indexed
        self.conv_bias = nn.Parameter(torch.empty(inner).uniform_(-bound, bound))
        self.x_proj = nn.Linear(inner, self.dt_rank + 2 * p.d_state, bias=False)
        self.dt_proj = nn.Linear(self.dt_rank, inner, bias=True)
        std = self.dt_rank**-0.5
        nn.init.uniform_(self.dt_proj.weight, -std, std)
        dt = torch.exp(torch.rand(inner) * (math.log(p.dt_max) - math.log(p.dt_min)) + math.log(p.dt_min))
        with torch.no_grad():
            self.dt_proj.bias.copy_(dt + torch.log(-torch.expm1(-dt)))  # inverse softplus
        self.dt_proj._no_reinit = True  # the backbone's GPT-2 init must keep this Delta init
        a = torch.arange(1, p.d_state + 1, dtype=torch.float32).repeat(inner, 1)
        self.A_log = nn.Parameter(torch.log(a))  # S4D-Real
        self.D = nn.Parameter(torch.ones(inner))
        self.out_proj = nn.Linear(inner, d_model, bias=False)

    def selective_inputs(self, x):
        """x: (..., D) after conv+silu -> Delta (..., D), A (D, n), B (..., n), C (..., n)."""
        n = self.p.d_state
        dt, b, c = self.x_proj(x).split([self.dt_rank, n, n], dim=-1)
        return F.softplus(self.dt_proj(dt)), -torch.exp(self.A_log), b, c

    def forward(self, x, input_ids=None, rope=None):
        """x: (b, l, d) -> (b, l, d)."""
        u, z = self.in_proj(x).chunk(2, dim=-1)
        u = F.silu(causal_depthwise_conv(u, self.conv_weight) + self.conv_bias)
        delta, a, b, c = self.selective_inputs(u)
        if self.p.scan == "chunked":
            y, _ = selective_scan_chunk(u, delta, a, b, c, self.p.chunk_size)
        else:
            y, _ = selective_scan_recurrent(u, delta, a, b, c)
        return self.out_proj((y + self.D * u) * F.silu(z))

    def state_size(self) -> int:
        return self.inner * self.p.d_state + self.inner * (self.p.d_conv - 1)

    def init_state(self, batch, device=None, dtype=None):
        conv = torch.zeros(batch, self.inner, self.p.d_conv - 1, device=device, dtype=dtype)
        ssm = torch.zeros(batch, self.inner, self.p.d_state, device=device, dtype=dtype)
        return conv, ssm

    def step(self, x_t, state):
        """x_t: (b, d) -> (y_t (b, d), (conv state (b, D, d_conv-1) oldest first, SSM state (b, D, n)))."""
        conv, ssm = state
        u, z = self.in_proj(x_t).chunk(2, dim=-1)
        window = torch.cat([conv, u.unsqueeze(-1)], dim=-1)  # (b, D, d_conv), newest last
        u = F.silu((window * self.conv_weight.flip(-1)).sum(-1) + self.conv_bias)
        delta, a, b, c = self.selective_inputs(u)
        ssm = torch.exp(delta.unsqueeze(-1) * a) * ssm + (delta * u).unsqueeze(-1) * b.unsqueeze(1)
        y = torch.einsum("bdn,bn->bd", ssm, c) + self.D * u
        return self.out_proj(y * F.silu(z)), (window[..., 1:], ssm)
