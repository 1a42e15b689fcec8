"""Causal multi-head softmax attention (Vaswani et al. 2017): projections around the op
``ops/attention.py`` (``scaled_dot_product_attention``).

Zoology's synthetic runs use 1 head with learned absolute positions (Zoology App. E.2).
Options for the efficient-attention baselines of Zoology App. E.2 / F (item 4 "Sparse
attention"): a *sliding* window (each token sees the previous w tokens, itself included) and a
*blocked* window (causal attention inside fixed blocks of w tokens); and the ALiBi distance bias
(Press et al. 2022), which LaS Sec. 5.2 compares with LaS. Windows never build an l x l
matrix (time and memory O(l * w)).
"""

from __future__ import annotations

from typing import Literal

import torch
import torch.nn.functional as F
from pydantic import Field
from torch import nn

from mixerzoo.mixers import SEQUENCE_MIXERS
from mixerzoo.mixers.base import SequenceMixer
from mixerzoo.ops.alibi import alibi_slopes
from mixerzoo.ops.attention import causal_attention, causal_attention_weights
from mixerzoo.ops.heads import merge_heads, split_heads


@SEQUENCE_MIXERS.register("attention")
class Attention(SequenceMixer):
    """Causal multi-head softmax attention, optionally windowed or with ALiBi.

    Shapes: x (b, l, d) -> (b, l, d). Parameters:
      * ``num_heads`` (1): heads h; ``d_model`` must be divisible by h.
      * ``bias`` (True): biases on the q/k/v and output projections.
      * ``dropout`` (0.0): attention-probability dropout (training only).
      * ``pattern`` ("full"): ``full`` causal, ``sliding`` window or ``blocked`` window
        (Zoology App. E.2 item 4 / App. F: window sizes 8 and 32 in Fig. 6).
      * ``window`` (64): window w of the ``sliding`` / ``blocked`` patterns.
      * ``alibi`` (False): add the ALiBi bias -m_h (i - j) with geometric per-head slopes.
    """

    uses_positions = True

    examples = [
        {},
        {"num_heads": 2},
        {"num_heads": 2, "pattern": "sliding", "window": 5},
        {"pattern": "blocked", "window": 7},
        {"num_heads": 2, "alibi": True},
        {"num_heads": 4, "pattern": "sliding", "window": 8, "alibi": True},
    ]

    class Params(SequenceMixer.Params):
        num_heads: int = Field(1, ge=1, description="attention heads")
        bias: bool = Field(True, description="bias on projections")
        dropout: float = Field(0.0, ge=0.0, lt=1.0, description="attention dropout")
        pattern: Literal["full", "sliding", "blocked"] = Field("full", description="attention pattern")
        window: int = Field(64, ge=1, description="window w of the sliding/blocked patterns")
        alibi: bool = Field(False, description="ALiBi linear distance bias (Press et al. 2022)")

    def __init__(self, d_model: int, max_len: int = 2048, **params) -> None:
        super().__init__(d_model, max_len, **params)
        h = self.p.num_heads
        self.check_divides("num_heads", h)
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=self.p.bias)
        self.out = nn.Linear(d_model, d_model, bias=self.p.bias)
        slopes = alibi_slopes(h) if self.p.alibi else None
        self.register_buffer("alibi_slopes", slopes, persistent=False)

    def forward(self, x, input_ids=None, rope=None):
        """x: (b, l, d) -> (b, l, d)."""
        h = self.p.num_heads
        q, k, v = (split_heads(t, h) for t in self.qkv(x).chunk(3, dim=-1))
        if rope is not None:
            q, k = rope(q, k)
        drop = self.p.dropout if self.training else 0.0
        slopes = None if self.alibi_slopes is None else self.alibi_slopes.to(x.dtype)
        y = causal_attention(q, k, v, self.p.pattern, self.p.window, slopes, drop)
        return self.out(merge_heads(y))

    @torch.no_grad()
    def attention_map(self, x, input_ids=None, rope=None) -> torch.Tensor:
        """The softmax weights (b, h, l, l) of ``forward`` on x (eval mode, no dropout); rows sum to 1."""
        q, k, _ = (split_heads(t, self.p.num_heads) for t in self.qkv(x).chunk(3, dim=-1))
        if rope is not None:
            q, k = rope(q, k)
        return causal_attention_weights(q, k, self.p.pattern, self.p.window, self.alibi_slopes)

    def forward_rows(self, x, rows, input_ids=None, rope=None):
        """Queries, attention and output projection only at ``rows``; keys/values everywhere.

        x (b, l, d), rows (b, l) bool -> (n_rows, d), equal to ``forward(x)[rows]``. The selected
        queries of each sequence are packed into (b, c_max) slots (padding slots attend to key 0
        and are dropped). Full causal pattern without ALiBi or RoPE only; else the base method.
        """
        if self.p.pattern != "full" or self.alibi_slopes is not None or rope is not None:
            return super().forward_rows(x, rows, input_ids=input_ids, rope=rope)
        b, l, d = x.shape
        h = self.p.num_heads
        w, bias = self.qkv.weight, self.qkv.bias
        k, v = F.linear(x, w[d:], None if bias is None else bias[d:]).chunk(2, dim=-1)
        b_idx, t_idx = rows.nonzero(as_tuple=True)  # row-major, the order of x[rows]
        slot = rows.cumsum(dim=1)[b_idx, t_idx] - 1
        c_max = int(rows.sum(dim=1).max()) if b_idx.numel() else 0
        q_rows = F.linear(x[b_idx, t_idx], w[:d], None if bias is None else bias[:d])
        q = x.new_zeros(b, c_max, d, dtype=q_rows.dtype).index_put((b_idx, slot), q_rows)
        q_pos = torch.zeros(b, c_max, dtype=torch.long, device=x.device).index_put((b_idx, slot), t_idx)
        allowed = torch.arange(l, device=x.device) <= q_pos.unsqueeze(-1)  # (b, c_max, l)
        drop = self.p.dropout if self.training else 0.0
        y = F.scaled_dot_product_attention(
            split_heads(q, h),
            split_heads(k, h),
            split_heads(v, h),
            attn_mask=allowed.unsqueeze(1),
            dropout_p=drop,
        )
        return self.out(merge_heads(y)[b_idx, slot])
