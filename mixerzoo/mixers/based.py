"""Based (Arora et al. 2024): short convolution, Taylor linear attention and sliding-window attention.

Used as a baseline in CAT (Sec. 6.1, Fig. 5) and CAT-ws (Sec. 4, Fig. 3), which take it from
Zoology's synthetic setup (the ``zoology`` code of Zoology: a gated short-conv layer, BaseConv
with kernel 3, beside Taylor linear attention with feature dim 8-24 and one head). Based
combines three pieces; here they are one mixer, in this order:

  1. A short causal depthwise convolution (``conv_width`` taps, 3 as Zoology's kernel_size)
     on the input, ``u_t = sum_i c_i * x_{t-i}``: the local shift that lets a key see the
     token before it (what solves associative recall in a single attention step, CAT Thm. 1).
  2. Linear attention (Katharopoulos et al. 2020) on ``u`` with the 2nd-order Taylor feature
     map of ``exp(q.k / sqrt(f))`` on a small feature width f (8, queries and keys projected
     to f per head): ``phi(x) = [1, x / f^(1/4), vec(x x^T) / sqrt(2 f)]`` (1 + f + f^2
     features), so ``phi(q).phi(k) = 1 + q.k/sqrt(f) + (q.k)^2 / (2f) > 0``. Causal,
     normalised ``y_t = phi(q_t)^T S_t / phi(q_t)^T z_t``, by the chunked kernel in O(l f^2 e).
  3. Sliding-window softmax attention on ``u`` over the last w tokens (itself included),
     O(l w e). The default w = 16 is small against the MQAR lengths (64-512), as Based's 64 is
     against its 2,048-token context: recall beyond the window must go through the linear
     branch (a window covering all of L = 64 would make Based full softmax attention there).
     ``window: 0`` drops the branch (Zoology's synthetic Based layer has none).

The two attention outputs are summed before the output projection.

Recurrent form (``step``): the conv keeps its last ``conv_width - 1`` inputs; the linear branch
keeps ``S = sum phi(k) v^T`` (h, 1+f+f^2, e) and ``z = sum phi(k)``; the window branch keeps a
cache of the last w keys and values. ``step`` is the form without rotary positions (rope
rotates the window branch in ``forward`` when the model passes one).
"""

from __future__ import annotations

import math
from typing import Any

import torch
from pydantic import Field
from torch import nn

from mixerzoo.mixers import SEQUENCE_MIXERS
from mixerzoo.mixers.base import SequenceMixer
from mixerzoo.ops.attention import causal_attention
from mixerzoo.ops.conv import causal_depthwise_conv
from mixerzoo.ops.heads import merge_heads, split_heads
from mixerzoo.ops.linear_attention import linear_attention_chunk

EPS = 1e-6  # denominator guard of the normalised linear attention (as ops.linear_attention)


def taylor_feature_map(x: torch.Tensor) -> torch.Tensor:
    """(..., f) -> (..., 1 + f + f^2): 2nd-order Taylor features of exp(q.k / sqrt(f))."""
    f = x.shape[-1]
    outer = (x.unsqueeze(-1) * x.unsqueeze(-2)).flatten(-2) / math.sqrt(2 * f)
    return torch.cat((torch.ones_like(x[..., :1]), x / f**0.25, outer), dim=-1)


@SEQUENCE_MIXERS.register("based")
class Based(SequenceMixer):
    """Short conv, then Taylor linear attention + sliding-window attention, summed (Arora et al. 2024).

    Shapes: x (b, l, d) -> (b, l, d); conv output u (b, l, d); linear-branch q, k (b, h, l, f),
    features (b, h, l, 1+f+f^2), values (b, h, l, e). Parameters:
      * ``num_heads`` (1): heads of both attention branches.
      * ``feature_dim`` (8): projected query/key width f per head of the linear branch.
      * ``window`` (16): window w of the softmax branch; 0 drops the branch.
      * ``conv_width`` (3): taps of the short causal depthwise conv (1: a per-channel scale).
      * ``bias`` (False): biases on the projections (Based uses none).
    """

    recurrent = True

    examples = [
        {},
        {"num_heads": 2, "feature_dim": 4, "window": 5, "conv_width": 2},
        {"feature_dim": 8, "window": 1},
        {"feature_dim": 4, "window": 0, "conv_width": 1},
    ]

    class Params(SequenceMixer.Params):
        num_heads: int = Field(1, ge=1, description="heads of both attention branches")
        feature_dim: int = Field(8, ge=1, description="Taylor feature map input width f")
        window: int = Field(16, ge=0, description="sliding-window width w (0: no window branch)")
        conv_width: int = Field(3, ge=1, description="taps of the short causal depthwise conv")
        bias: bool = Field(False, description="bias on projections")

    def __init__(self, d_model: int, max_len: int = 2048, **params) -> None:
        super().__init__(d_model, max_len, **params)
        h, f = self.p.num_heads, self.p.feature_dim
        self.check_divides("num_heads", h)
        bound = 1.0 / math.sqrt(self.p.conv_width)  # nn.Conv1d's default initialisation
        self.conv_weight = nn.Parameter(torch.empty(d_model, self.p.conv_width).uniform_(-bound, bound))
        self.qk_lin = nn.Linear(d_model, 2 * h * f, bias=self.p.bias)
        self.v_lin = nn.Linear(d_model, d_model, bias=self.p.bias)
        self.qkv_win = nn.Linear(d_model, 3 * d_model, bias=self.p.bias) if self.p.window else None
        self.out = nn.Linear(d_model, d_model, bias=self.p.bias)

    def short_conv(self, x: torch.Tensor) -> torch.Tensor:
        """x (b, l, d) -> u (b, l, d), ``u_t = sum_i conv_weight[:, i] * x_{t-i}`` (lag-indexed taps)."""
        return causal_depthwise_conv(x, self.conv_weight)

    def _linear_inputs(self, u: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """u (..., d) -> phi(q), phi(k) (..., h, F) and v (..., h, e), heads before the last axis."""
        h = self.p.num_heads
        q, k = (t.unflatten(-1, (h, -1)) for t in self.qk_lin(u).chunk(2, dim=-1))
        v = self.v_lin(u).unflatten(-1, (h, -1))
        return taylor_feature_map(q), taylor_feature_map(k), v

    def forward(self, x, input_ids=None, rope=None):
        """x: (b, l, d) -> (b, l, d)."""
        h = self.p.num_heads
        u = self.short_conv(x)
        fq, fk, v = (t.transpose(1, 2) for t in self._linear_inputs(u))  # (b, h, l, .)
        y, _ = linear_attention_chunk(fq, fk, v, eps=EPS)
        if self.qkv_win is not None:
            qw, kw, vw = (split_heads(t, h) for t in self.qkv_win(u).chunk(3, dim=-1))
            if rope is not None:
                qw, kw = rope(qw, kw)
            y = y + causal_attention(qw, kw, vw, "sliding", self.p.window)
        return self.out(merge_heads(y))

    def state_size(self) -> int:
        h, f, w = self.p.num_heads, self.p.feature_dim, self.p.window
        n_feat = 1 + f + f * f
        conv = (self.p.conv_width - 1) * self.d_model
        return h * n_feat * (self.d_model // h) + h * n_feat + 2 * w * self.d_model + conv

    def init_state(self, batch: int, device=None, dtype=None) -> dict[str, Any]:
        h, f = self.p.num_heads, self.p.feature_dim
        e, n_feat = self.d_model // h, 1 + f + f * f
        dtype = dtype or torch.get_default_dtype()
        return {
            "conv": torch.zeros(batch, self.d_model, self.p.conv_width - 1, device=device, dtype=dtype),
            "S": torch.zeros(batch, h, n_feat, e, device=device, dtype=dtype),
            "z": torch.zeros(batch, h, n_feat, device=device, dtype=dtype),
            "k": torch.zeros(batch, h, 0, e, device=device, dtype=dtype),
            "v": torch.zeros(batch, h, 0, e, device=device, dtype=dtype),
        }

    def step(self, x_t: torch.Tensor, state: dict[str, Any]) -> tuple[torch.Tensor, dict[str, Any]]:
        """x_t: (b, d) -> (y_t (b, d), new state); the conv state holds the last inputs, oldest first."""
        h = self.p.num_heads
        taps = torch.cat((state["conv"], x_t.unsqueeze(-1)), dim=-1)  # (b, d, conv_width), newest last
        u_t = (taps * self.conv_weight.flip(-1)).sum(-1)
        fq, fk, v = self._linear_inputs(u_t)  # (b, h, F), (b, h, F), (b, h, e)
        S = state["S"] + fk.unsqueeze(-1) * v.unsqueeze(-2)
        z = state["z"] + fk
        denom = torch.einsum("bhf,bhf->bh", fq, z) + EPS
        y = torch.einsum("bhf,bhfe->bhe", fq, S) / denom.unsqueeze(-1)
        keys, vals = state["k"], state["v"]
        if self.qkv_win is not None:
            qw, kw, vw = (t.unflatten(-1, (h, -1)) for t in self.qkv_win(u_t).chunk(3, dim=-1))  # (b, h, e)
            keys = torch.cat((keys, kw.unsqueeze(2)), dim=2)[:, :, -self.p.window :]
            vals = torch.cat((vals, vw.unsqueeze(2)), dim=2)[:, :, -self.p.window :]
            a = torch.softmax(torch.einsum("bhe,bhje->bhj", qw, keys) / math.sqrt(qw.shape[-1]), dim=-1)
            y = y + torch.einsum("bhj,bhje->bhe", a, vals)
        new = {"conv": taps[..., 1:], "S": S, "z": z, "k": keys, "v": vals}
        return self.out(y.flatten(1)), new
