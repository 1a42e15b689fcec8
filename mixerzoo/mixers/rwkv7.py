"""RWKV-7 "Goose" time mixing (Peng et al. 2025, "RWKV-7 Goose with Expressive Dynamic State Evolution").

Token shift with static mixes ``x^s_t = x_t + (x_{t-1} - x_t) ⊙ mu_s`` for s in {r, w, k, v, a, g};
``r, k, v = W_r x^r, W_k x^k, W_v x^v``; the decay ``w_t = exp(-e^{-1/2} sigmoid(w_0 + tanh(x^w W_1)
W_2))`` in (0.545, 1); the in-context learning rate ``a_t = sigmoid(a_0 + x^a A_1 A_2)``; the gate
``g_t = sigmoid(x^g G_1) G_2``; the removal key ``kappa_hat = normalize(k ⊙ xi)`` per head and the
replacement key ``k~ = k ⊙ (1 + (a - 1) ⊙ alpha)``. Per head, the generalized delta rule::

    S_t = S_{t-1} (diag(w_t) - kappa_hat_t^T (a_t ⊙ kappa_hat_t)) + v_t^T k~_t,     o_t = S_t r_t^T

i.e. ``a = -kappa_hat`` and ``b = kappa_hat ⊙ a`` in ``S_{t-1}(diag(w) + a^T b)`` of ``ops/wkv.py``;
then a GroupNorm over heads, the bonus ``(r_t ⊙ k~_t · rho) v_t`` per head, the gate and ``W_o``.

Deviations: the value residual (``v`` lerped toward the first layer's ``v``) is omitted, as
each mixer here is built alone, so every layer is RWKV-7's first layer, which has none. The
initialisation is the reference's (BlinkDL's ``RWKV_Tmix_x070``) for that first layer; the
projections take the backbone's initialisation, as every mixer here.

The WKV runs through ``ops/wkv.py``: ``chunked`` (WY-like chunked form, linear in l) or
``sequential`` (the recurrence); ``step`` is the recurrent form for decoding.
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
from mixerzoo.ops.wkv import token_shift, wkv7_chunk, wkv7_recurrent

NORM_EPS_PER_CHANNEL = 1e-5  # GroupNorm eps = head size * 1e-5 (64e-5 at the reference's head size 64)
LORA_OUT_SCALE = 0.1  # the reference's ortho_init(..., 0.1) of the second LoRA matrices


def reference_rank(d: int, factor: float) -> int:
    """The reference's LoRA ranks: max(32, round(factor * sqrt(d) / 32) * 32)."""
    return max(32, int(round(factor * math.sqrt(d) / 32)) * 32)


def _ortho(rows: int, cols: int, scale: float) -> torch.Tensor:
    w = torch.empty(rows, cols)
    gain = math.sqrt(rows / cols) if rows > cols else 1.0
    return nn.init.orthogonal_(w, gain=gain * scale)


@SEQUENCE_MIXERS.register("rwkv7")
class RWKV7(SequenceMixer):
    """RWKV-7 time mixing: generalized delta rule with vector decay and in-context learning rate.

    Shapes: x (b, l, d) -> (b, l, d); h heads of size e = d / h; state (x_{t-1} (b, d),
    S (b, h, e, e)). Parameters:
      * ``num_heads`` (4): heads h.
      * ``decay_rank``, ``iclr_rank``, ``gate_rank`` (None): LoRA ranks of w, a and g; None is the
        reference's max(32, round(c sqrt(d) / 32) * 32) with c = 2.5, 2.5, 5.
      * ``scan`` ("chunked"): ``chunked`` or ``sequential`` (reference recurrence).
      * ``chunk_size`` (16): chunk length of the chunked form (the reference kernel's 16).
    """

    recurrent = True
    examples = [
        {},
        {"scan": "sequential"},
        {"num_heads": 2, "chunk_size": 5, "decay_rank": 4, "gate_rank": 8},
    ]

    class Params(SequenceMixer.Params):
        num_heads: int = Field(4, ge=1, description="heads; must divide d_model")
        decay_rank: int | None = Field(
            None, ge=1, description="rank of the decay LoRA (None: reference formula)"
        )
        iclr_rank: int | None = Field(
            None, ge=1, description="rank of the in-context learning-rate LoRA (None: reference)"
        )
        gate_rank: int | None = Field(
            None, ge=1, description="rank of the output-gate LoRA (None: reference formula)"
        )
        scan: Literal["chunked", "sequential"] = Field("chunked", description="WKV implementation")
        chunk_size: int = Field(16, ge=1, description="chunk length of the chunked form")

    def __init__(self, d_model: int, max_len: int = 2048, **params) -> None:
        super().__init__(d_model, max_len, **params)
        p = self.p
        d, h = d_model, p.num_heads
        e = self.head_size = self.check_divides("num_heads", h)
        rank_w = p.decay_rank or reference_rank(d, 2.5)
        rank_a = p.iclr_rank or reference_rank(d, 2.5)
        rank_g = p.gate_rank or reference_rank(d, 5.0)
        n = torch.arange(d, dtype=torch.float32)
        frac = n / d  # the reference's ddd
        linear = n / max(d - 1, 1) - 0.5
        zigzag = ((n % e) - (e - 1) / 2) / max((e - 1) / 2, 1)
        zigzag = zigzag * zigzag.abs()
        # first-layer init (ratio_0_to_1 = 0, ratio_1_to_almost0 = 1)
        self.mu_r, self.mu_g = (nn.Parameter(1.0 - frac**0.2) for _ in range(2))
        self.mu_w, self.mu_a = (nn.Parameter(1.0 - frac**0.9) for _ in range(2))
        self.mu_k, self.mu_v = (nn.Parameter(1.0 - frac**0.7) for _ in range(2))
        self.w0 = nn.Parameter(-6.0 + 6.0 * n / max(d - 1, 1) + 0.5 + 2.5 * zigzag)
        self.w1 = nn.Parameter(torch.zeros(d, rank_w))
        self.w2 = nn.Parameter(_ortho(rank_w, d, LORA_OUT_SCALE))
        self.a0 = nn.Parameter(-0.19 + 0.3 * zigzag + 0.4 * linear)
        self.a1 = nn.Parameter(torch.zeros(d, rank_a))
        self.a2 = nn.Parameter(_ortho(rank_a, d, LORA_OUT_SCALE))
        self.g1 = nn.Parameter(torch.zeros(d, rank_g))
        self.g2 = nn.Parameter(_ortho(rank_g, d, LORA_OUT_SCALE))
        self.k_k = nn.Parameter(0.71 - 0.1 * linear)  # xi: scales k into the removal key
        self.k_a = nn.Parameter(torch.full((d,), 1.02))  # alpha: how much a shrinks the written key
        self.r_k = nn.Parameter(torch.full((h, e), -0.04))  # rho: the bonus weights
        self.receptance = nn.Linear(d, d, bias=False)
        self.key = nn.Linear(d, d, bias=False)
        self.value = nn.Linear(d, d, bias=False)
        self.output = nn.Linear(d, d, bias=False)
        self.norm = nn.GroupNorm(h, d, eps=e * NORM_EPS_PER_CHANNEL)

    def project(self, x, x_prev):
        """x, x_prev (..., d) -> r, k~, v, log w, a, b (..., h, e) and the gate g (..., d)."""
        xx = x_prev - x
        xr, xw, xk = x + xx * self.mu_r, x + xx * self.mu_w, x + xx * self.mu_k
        xv, xa, xg = x + xx * self.mu_v, x + xx * self.mu_a, x + xx * self.mu_g
        r, k, v = self.receptance(xr), self.key(xk), self.value(xv)
        # w = exp(-e^{-1/2} sigmoid(.)): the reference's soft clamp of log(-log w) to (-inf, -1/2)
        log_w = -math.exp(-0.5) * torch.sigmoid(self.w0 + torch.tanh(xw @ self.w1) @ self.w2)
        iclr = torch.sigmoid(self.a0 + (xa @ self.a1) @ self.a2)  # in-context learning rate a_t
        g = torch.sigmoid(xg @ self.g1) @ self.g2
        heads = (self.p.num_heads, self.head_size)
        kappa = F.normalize((k * self.k_k).unflatten(-1, heads), dim=-1)  # removal key kappa_hat
        k = k * (1 + (iclr - 1) * self.k_a)  # replacement key k~
        r, k, v, log_w, iclr = (t.unflatten(-1, heads) for t in (r, k, v, log_w, iclr))
        return r, k, v, log_w, -kappa, kappa * iclr, g

    def finish(self, o, r, k, v, g):
        """o, r, k, v: (n, h, e) rows, g (n, d) -> (n, d): GroupNorm, bonus, gate, W_o."""
        bonus = (r * k * self.r_k).sum(-1, keepdim=True) * v
        return self.output((self.norm(o.flatten(-2)) + bonus.flatten(-2)) * g)

    def forward(self, x, input_ids=None, rope=None):
        """x: (b, l, d) -> (b, l, d)."""
        r, k, v, log_w, a, b, g = self.project(x, token_shift(x))
        wkv = wkv7_chunk if self.p.scan == "chunked" else wkv7_recurrent
        extra = (self.p.chunk_size,) if self.p.scan == "chunked" else ()
        o, _ = wkv(*(t.transpose(1, 2) for t in (r, k, v, log_w, a, b)), *extra)
        rows = (t.flatten(0, 1) for t in (o.transpose(1, 2), r, k, v, g))
        return self.finish(*rows).unflatten(0, x.shape[:2])

    def state_size(self) -> int:
        return self.p.num_heads * self.head_size * self.head_size + self.d_model

    def init_state(self, batch, device=None, dtype=None):
        x_prev = torch.zeros(batch, self.d_model, device=device, dtype=dtype)
        h, e = self.p.num_heads, self.head_size
        return x_prev, torch.zeros(batch, h, e, e, device=device, dtype=dtype)

    def step(self, x_t, state):
        """x_t: (b, d) -> (y_t (b, d), (x_t, S (b, h, e, e) value x key))."""
        x_prev, s = state
        r, k, v, log_w, a, b, g = self.project(x_t, x_prev)
        sa = torch.einsum("bhfe,bhe->bhf", s, a)
        s = (
            s * torch.exp(log_w).unsqueeze(-2)
            + sa.unsqueeze(-1) * b.unsqueeze(-2)
            + v.unsqueeze(-1) * k.unsqueeze(-2)
        )
        o = torch.einsum("bhfe,bhe->bhf", s, r)
        return self.finish(o, r, k, v, g), (x_t, s)
