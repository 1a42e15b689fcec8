"""Causal multi-head softmax attention (Vaswani et al. 2017), via ``scaled_dot_product_attention``.

Zoology's synthetic runs use 1 head with learned absolute positions (Zoology App. E.2).
Options for the efficient-attention baselines of Zoology App. E.2 / F (item 4 "Sparse
attention"): a *sliding* window (each token sees the previous w tokens, itself included) and a
*blocked* window (causal attention inside fixed blocks of w tokens); and the ALiBi distance bias
(Press et al. 2022), which LaS Sec. 5.2 compares with LaS. Windows never build an l x l
matrix: blocked attention reshapes into blocks, sliding attention lets each block of w queries
see its own and the previous block (2w keys), so time and memory are O(l * w).
"""

from __future__ import annotations

from typing import Literal

import torch
import torch.nn.functional as F
from pydantic import Field
from torch import nn

from mixerzoo.mixers import SEQUENCE_MIXERS
from mixerzoo.mixers.base import SequenceMixer
from mixerzoo.ops.alibi import alibi_bias, alibi_slopes
from mixerzoo.ops.heads import merge_heads, split_chunks, split_heads


def _sdpa(q, k, v, allowed: torch.Tensor, bias: torch.Tensor | None, dropout: float) -> torch.Tensor:
    """SDPA with a boolean ``allowed`` mask and an optional additive bias (same broadcast shape)."""
    if bias is None:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=allowed, dropout_p=dropout)
    mask = bias.to(q.dtype).masked_fill(~allowed, float("-inf"))
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout)


def causal_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    pattern: Literal["full", "sliding", "blocked"] = "full",
    window: int = 64,
    slopes: torch.Tensor | None = None,
    dropout: float = 0.0,
) -> torch.Tensor:
    """Causal softmax attention with an optional window pattern and ALiBi slopes.

    q, k, v: (b, h, l, e) -> (b, h, l, e). ``slopes`` (h,) adds ``-m_h (i - j)`` to the scores.
      * ``full``: query i sees keys j <= i.
      * ``sliding``: query i sees keys i - w < j <= i (Zoology App. E.2 item 4).
      * ``blocked``: query i sees keys j <= i in the same block of w tokens.
    """
    b, h, l, e = q.shape
    if pattern == "full":
        if slopes is None:
            return F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=dropout)
        pos = torch.arange(l, device=q.device)
        allowed = pos.unsqueeze(1) >= pos.unsqueeze(0)
        return _sdpa(q, k, v, allowed, alibi_bias(slopes.to(q.device), pos, pos), dropout)

    w = min(window, l)
    # padded queries are dropped below; padded keys lie in the future of every real query
    qb, kb, vb = (split_chunks(t, w) for t in (q, k, v))  # (b, h, n, w, e)
    n = qb.shape[2]
    local = torch.arange(w, device=q.device)
    if pattern == "blocked":
        allowed = local.unsqueeze(1) >= local.unsqueeze(0)  # (w, w)
        bias = None if slopes is None else alibi_bias(slopes.to(q.device), local, local).unsqueeze(1)
        y = _sdpa(qb, kb, vb, allowed, bias, dropout)
        return y.reshape(b, h, n * w, e)[:, :, :l]

    # sliding: block i of queries sees [block i-1, block i]; key slot j of that pair sits at
    # distance (w + i_local - j) behind the query, allowed when 0 <= distance < w.
    kk, vv = (torch.cat((F.pad(t, (0, 0, 0, 0, 1, 0))[:, :, :n], t), dim=3) for t in (kb, vb))  # (b,h,n,2w,e)
    slot = torch.arange(2 * w, device=q.device)
    dist = w + local.unsqueeze(1) - slot.unsqueeze(0)  # (w, 2w)
    allowed = ((dist >= 0) & (dist < w)).expand(n, w, 2 * w).clone()
    allowed[0, :, :w] = False  # block 0 has no previous block
    bias = None
    if slopes is not None:
        bias = (-slopes.to(q.device).view(h, 1, 1, 1) * dist.to(slopes.dtype)).expand(h, n, w, 2 * w)
    y = _sdpa(qb, kk, vv, allowed, bias, dropout)
    return y.reshape(b, h, n * w, e)[:, :, :l]


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
        pos = torch.arange(x.shape[1], device=x.device)
        i, j = pos.unsqueeze(1), pos.unsqueeze(0)
        allowed = j <= i
        w = min(self.p.window, x.shape[1])
        if self.p.pattern == "sliding":
            allowed = allowed & (i - j < w)
        elif self.p.pattern == "blocked":
            allowed = allowed & (i // w == j // w)
        scores = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5
        if self.alibi_slopes is not None:
            scores = scores + alibi_bias(self.alibi_slopes.to(x.dtype), pos, pos)
        return torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)

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
