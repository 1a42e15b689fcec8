"""Gated linear attention (GLA; Yang et al. 2023; ICLL App. A.6, Eq. 43-49).

Per head, ``S_t = diag(alpha_t) S_{t-1} + k_t^T v_t`` and ``z_t = q_t S_t``, with a data-dependent
decay ``alpha_t = sigmoid(x_t W_alpha)^{1/tau}`` from a low-rank ``W_alpha = W_1 W_2`` (+ bias)
and ``tau = 16`` (Yang et al. Sec. 4.4). Following Yang et al. the value-side gate beta of ICLL
Eq. 44 is fixed to 1. The output is normalised per head (RMSNorm), gated by ``swish(x W_r)``
and projected by ``W_o`` (Eq. 48-49).

The parallel form is the chunkwise form of Yang et al. Sec. 4.2 (``ops/gla.py``), the
recurrent ``step`` its one-position form.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from pydantic import Field
from torch import nn

from mixerzoo.mixers import SEQUENCE_MIXERS
from mixerzoo.mixers.base import SequenceMixer
from mixerzoo.ops.gla import gla_chunk, gla_step
from mixerzoo.registry import ConfigError

NORM_EPS = 1e-6


@SEQUENCE_MIXERS.register("gla")
class GatedLinearAttention(SequenceMixer):
    """Gated linear attention with data-dependent diagonal decay, O(l * c * d) time.

    Shapes: x (b, l, d) -> (b, l, d); q, k (b, h, l, e) with e = expand_k * d / h;
    v (b, h, l, f) with f = expand_v * d / h; state S (b, h, e, f). Parameters:
      * ``num_heads`` (1): heads h.
      * ``expand_k`` (0.5), ``expand_v`` (1.0): key and value widths as multiples of d (Yang et al.).
      * ``gate_rank`` (16): rank of the low-rank decay projection W_1 W_2.
      * ``gate_temperature`` (16.0): tau in ``alpha = sigmoid(.)^{1/tau}``.
      * ``chunk_size`` (16): chunk length of the parallel form (speed only).
    """

    recurrent = True
    examples = [{}, {"num_heads": 2}, {"num_heads": 2, "chunk_size": 5}]

    class Params(SequenceMixer.Params):
        num_heads: int = Field(1, ge=1, description="heads")
        expand_k: float = Field(0.5, gt=0, description="key width / d_model")
        expand_v: float = Field(1.0, gt=0, description="value width / d_model")
        gate_rank: int = Field(16, ge=1, description="rank of the decay-gate projection")
        gate_temperature: float = Field(16.0, gt=0, description="tau: alpha = sigmoid(.)^(1/tau)")
        chunk_size: int = Field(16, ge=1, description="chunk length of the parallel form")

    def __init__(self, d_model: int, max_len: int = 2048, **params) -> None:
        super().__init__(d_model, max_len, **params)
        p = self.p
        h = p.num_heads
        self.dk, self.dv = int(round(p.expand_k * d_model)), int(round(p.expand_v * d_model))
        if self.dk % h or self.dv % h or self.dk == 0 or self.dv == 0:
            raise ConfigError(
                f"mixer[gla].num_heads = {h}: must divide key width {self.dk} and value width {self.dv}"
            )
        self.q = nn.Linear(d_model, self.dk, bias=False)
        self.k = nn.Linear(d_model, self.dk, bias=False)
        self.v = nn.Linear(d_model, self.dv, bias=False)
        self.gate_down = nn.Linear(d_model, p.gate_rank, bias=False)
        self.gate_up = nn.Linear(p.gate_rank, self.dk, bias=True)
        self.r = nn.Linear(d_model, self.dv, bias=False)
        self.norm_weight = nn.Parameter(torch.ones(self.dv // h))
        self.out = nn.Linear(self.dv, d_model, bias=False)

    def project(self, x):
        """x: (..., d) -> q, k, log_alpha (..., h, e); v (..., h, f)."""
        h = self.p.num_heads
        q = self.q(x).unflatten(-1, (h, -1)) / math.sqrt(self.dk // h)
        k = self.k(x).unflatten(-1, (h, -1))
        v = self.v(x).unflatten(-1, (h, -1))
        log_alpha = F.logsigmoid(self.gate_up(self.gate_down(x))) / self.p.gate_temperature
        return q, k, v, log_alpha.unflatten(-1, (h, -1))

    def finish(self, z, x):
        """z: (..., h, f) -> (..., d): per-head RMSNorm, swish(r) gate, W_o (Eq. 48-49)."""
        z = z * torch.rsqrt(z.pow(2).mean(-1, keepdim=True) + NORM_EPS) * self.norm_weight
        return self.out(F.silu(self.r(x)) * z.flatten(-2))

    def forward(self, x, input_ids=None, rope=None):
        """x: (b, l, d) -> (b, l, d)."""
        q, k, v, log_alpha = (t.transpose(1, 2) for t in self.project(x))
        z, _ = gla_chunk(q, k, v, log_alpha, self.p.chunk_size)
        return self.finish(z.transpose(1, 2), x)

    def state_size(self) -> int:
        return self.dk * self.dv // self.p.num_heads

    def init_state(self, batch, device=None, dtype=None):
        h = self.p.num_heads
        return torch.zeros(batch, h, self.dk // h, self.dv // h, device=device, dtype=dtype)

    def step(self, x_t, state):
        """x_t: (b, d) -> (y_t (b, d), S (b, h, e, f)); Eq. 46-47."""
        q, k, v, log_alpha = self.project(x_t)
        z, state = gla_step(q, k, v, log_alpha, state)
        return self.finish(z, x_t), state
