"""Mamba-2: the SSD layer (Dao & Gu 2024, "Transformers are SSMs", Sec. 7; reference ``Mamba2Simple``).

``z, x, B, C, dt = in_proj(u)`` all in parallel from the block input (Sec. 7.1, "parallel
parameter projections"); a short causal depthwise conv and SiLU on ``(x, B, C)``; per head h
of width p, a scalar decay ``exp(dt_t a_h)`` with ``dt_t = softplus(dt_raw + dt_bias)`` and
``a_h = -exp(A_log_h)`` (Sec. 3 / 6: A_t = a_t I); ``B, C`` of size n shared by all heads (one
group: the multi-input SSM / multi-value pattern of Sec. 7.2)::

    H_t = exp(dt_t a_h) H_{t-1} + dt_t x_t B_t^T,     y_t = H_t C_t + D_h x_t

then ``y = RMSNorm(y ⊙ silu(z))`` over the inner width (Sec. 7.1, "extra normalization",
normalising after the gate as the reference's ``norm_before_gate=False``) and ``out_proj``.
Initialisation as the reference: ``a_h`` uniform in [1, 16], ``dt_bias`` the inverse softplus of a
log-uniform dt in [dt_min, dt_max] (floored at 1e-4), ``D = 1``.

The SSM runs through ``ops/ssd.py``: ``chunked`` (the SSD algorithm, Sec. 6, linear in l) or
``sequential`` (the recurrence, the reference); ``step`` is the recurrent form for decoding.
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
from mixerzoo.ops.ssd import ssd_chunk, ssd_recurrent
from mixerzoo.registry import ConfigError

NORM_EPS = 1e-5  # the reference's gated RMSNorm eps
DT_INIT_FLOOR = 1e-4


@SEQUENCE_MIXERS.register("mamba2")
class Mamba2(SequenceMixer):
    """Mamba-2 (SSD) mixer with per-head scalar decay, shared B/C, a short conv and a gated RMSNorm.

    Shapes: x (b, l, d) -> (b, l, d); inner width D = expand * d split into h heads of width
    p = D / h; SSM state (b, h, p, n); conv state (b, D + 2n, conv_size - 1). Parameters:
      * ``d_state`` (64): n, the state size of B and C (``Mamba2Simple``'s default).
      * ``num_heads`` (2): h; the reference's head width 64 at d_model = 64.
      * ``expand`` (2): D = expand * d.
      * ``conv_size`` (4): taps of the short causal conv on (x, B, C).
      * ``dt_min`` (0.001), ``dt_max`` (0.1): range of the initial step sizes.
      * ``a_init_min`` (1), ``a_init_max`` (16): range of the initial ``-a_h``.
      * ``scan`` ("chunked"): ``chunked`` (SSD, Sec. 6) or ``sequential`` (reference recurrence).
      * ``chunk_size`` (64): chunk length of the chunked form (speed only).
    """

    recurrent = True
    examples = [
        {},
        {"scan": "sequential"},
        {"num_heads": 4, "d_state": 8, "chunk_size": 5},
        {"num_heads": 1, "expand": 1, "conv_size": 1, "chunk_size": 7},
    ]

    class Params(SequenceMixer.Params):
        d_state: int = Field(64, ge=1, description="state size n of B and C")
        num_heads: int = Field(2, ge=1, description="heads h; must divide expand * d_model")
        expand: int = Field(2, ge=1, description="inner width / d_model")
        conv_size: int = Field(4, ge=1, description="taps of the short causal conv on (x, B, C)")
        dt_min: float = Field(0.001, gt=0, description="smallest initial step size dt")
        dt_max: float = Field(0.1, gt=0, description="largest initial step size dt")
        a_init_min: float = Field(1.0, gt=0, description="smallest initial -a (decay rate per head)")
        a_init_max: float = Field(16.0, gt=0, description="largest initial -a (decay rate per head)")
        scan: Literal["chunked", "sequential"] = Field("chunked", description="SSM implementation")
        chunk_size: int = Field(64, ge=1, description="chunk length of the chunked form")

    def __init__(self, d_model: int, max_len: int = 2048, **params) -> None:
        super().__init__(d_model, max_len, **params)
        p = self.p
        h = p.num_heads
        self.inner = p.expand * d_model
        if self.inner % h:
            raise ConfigError(
                f"mixer[mamba2].num_heads = {h}: must divide inner width expand * d_model = {self.inner}"
            )
        self.head_dim = self.inner // h
        for low, high in (("dt_min", "dt_max"), ("a_init_min", "a_init_max")):
            if getattr(p, low) > getattr(p, high):
                raise ConfigError(
                    f"mixer[mamba2].{low} = {getattr(p, low)}: must be <= {high} = {getattr(p, high)}"
                )
        n = p.d_state
        self.conv_channels = self.inner + 2 * n
        self.in_proj = nn.Linear(d_model, 2 * self.inner + 2 * n + h, bias=False)  # [z, x, B, C, dt]
        bound = 1.0 / math.sqrt(p.conv_size)  # nn.Conv1d's default initialisation
        self.conv_weight = nn.Parameter(torch.empty(self.conv_channels, p.conv_size).uniform_(-bound, bound))
        self.conv_bias = nn.Parameter(torch.empty(self.conv_channels).uniform_(-bound, bound))
        log_dt = torch.rand(h) * (math.log(p.dt_max) - math.log(p.dt_min)) + math.log(p.dt_min)
        dt = torch.exp(log_dt).clamp(min=DT_INIT_FLOOR)
        self.dt_bias = nn.Parameter(dt + torch.log(-torch.expm1(-dt)))  # inverse softplus
        self.A_log = nn.Parameter(torch.log(torch.empty(h).uniform_(p.a_init_min, p.a_init_max)))
        self.D = nn.Parameter(torch.ones(h))
        self.norm_weight = nn.Parameter(torch.ones(self.inner))
        self.out_proj = nn.Linear(self.inner, d_model, bias=False)

    def _split(self, zxbcdt):
        return zxbcdt.split([self.inner, self.conv_channels, self.p.num_heads], dim=-1)

    def _ssm_inputs(self, xbc, dt_raw):
        """After the conv: (..., D + 2n), (..., h) -> x (..., h, p), dt (..., h), a (h,), B, C (..., n)."""
        n = self.p.d_state
        x, b, c = F.silu(xbc).split([self.inner, n, n], dim=-1)
        dt = F.softplus(dt_raw + self.dt_bias)
        return x.unflatten(-1, (self.p.num_heads, self.head_dim)), dt, -torch.exp(self.A_log), b, c

    def _finish(self, y, x, z):
        """y, x: (..., h, p), z (..., D) -> (..., d): D skip, RMSNorm(y ⊙ silu(z)), out_proj."""
        y = (y + self.D.unsqueeze(-1) * x).flatten(-2) * F.silu(z)
        y = y * torch.rsqrt(y.pow(2).mean(-1, keepdim=True) + NORM_EPS) * self.norm_weight
        return self.out_proj(y)

    def forward(self, x, input_ids=None, rope=None):
        """x: (b, l, d) -> (b, l, d)."""
        z, xbc, dt_raw = self._split(self.in_proj(x))
        xbc = causal_depthwise_conv(xbc, self.conv_weight) + self.conv_bias
        u, dt, a, b, c = self._ssm_inputs(xbc, dt_raw)
        if self.p.scan == "chunked":
            y, _ = ssd_chunk(u, dt, a, b, c, self.p.chunk_size)
        else:
            y, _ = ssd_recurrent(u, dt, a, b, c)
        return self._finish(y, u, z)

    def state_size(self) -> int:
        ssm = self.p.num_heads * self.head_dim * self.p.d_state
        return ssm + self.conv_channels * (self.p.conv_size - 1)

    def init_state(self, batch, device=None, dtype=None):
        conv = torch.zeros(batch, self.conv_channels, self.p.conv_size - 1, device=device, dtype=dtype)
        ssm = torch.zeros(batch, self.p.num_heads, self.head_dim, self.p.d_state, device=device, dtype=dtype)
        return conv, ssm

    def step(self, x_t, state):
        """x_t: (b, d) -> (y_t (b, d), (conv window (b, D + 2n, conv_size - 1), H (b, h, p, n)))."""
        conv, ssm = state
        z, xbc, dt_raw = self._split(self.in_proj(x_t))
        window = torch.cat([conv, xbc.unsqueeze(-1)], dim=-1)  # newest last
        xbc = (window * self.conv_weight.flip(-1)).sum(-1) + self.conv_bias
        u, dt, a, b, c = self._ssm_inputs(xbc, dt_raw)
        decay = torch.exp(dt * a)[..., None, None]
        ssm = decay * ssm + (dt.unsqueeze(-1) * u).unsqueeze(-1) * b[:, None, None, :]
        y = torch.einsum("bhpn,bn->bhp", ssm, c)
        return self._finish(y, u, z), (window[..., 1:], ssm)
