"""Causal linear attention (Katharopoulos et al. 2020; ICLL App. A.4, Eq. 24-31).

``y_t = W_o [phi(q_t)^T S_t / (phi(q_t)^T z_t + eps)]`` with ``S_t = S_{t-1} + phi(k_t) v_t^T`` and
``z_t = z_{t-1} + phi(k_t)``; the parallel form runs chunked (``ops/linear_attention.py``), the
recurrent form carries ``(S, z)``.
"""

from __future__ import annotations

from typing import Literal

import torch
from pydantic import Field
from torch import nn

from mixerzoo.mixers import SEQUENCE_MIXERS
from mixerzoo.mixers.base import SequenceMixer
from mixerzoo.ops.heads import merge_heads, split_heads
from mixerzoo.ops.linear_attention import elu_feature_map, linear_attention_chunk
from mixerzoo.registry import ConfigError

EPS = 1e-6  # the denominator guard of ops/linear_attention.py


@SEQUENCE_MIXERS.register("linear_attention")
class LinearAttention(SequenceMixer):
    """Causal linear attention with a positive feature map, O(l) time.

    Shapes: x (b, l, d) -> (b, l, d); per head q, k, v are (b, h, l, e), state S (b, h, e, e), z (b, h, e).
    Parameters:
      * ``num_heads`` (1): heads h; must divide d.
      * ``feature_map`` ("elu"): ``elu`` is phi(x) = elu(x) + 1 (Katharopoulos et al.); ``identity``
        is phi(x) = x, the variant ICLL App. A.4 trains (use with ``normalize: false``).
      * ``normalize`` (True): divide by ``phi(q)^T z`` (Katharopoulos); false gives Eq. 27 unnormalised.
      * ``chunk_size`` (64): chunk length of the parallel form (speed only).
    """

    recurrent = True
    examples = [{}, {"num_heads": 2}, {"feature_map": "identity", "normalize": False}]

    class Params(SequenceMixer.Params):
        num_heads: int = Field(1, ge=1, description="heads")
        feature_map: Literal["elu", "identity"] = Field("elu", description="phi: elu+1 or identity")
        normalize: bool = Field(True, description="divide by phi(q)^T sum phi(k)")
        chunk_size: int = Field(64, ge=1, description="chunk length of the parallel form")

    def __init__(self, d_model: int, max_len: int = 2048, **params) -> None:
        super().__init__(d_model, max_len, **params)
        if self.p.feature_map == "identity" and self.p.normalize:
            raise ConfigError(
                "mixer[linear_attention].normalize = True: needs a positive feature map (feature_map: elu)"
            )
        self.check_divides("num_heads", self.p.num_heads)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.out = nn.Linear(d_model, d_model)

    def phi(self, x: torch.Tensor) -> torch.Tensor:
        return elu_feature_map(x) if self.p.feature_map == "elu" else x

    def forward(self, x, input_ids=None, rope=None):
        """x: (b, l, d) -> (b, l, d)."""
        q, k, v = (split_heads(t, self.p.num_heads) for t in self.qkv(x).chunk(3, dim=-1))
        y, _ = linear_attention_chunk(
            self.phi(q), self.phi(k), v, chunk_size=self.p.chunk_size, normalize=self.p.normalize, eps=EPS
        )
        return self.out(merge_heads(y))

    def state_size(self) -> int:
        h, e = self.p.num_heads, self.d_model // self.p.num_heads
        return h * e * e + (h * e if self.p.normalize else 0)

    def init_state(self, batch, device=None, dtype=None):
        h, e = self.p.num_heads, self.d_model // self.p.num_heads
        return (
            torch.zeros(batch, h, e, e, device=device, dtype=dtype),
            torch.zeros(batch, h, e, device=device, dtype=dtype),
        )

    def step(self, x_t, state):
        """x_t: (b, d) -> (y_t (b, d), (S, z)); Eq. 30-31."""
        s, z = state
        h = self.p.num_heads
        q, k, v = (t.unflatten(-1, (h, -1)) for t in self.qkv(x_t).chunk(3, dim=-1))  # (b, h, e)
        q, k = self.phi(q), self.phi(k)
        s = s + k.unsqueeze(-1) * v.unsqueeze(-2)
        y = torch.einsum("bhe,bhef->bhf", q, s)
        if self.p.normalize:
            z = z + k
            y = y / ((q * z).sum(-1, keepdim=True) + EPS)
        return self.out(y.flatten(1)), (s, z)
