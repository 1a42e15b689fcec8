"""Based (Arora et al. 2024): Taylor-feature linear attention plus sliding-window softmax attention.

Used as a baseline in paper 000 (Sec. 6.1, Fig. 5). Two branches on the same input, summed
before the output projection:

  * Linear attention (Katharopoulos et al. 2020) with the 2nd-order Taylor feature map of
    ``exp(q.k / sqrt(f))`` on a small feature width f (queries and keys are projected to f per
    head): ``phi(x) = [1, x / f^(1/4), vec(x x^T) / sqrt(2 f)]`` (1 + f + f^2 features), so
    ``phi(q).phi(k) = 1 + q.k/sqrt(f) + (q.k)^2 / (2f) > 0``. Causal, normalised
    ``y_t = phi(q_t)^T S_t / phi(q_t)^T z_t``, computed by the chunked kernel in O(l f^2 e).
  * Sliding-window softmax attention over the last w tokens (itself included), O(l w e).

Recurrent form (``step``): the linear branch keeps ``S = sum phi(k) v^T`` (h, 1+f+f^2, e) and
``z = sum phi(k)``; the window branch keeps a cache of the last w keys and values. ``step`` is the
form without rotary positions (rope rotates the window branch in ``forward`` when the model
passes one).
"""

from __future__ import annotations

import math
from typing import Any

import torch
from pydantic import Field
from torch import nn

from mixerzoo.mixers import SEQUENCE_MIXERS
from mixerzoo.mixers.attention import causal_attention, merge_heads, split_heads
from mixerzoo.mixers.base import SequenceMixer
from mixerzoo.ops.linear_attention import causal_linear_attention

EPS = 1e-6  # denominator guard of the normalised linear attention (as ops.linear_attention)


def taylor_feature_map(x: torch.Tensor) -> torch.Tensor:
    """(..., f) -> (..., 1 + f + f^2): 2nd-order Taylor features of exp(q.k / sqrt(f))."""
    f = x.shape[-1]
    outer = (x.unsqueeze(-1) * x.unsqueeze(-2)).flatten(-2) / math.sqrt(2 * f)
    return torch.cat((torch.ones_like(x[..., :1]), x / f**0.25, outer), dim=-1)


@SEQUENCE_MIXERS.register("based")
class Based(SequenceMixer):
    """Taylor linear attention + sliding-window attention, outputs summed (Arora et al. 2024).

    Shapes: x (b, l, d) -> (b, l, d); linear-branch q, k (b, h, l, f), features (b, h, l, 1+f+f^2),
    values (b, h, l, e). Parameters:
      * ``num_heads`` (1): heads h of both branches.
      * ``feature_dim`` (16): projected query/key width f per head of the linear branch.
      * ``window`` (64): window w of the softmax branch.
      * ``bias`` (False): biases on the projections (Based uses none).
    """

    recurrent = True

    examples = [
        {},
        {"num_heads": 2, "feature_dim": 4, "window": 5},
        {"feature_dim": 8, "window": 1},
    ]

    class Params(SequenceMixer.Params):
        num_heads: int = Field(1, ge=1, description="heads of both branches")
        feature_dim: int = Field(16, ge=1, description="Taylor feature map input width f")
        window: int = Field(64, ge=1, description="sliding-window width w")
        bias: bool = Field(False, description="bias on projections")

    def __init__(self, d_model: int, max_len: int = 2048, **params) -> None:
        super().__init__(d_model, max_len, **params)
        h, f = self.p.num_heads, self.p.feature_dim
        self.check_divides("num_heads", h)
        self.qk_lin = nn.Linear(d_model, 2 * h * f, bias=self.p.bias)
        self.v_lin = nn.Linear(d_model, d_model, bias=self.p.bias)
        self.qkv_win = nn.Linear(d_model, 3 * d_model, bias=self.p.bias)
        self.out = nn.Linear(d_model, d_model, bias=self.p.bias)

    def _linear_inputs(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """x (..., d) -> phi(q), phi(k) (..., h, F) and v (..., h, e), heads before the last axis."""
        h = self.p.num_heads
        q, k = (t.unflatten(-1, (h, -1)) for t in self.qk_lin(x).chunk(2, dim=-1))
        v = self.v_lin(x).unflatten(-1, (h, -1))
        return taylor_feature_map(q), taylor_feature_map(k), v

    def forward(self, x, input_ids=None, rope=None):
        """x: (b, l, d) -> (b, l, d)."""
        h = self.p.num_heads
        fq, fk, v = (t.transpose(1, 2) for t in self._linear_inputs(x))  # (b, h, l, .)
        y_lin = causal_linear_attention(fq, fk, v, eps=EPS)
        qw, kw, vw = (split_heads(t, h) for t in self.qkv_win(x).chunk(3, dim=-1))
        if rope is not None:
            qw, kw = rope(qw, kw)
        y_win = causal_attention(qw, kw, vw, "sliding", self.p.window)
        return self.out(merge_heads(y_lin + y_win))

    def state_size(self) -> int:
        h, f, w = self.p.num_heads, self.p.feature_dim, self.p.window
        n_feat = 1 + f + f * f
        return h * n_feat * (self.d_model // h) + h * n_feat + 2 * w * self.d_model

    def init_state(self, batch: int, device=None, dtype=None) -> dict[str, Any]:
        h, f = self.p.num_heads, self.p.feature_dim
        e, n_feat = self.d_model // h, 1 + f + f * f
        dtype = dtype or torch.get_default_dtype()
        return {
            "S": torch.zeros(batch, h, n_feat, e, device=device, dtype=dtype),
            "z": torch.zeros(batch, h, n_feat, device=device, dtype=dtype),
            "k": torch.zeros(batch, h, 0, e, device=device, dtype=dtype),
            "v": torch.zeros(batch, h, 0, e, device=device, dtype=dtype),
        }

    def step(self, x_t: torch.Tensor, state: dict[str, Any]) -> tuple[torch.Tensor, dict[str, Any]]:
        """x_t: (b, d) -> (y_t (b, d), new state)."""
        h = self.p.num_heads
        fq, fk, v = self._linear_inputs(x_t)  # (b, h, F), (b, h, F), (b, h, e)
        S = state["S"] + fk.unsqueeze(-1) * v.unsqueeze(-2)
        z = state["z"] + fk
        denom = torch.einsum("bhf,bhf->bh", fq, z) + EPS
        y_lin = torch.einsum("bhf,bhfe->bhe", fq, S) / denom.unsqueeze(-1)
        qw, kw, vw = (t.unflatten(-1, (h, -1)) for t in self.qkv_win(x_t).chunk(3, dim=-1))  # (b, h, e)
        keys = torch.cat((state["k"], kw.unsqueeze(2)), dim=2)[:, :, -self.p.window :]
        vals = torch.cat((state["v"], vw.unsqueeze(2)), dim=2)[:, :, -self.p.window :]
        a = torch.softmax(torch.einsum("bhe,bhje->bhj", qw, keys) / math.sqrt(qw.shape[-1]), dim=-1)
        y_win = torch.einsum("bhj,bhje->bhe", a, vals)
        y = self.out((y_lin + y_win).flatten(1))
        return y, {"S": S, "z": z, "k": keys, "v": vals}
