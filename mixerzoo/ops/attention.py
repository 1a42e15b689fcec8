"""Causal softmax attention with a window pattern and ALiBi slopes (Vaswani et al. 2017).

Layout: ``q``, ``k`` (b, h, l, e), ``v`` (b, h, l, f) -> (b, h, l, f); ``slopes`` (h,) add the
ALiBi bias ``-m_h (i - j)`` (Press et al. 2022) to the scores. Patterns (Zoology App. E.2 item 4
"Sparse attention"), with window ``w``:

* ``full``: query i sees keys j <= i;
* ``sliding``: query i sees keys i - w < j <= i (the previous w tokens, itself included);
* ``blocked``: query i sees keys j <= i in the same block of w tokens.

Forms: :func:`causal_attention_parallel` builds the (l x l) scores and mask (the reference;
:func:`causal_attention_weights` are its softmax weights, the attention map);
:func:`causal_attention` runs ``scaled_dot_product_attention`` and never builds an l x l matrix
for a window: blocked attention reshapes into blocks, sliding attention lets each block of w
queries see its own and the previous block (2w keys), so time and memory are O(l * w).
"""

from __future__ import annotations

from typing import Literal

import torch
import torch.nn.functional as F

from mixerzoo.ops.alibi import alibi_bias
from mixerzoo.ops.heads import split_chunks

Pattern = Literal["full", "sliding", "blocked"]


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
    pattern: Pattern = "full",
    window: int = 64,
    slopes: torch.Tensor | None = None,
    dropout: float = 0.0,
) -> torch.Tensor:
    """Causal softmax attention with an optional window pattern and ALiBi slopes (the fast form).

    q, k (b, h, l, e), v (b, h, l, f) -> (b, h, l, f); see the module docstring for the patterns.
    """
    b, h, l, _ = q.shape
    f = v.shape[-1]
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
        return y.reshape(b, h, n * w, f)[:, :, :l]

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
    return y.reshape(b, h, n * w, f)[:, :, :l]


def causal_attention_weights(
    q: torch.Tensor,
    k: torch.Tensor,
    pattern: Pattern = "full",
    window: int = 64,
    slopes: torch.Tensor | None = None,
) -> torch.Tensor:
    """The softmax weights (b, h, l, l) of :func:`causal_attention` (no dropout); rows sum to 1."""
    l = q.shape[2]
    pos = torch.arange(l, device=q.device)
    i, j = pos.unsqueeze(1), pos.unsqueeze(0)
    allowed = j <= i
    w = min(window, l)
    if pattern == "sliding":
        allowed = allowed & (i - j < w)
    elif pattern == "blocked":
        allowed = allowed & (i // w == j // w)
    scores = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5
    if slopes is not None:
        scores = scores + alibi_bias(slopes.to(device=q.device, dtype=q.dtype), pos, pos)
    return torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)


def causal_attention_parallel(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    pattern: Pattern = "full",
    window: int = 64,
    slopes: torch.Tensor | None = None,
) -> torch.Tensor:
    """The reference form: the (l x l) weights of :func:`causal_attention_weights` times ``v``."""
    return causal_attention_weights(q, k, pattern, window, slopes) @ v
