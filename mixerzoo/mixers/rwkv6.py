"""RWKV-6 "Finch" time mixing (Peng et al. 2024, "Eagle and Finch", Finch time mixing; MAD's ``rwkv6``).

Data-dependent token shift (ddlerp): with ``xx_t = x_{t-1} - x_t``,
``lora_s(y) = mu_s + tanh(y A) B_s`` and ``x^s_t = x_t + xx_t ⊙ lora_s(x_t + xx_t ⊙ mu_x)`` for
``s in {w, k, v, r, g}``; ``r, k, v = W_r x^r, W_k x^k, W_v x^v``, ``g = silu(W_g x^g)``; the
data-dependent per-channel decay ``w_t = exp(-exp(d + tanh(x^w A_w) B_w))``. Per head (size e),
with the bonus ``u``::

    S_t = diag(w_t) S_{t-1} + k_t^T v_t,      o_t = r_t (S_{t-1} + diag(u) k_t^T v_t)

then a GroupNorm over heads, the ``g`` gate and ``W_o``. Initialisation as the reference
(BlinkDL's RWKV-v6 ``RWKV_Tmix_x060``, as MAD-lab uses it) for the first of a stack of layers:
the mu's fall from 1 to 0 across channels, decays ``d_n = -6 + 5 (n / (d - 1))^0.7``, the LoRA
matrices uniform in +-1e-4, ``u`` a +-0.1 zigzag; projections take the backbone's initialisation.

The WKV runs through ``ops/wkv.py``: ``chunked`` (GLA-like chunkwise form, linear in l) or
``sequential`` (the recurrence); ``step`` is the recurrent form for decoding.
"""

from __future__ import annotations

from typing import Literal

import torch
import torch.nn.functional as F
from pydantic import Field
from torch import nn

from mixerzoo.mixers import SEQUENCE_MIXERS
from mixerzoo.mixers.base import SequenceMixer
from mixerzoo.ops.wkv import token_shift, wkv6_chunk, wkv6_recurrent

LORA_INIT = 1e-4  # MAD-lab's uniform(-1e-4, 1e-4) for the token-shift and decay LoRA matrices
HEAD_SIZE_DIVISOR = 8  # the reference's GroupNorm eps = 1e-5 * divisor^2


@SEQUENCE_MIXERS.register("rwkv6")
class RWKV6(SequenceMixer):
    """RWKV-6 time mixing: ddlerp token shift, data-dependent decay, bonus u, multi-head WKV.

    Shapes: x (b, l, d) -> (b, l, d); h heads of size e = d / h; state (x_{t-1} (b, d),
    S (b, h, e, e)). Parameters:
      * ``num_heads`` (4): heads h (MAD's head size 16 at d = 64).
      * ``mix_rank`` (32): rank of the token-shift LoRA (reference TIME_MIX_EXTRA_DIM).
      * ``decay_rank`` (64): rank of the decay LoRA (reference TIME_DECAY_EXTRA_DIM).
      * ``scan`` ("chunked"): ``chunked`` or ``sequential`` (reference recurrence).
      * ``chunk_size`` (16): chunk length of the chunked form (speed only).
    """

    recurrent = True
    examples = [{}, {"scan": "sequential"}, {"num_heads": 2, "chunk_size": 5, "mix_rank": 4, "decay_rank": 8}]

    class Params(SequenceMixer.Params):
        num_heads: int = Field(4, ge=1, description="heads; must divide d_model")
        mix_rank: int = Field(32, ge=1, description="rank of the data-dependent token-shift LoRA")
        decay_rank: int = Field(64, ge=1, description="rank of the data-dependent decay LoRA")
        scan: Literal["chunked", "sequential"] = Field("chunked", description="WKV implementation")
        chunk_size: int = Field(16, ge=1, description="chunk length of the chunked form")

    def __init__(self, d_model: int, max_len: int = 2048, **params) -> None:
        super().__init__(d_model, max_len, **params)
        p = self.p
        d, h = d_model, p.num_heads
        self.head_size = self.check_divides("num_heads", h)
        frac = torch.arange(d, dtype=torch.float32) / d  # the reference's ddd
        # first-layer init (ratio_0_to_1 = 0, ratio_1_to_almost0 = 1)
        self.mu_x, self.mu_w, self.mu_k, self.mu_v = (nn.Parameter(1.0 - frac) for _ in range(4))
        self.mu_r, self.mu_g = (nn.Parameter(1.0 - frac.sqrt()) for _ in range(2))
        self.mix_a = nn.Parameter(torch.empty(d, 5 * p.mix_rank).uniform_(-LORA_INIT, LORA_INIT))
        self.mix_b = nn.Parameter(torch.empty(5, p.mix_rank, d).uniform_(-LORA_INIT, LORA_INIT))
        channel = torch.arange(d, dtype=torch.float32) / max(d - 1, 1)
        self.decay = nn.Parameter(-6.0 + 5.0 * channel**0.7)
        self.decay_a = nn.Parameter(torch.empty(d, p.decay_rank).uniform_(-LORA_INIT, LORA_INIT))
        self.decay_b = nn.Parameter(torch.empty(p.decay_rank, d).uniform_(-LORA_INIT, LORA_INIT))
        zigzag = ((torch.arange(d) + 1) % 3 - 1).float() * 0.1
        self.bonus = nn.Parameter(zigzag.reshape(h, self.head_size))  # u (the reference's time_faaaa)
        self.receptance = nn.Linear(d, d, bias=False)
        self.key = nn.Linear(d, d, bias=False)
        self.value = nn.Linear(d, d, bias=False)
        self.gate = nn.Linear(d, d, bias=False)
        self.output = nn.Linear(d, d, bias=False)
        self.norm = nn.GroupNorm(h, d, eps=1e-5 * HEAD_SIZE_DIVISOR**2)

    def project(self, x, x_prev):
        """x, x_prev (..., d) -> r, k, v, log_w (..., h, e) and the gate g (..., d)."""
        xx = x_prev - x
        # Finch ddlerp: lora_s(x + xx ⊙ mu_x) for s = w, k, v, r, g from one shared tanh layer
        hidden = torch.tanh((x + xx * self.mu_x) @ self.mix_a).unflatten(-1, (5, self.p.mix_rank))
        m_w, m_k, m_v, m_r, m_g = torch.einsum("...sr,srd->...sd", hidden, self.mix_b).unbind(-2)
        xw, xk, xv = x + xx * (self.mu_w + m_w), x + xx * (self.mu_k + m_k), x + xx * (self.mu_v + m_v)
        xr, xg = x + xx * (self.mu_r + m_r), x + xx * (self.mu_g + m_g)
        # Finch decay: w_t = exp(-exp(d + tanh(x^w A) B)), so log w_t = -exp(...)
        log_w = -torch.exp(self.decay + torch.tanh(xw @ self.decay_a) @ self.decay_b)
        heads = (self.p.num_heads, self.head_size)
        r, k, v = (t.unflatten(-1, heads) for t in (self.receptance(xr), self.key(xk), self.value(xv)))
        return r, k, v, log_w.unflatten(-1, heads), F.silu(self.gate(xg))

    def finish(self, o, g):
        """o: (n, h, e) rows, g (n, d) -> (n, d): GroupNorm over heads, gate, W_o."""
        return self.output(self.norm(o.flatten(-2)) * g)

    def forward(self, x, input_ids=None, rope=None):
        """x: (b, l, d) -> (b, l, d)."""
        r, k, v, log_w, g = self.project(x, token_shift(x))
        wkv = wkv6_chunk if self.p.scan == "chunked" else wkv6_recurrent
        extra = (self.p.chunk_size,) if self.p.scan == "chunked" else ()
        o, _ = wkv(*(t.transpose(1, 2) for t in (r, k, v, log_w)), self.bonus, *extra)
        return self.finish(o.transpose(1, 2).flatten(0, 1), g.flatten(0, 1)).unflatten(0, x.shape[:2])

    def state_size(self) -> int:
        return self.p.num_heads * self.head_size * self.head_size + self.d_model

    def init_state(self, batch, device=None, dtype=None):
        x_prev = torch.zeros(batch, self.d_model, device=device, dtype=dtype)
        h, e = self.p.num_heads, self.head_size
        return x_prev, torch.zeros(batch, h, e, e, device=device, dtype=dtype)

    def step(self, x_t, state):
        """x_t: (b, d) -> (y_t (b, d), (x_t, S (b, h, e, e)))."""
        x_prev, s = state
        r, k, v, log_w, g = self.project(x_t, x_prev)
        kv = k.unsqueeze(-1) * v.unsqueeze(-2)
        o = torch.einsum("bhe,bhef->bhf", r, s + self.bonus.unsqueeze(-1) * kv)
        s = torch.exp(log_w).unsqueeze(-1) * s + kv
        return self.finish(o, g), (x_t, s)
