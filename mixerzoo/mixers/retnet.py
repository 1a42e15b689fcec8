"""Multi-scale retention (RetNet; Sun et al. 2023; paper 002 App. H.2.3 Alg. 6, paper 004 App. A.5).

Per head, ``S_t = gamma_h S_{t-1} + k_t^T v_t`` and ``z_t = q_t S_t`` (004 Eq. 41-42), i.e.
``z = (Q K^T ⊙ D) V`` with ``D_ij = gamma^{i-j}`` for ``j <= i`` (Eq. 34-36). Heads use the
multi-scale decays ``gamma_h = 1 - 2^{-5-h}`` of Sun et al. Sec. 2.2; each head's output is
normalised (GroupNorm over heads, no affine, as in the reference implementation) and gated by
``swish(x W_G)`` before ``W_O`` (Eq. 38). Three equal forms:
  * ``parallel``: the decay-masked l x l matrix (Sun et al. Eq. 5);
  * ``recurrent``: one step per position (Eq. 6);
  * ``chunkwise``: l x l only inside chunks of ``chunk_size``, states passed between chunks (Eq. 7).

Deviations: the xPos rotation of q and k (Sun et al. Eq. 3, RoPE in 004 Eq. 33) is omitted, so
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
from mixerzoo.ops.heads import split_chunks
from mixerzoo.ops.recompute import scan_in_segments, segment_length

NORM_EPS = 1e-6


def retention_log_decays(num_heads: int, device=None, dtype=None) -> torch.Tensor:
    """log gamma_h with gamma_h = 1 - 2^{-5-h} (Sun et al. Sec. 2.2), shape (h,)."""
    h = torch.arange(num_heads, device=device, dtype=torch.float64)
    return torch.log1p(-torch.exp2(-5.0 - h)).to(dtype)


def parallel_retention(q, k, v, log_gamma):
    """q, k: (b, h, l, e), v: (b, h, l, f), log_gamma (h,) -> (b, h, l, f); materialises l x l."""
    l = q.shape[2]
    pos = torch.arange(l, device=q.device)
    dist = (pos[:, None] - pos[None, :]).to(q.dtype)  # i - j
    causal = dist >= 0
    decay = torch.exp(log_gamma[:, None, None] * dist.clamp(min=0)) * causal  # (h, l, l)
    return torch.einsum("bhie,bhje,hij,bhjf->bhif", q, k, decay, v)


def chunkwise_retention(q, k, v, log_gamma, chunk_size):
    """Same as :func:`parallel_retention` in O(l * (c + e) * f) time (Sun et al. Eq. 7).

    Runs in segments of whole chunks that are recomputed in the backward pass
    (``ops/recompute.py``): a training step stores O(l * (e + f)) per head, not the per-chunk
    (e, f) states and c x c scores.
    """
    b, h, l, e = q.shape
    f = v.shape[-1]
    c = max(1, min(chunk_size, l))
    segment = segment_length(c, b * h * (2 * c + 3 * e * f // c + 2 * e + 2 * f))
    z, _ = scan_in_segments(_retention_segment, (q, k, v), (log_gamma, c), None, segment, dim=2)
    return z


def _retention_segment(q, k, v, log_gamma, c, initial):
    """One segment from the state entering it, (b, h, e, f) or None (zero) -> (z, state after it).

    The state after the segment is exact when its length is a multiple of c (padded steps decay).
    """
    l = q.shape[2]
    qc, kc, vc = (split_chunks(t, c) for t in (q, k, v))  # (b, h, n, c, ·)
    g = log_gamma[:, None]
    pos = torch.arange(c, device=q.device).to(q.dtype)
    dist = pos[:, None] - pos[None, :]
    inner_decay = torch.exp(g[..., None] * dist.clamp(min=0)) * (dist >= 0)  # (h, c, c)
    scores = torch.einsum("bhnie,bhnje->bhnij", qc, kc) * inner_decay[:, None]
    inner = scores @ vc
    # Each chunk's own contribution to the state at its last step: sum_j gamma^{c-1-j} k_j^T v_j.
    to_end = torch.exp(g * (c - 1 - pos))  # (h, c)
    chunk_states = torch.einsum("bhnje,bhnjf->bhnef", kc * to_end[:, None, :, None], vc)
    # Sun et al. Eq. 7: R_i = gamma^c R_{i-1} + K_i^T (V_i ⊙ zeta), one step per chunk. The decay is a
    # scalar per head, so a plain loop over the few chunks of a segment is all the scan needs.
    chunk_decay = torch.exp(c * log_gamma)[:, None, None]  # (h, 1, 1)
    state = torch.zeros_like(chunk_states[:, :, 0]) if initial is None else initial
    entering = []
    for chunk_state in chunk_states.unbind(2):  # unbind: one stacked gradient, not one per index
        entering.append(state)
        state = chunk_decay * state + chunk_state
    entering = torch.stack(entering, dim=2)  # (b, h, n, e, f): the state before each chunk
    from_start = torch.exp(g * (pos + 1))  # gamma^{i+1}: decay from the previous chunk's end to step i
    cross = (qc * from_start[:, None, :, None]) @ entering
    return (inner + cross).flatten(2, 3)[:, :, :l], state


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
            z = parallel_retention(q, k, v, log_gamma)
        else:
            z = chunkwise_retention(q, k, v, log_gamma, self.p.chunk_size)
        return self.finish(z.transpose(1, 2), x)

    def state_size(self) -> int:
        h = self.p.num_heads
        return h * (self.d_model // h) * (self.p.expand_v * self.d_model // h)

    def init_state(self, batch, device=None, dtype=None):
        h = self.p.num_heads
        e, f = self.d_model // h, self.p.expand_v * self.d_model // h
        return torch.zeros(batch, h, e, f, device=device, dtype=dtype)

    def step(self, x_t, state):
        """x_t: (b, d) -> (y_t (b, d), S (b, h, e, f)); 004 Eq. 41-42."""
        q, k, v = self.project(x_t)
        gamma = torch.exp(retention_log_decays(self.p.num_heads, x_t.device, x_t.dtype))
        state = gamma[:, None, None] * state + k.unsqueeze(-1) * v.unsqueeze(-2)
        z = torch.einsum("bhe,bhef->bhf", q, state)
        return self.finish(z, x_t), state
