"""Multi-scale retention (RetNet; Sun et al. 2023; Zoology App. H.2.3 Alg. 6, ICLL App. A.5).

Per head, ``S_t = gamma_h S_{t-1} + k_t^T v_t`` and ``z_t = q_t S_t`` (ICLL Eq. 41-42), i.e.
``z = (Q K^T ⊙ D) V`` with ``D_ij = gamma^{i-j}`` for ``j <= i`` (Eq. 34-36). Heads use the
multi-scale decays ``gamma_h = 1 - 2^{-5-h}`` of Sun et al. Sec. 2.2; each head's output is
normalised (GroupNorm over heads, no affine, as in the reference implementation) and gated by
``swish(x W_G)`` before ``W_O`` (Eq. 38). Three equal forms of retention (``ops/retention.py``):
  * ``parallel``: the decay-masked l x l matrix (Sun et al. Eq. 5; :func:`retention_parallel`);
  * ``recurrent``: one step per position (Eq. 6; the layer's ``step``, :func:`retention_step`);
  * ``chunkwise``: l x l only inside chunks of ``chunk_size``, states passed between chunks
    (Eq. 7; :func:`retention_chunk`).

Deviations: the xPos rotation of q and k (Sun et al. Eq. 3, RoPE in ICLL Eq. 33) is omitted, so
position enters only through the decay; the reference implementation's rescalings of the
decay mask and scores are omitted too, as the per-head normalisation cancels them.
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
from mixerzoo.ops.retention import retention_chunk, retention_log_decays, retention_parallel, retention_step

NORM_EPS = 1e-6


@SEQUENCE_MIXERS.register("retnet")
class RetNet(SequenceMixer):
    """Multi-scale retention with a swish output gate.

    Shapes: x (b, l, d) -> (b, l, d); q, k (b, h, l, e) with e = d/h, v (b, h, l, f) with
    f = expand_v * d / h; state (b, h, e, f). Parameters:
      * ``num_heads`` (1): heads h, head h decays with gamma_h = 1 - 2^{-5-h}.
      * ``expand_v`` (2): value / gate width as a multiple of d (Sun et al. use 2).
      * ``form`` ("chunkwise"): ``parallel``, ``recurrent`` or ``chunkwise``; all compute the same.
      * ``chunk_size`` (64): chunk length of the chunkwise form.
    """

    recurrent = True
    examples = [
        {},
        {"num_heads": 2},
        {"num_heads": 2, "form": "parallel"},
        {"num_heads": 2, "form": "recurrent"},
        {"num_heads": 2, "chunk_size": 5},
    ]

    class Params(SequenceMixer.Params):
        num_heads: int = Field(1, ge=1, description="heads (one decay rate each)")
        expand_v: int = Field(2, ge=1, description="value width / d_model")
        form: Literal["parallel", "recurrent", "chunkwise"] = Field("chunkwise", description="forward form")
        chunk_size: int = Field(64, ge=1, description="chunk length of the chunkwise form")

    def __init__(self, d_model: int, max_len: int = 2048, **params) -> None:
        super().__init__(d_model, max_len, **params)
        h = self.p.num_heads
        self.check_divides("num_heads", h)
        dv = self.p.expand_v * d_model
        self.q = nn.Linear(d_model, d_model, bias=False)
        self.k = nn.Linear(d_model, d_model, bias=False)
        self.v = nn.Linear(d_model, dv, bias=False)
        self.gate = nn.Linear(d_model, dv, bias=False)
        self.out = nn.Linear(dv, d_model, bias=False)

    def project(self, x):
        """x: (..., d) -> q, k (..., h, e), v (..., h, f); k carries the 1/sqrt(e) scale."""
        h = self.p.num_heads
        q = self.q(x).unflatten(-1, (h, -1))
        k = self.k(x).unflatten(-1, (h, -1)) / math.sqrt(self.d_model // h)
        v = self.v(x).unflatten(-1, (h, -1))
        return q, k, v

    def finish(self, z, x):
        """z: (..., h, f) retention output, x: (..., d) -> (..., d): GroupNorm per head, swish gate, W_O."""
        z = F.layer_norm(z, z.shape[-1:], eps=NORM_EPS).flatten(-2)
        return self.out(F.silu(self.gate(x)) * z)

    def forward(self, x, input_ids=None, rope=None):
        """x: (b, l, d) -> (b, l, d)."""
        if self.p.form == "recurrent":
            state = self.init_state(x.shape[0], x.device, x.dtype)
            steps = []
            for t in range(x.shape[1]):
                y_t, state = self.step(x[:, t], state)
                steps.append(y_t)
            return torch.stack(steps, dim=1)
        q, k, v = (t.transpose(1, 2) for t in self.project(x))  # (b, h, l, ·)
        log_gamma = retention_log_decays(self.p.num_heads, x.device, x.dtype)
        if self.p.form == "parallel":
            z = retention_parallel(q, k, v, log_gamma)
        else:
            z, _ = retention_chunk(q, k, v, log_gamma, self.p.chunk_size)
        return self.finish(z.transpose(1, 2), x)

    def state_size(self) -> int:
        h = self.p.num_heads
        return h * (self.d_model // h) * (self.p.expand_v * self.d_model // h)

    def init_state(self, batch, device=None, dtype=None):
        h = self.p.num_heads
        e, f = self.d_model // h, self.p.expand_v * self.d_model // h
        return torch.zeros(batch, h, e, f, device=device, dtype=dtype)

    def step(self, x_t, state):
        """x_t: (b, d) -> (y_t (b, d), S (b, h, e, f)); ICLL Eq. 41-42."""
        q, k, v = self.project(x_t)
        log_gamma = retention_log_decays(self.p.num_heads, x_t.device, x_t.dtype)
        z, state = retention_step(q, k, v, log_gamma, state)
        return self.finish(z, x_t), state
