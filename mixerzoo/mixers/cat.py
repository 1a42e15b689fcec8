"""CAT: convolution-augmented attention (CAT Sec. 3.1, Def. 1; Fig. 2).

Learnable causal filters of width W on the query/key/value embeddings, then attention:
``K = (X * F_k) W_k`` (same for Q, V). Because a temporal filter commutes with a channel
projection, ``(X * F) W = (X W) * F``; we project first and convolve the h projected head
sequences, which is identical and cheaper. The two forms of Sec. 3.1:

  * ``per_head``: head i has its own 1-D filter ``F_i in R^W`` shared by its channels.
  * ``multi_head``: a filter ``F in R^{W x H x H}`` whose output head i mixes all heads
    (``out_i = sum_j F_ij * X_j``); identical to ``per_head`` when H = 1.

Tap ``F[..., i]`` multiplies the input at lag i (``(F*X)_t = sum_i F_i x_{t-i}``), so the
theorems' filters (e.g. the delay ``D_1`` of Thm. 1, ``F_{q,i} = rho^i`` of Thm. 3) can be
written into ``filters`` directly.
"""

from __future__ import annotations

from typing import Literal

import torch
import torch.nn.functional as F
from pydantic import Field, field_validator
from torch import nn

from mixerzoo.mixers import SEQUENCE_MIXERS
from mixerzoo.mixers.base import SequenceMixer
from mixerzoo.ops.conv import causal_channel_mixing_conv, causal_depthwise_conv
from mixerzoo.ops.heads import merge_heads, split_heads
from mixerzoo.ops.linear_attention import elu_feature_map, linear_attention_chunk


@SEQUENCE_MIXERS.register("cat")
class CAT(SequenceMixer):
    """Convolution-augmented attention (CAT Def. 1).

    Shapes: x (b, l, d) -> (b, l, d). Parameters:
      * ``num_heads`` (1): attention heads h.
      * ``conv_width`` (3): filter length W (Sec. 6.1 uses W = 3).
      * ``conv_on`` ("qkv"): which embeddings are convolved, any of the letters q, k, v.
      * ``conv_type`` ("per_head"): ``per_head`` 1-D filters or ``multi_head`` head-mixing filters.
      * ``attention`` ("softmax"): ``softmax``, or ``linear`` (elu+1 features) = LinCAT (Sec. 6.1).
      * ``bias`` (True): biases on the projections.
    """

    uses_positions = False  # the short convolution supplies local position (App. D.2)

    examples = [
        {},
        {"num_heads": 2, "conv_type": "multi_head"},
        {"num_heads": 2, "conv_on": "k", "conv_width": 5},
        {"attention": "linear", "num_heads": 2},
    ]

    class Params(SequenceMixer.Params):
        num_heads: int = Field(1, ge=1, description="attention heads")
        conv_width: int = Field(3, ge=1, description="filter length W")
        conv_on: str = Field("qkv", description="embeddings to convolve: letters of 'qkv'")
        conv_type: Literal["per_head", "multi_head"] = Field("per_head", description="filter form")
        attention: Literal["softmax", "linear"] = Field("softmax", description="attention kind")
        bias: bool = Field(True, description="bias on projections")

        @field_validator("conv_on")
        @classmethod
        def _letters(cls, v: str) -> str:
            if not set(v) <= set("qkv"):
                raise ValueError("must use only the letters q, k, v (e.g. 'qkv', 'k', '')")
            return "".join(c for c in "qkv" if c in v)

    def __init__(self, d_model: int, max_len: int = 2048, **params) -> None:
        super().__init__(d_model, max_len, **params)
        h, w = self.p.num_heads, self.p.conv_width
        self.check_divides("num_heads", h)
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=self.p.bias)
        self.out = nn.Linear(d_model, d_model, bias=self.p.bias)
        shape = (h, w) if self.p.conv_type == "per_head" else (h, h, w)
        fan_in = w if self.p.conv_type == "per_head" else h * w
        bound = 1.0 / fan_in**0.5  # nn.Conv1d's default initialisation range
        self.filters = nn.ParameterDict(
            {c: nn.Parameter(torch.empty(shape).uniform_(-bound, bound)) for c in self.p.conv_on}
        )

    def convolve(self, x: torch.Tensor, which: str) -> torch.Tensor:
        """x: (b, l, d) projected embedding -> filtered (b, l, d)."""
        if which not in self.filters:
            return x
        f = self.filters[which]
        h = self.p.num_heads
        e = self.d_model // h
        if self.p.conv_type == "per_head":
            return causal_depthwise_conv(x, f.repeat_interleave(e, dim=0))
        b, l, _ = x.shape
        xh = x.reshape(b, l, h, e).permute(0, 3, 1, 2).reshape(b * e, l, h)
        y = causal_channel_mixing_conv(xh, f)
        return y.reshape(b, e, l, h).permute(0, 2, 3, 1).reshape(b, l, self.d_model)

    def forward(self, x, input_ids=None, rope=None):
        """x: (b, l, d) -> (b, l, d)."""
        h = self.p.num_heads
        q, k, v = (self.convolve(t, c) for t, c in zip(self.qkv(x).chunk(3, dim=-1), "qkv"))
        # contiguous: the convolution returns a transposed view, and CPU SDPA given a non-contiguous
        # last dimension falls back to its math kernel, which materializes the L x L score matrix
        q, k, v = (split_heads(t.contiguous(), h) for t in (q, k, v))
        if rope is not None:
            q, k = rope(q, k)
        if self.p.attention == "softmax":
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            y, _ = linear_attention_chunk(elu_feature_map(q), elu_feature_map(k), v)
        return self.out(merge_heads(y))

    @torch.no_grad()
    def attention_map(self, x, input_ids=None, rope=None) -> torch.Tensor:
        """The weights (b, h, l, l) of ``forward`` on x, from the filtered queries and keys.

        Softmax: causal softmax rows (sum 1). Linear: ``phi(q_i) . phi(k_j)`` over its row sum,
        the normalisation of the linear attention (rows sum to 1 up to its epsilon).
        """
        h = self.p.num_heads
        q, k = (self.convolve(t, c) for t, c in zip(self.qkv(x).chunk(3, dim=-1)[:2], "qk"))
        q, k = (split_heads(t.contiguous(), h) for t in (q, k))
        if rope is not None:
            q, k = rope(q, k)
        future = torch.ones(x.shape[1], x.shape[1], dtype=torch.bool, device=x.device).triu(1)
        if self.p.attention == "softmax":
            scores = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5
            return torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1)
        scores = (elu_feature_map(q) @ elu_feature_map(k).transpose(-1, -2)).masked_fill(future, 0.0)
        return scores / (scores.sum(-1, keepdim=True) + 1e-6)
