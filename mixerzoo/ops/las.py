"""LaS attention's weights (LaS, Zimerman & Wolf, Sec. 4.1 Eq. 4): local decay, softmax, row pooling.

Shapes: ``b`` batch, ``h`` heads, ``l`` length, ``e`` head width; any extra axes sit between h
and l (the blocks ``(b, h, n, c, e)`` of LaS-chunk). Inputs q, k, v (b, h, ..., l, e); ``alphas``
(h,) the decay rates alpha_c >= 0; optional ALiBi ``slopes`` (h,). For head c::

    LaS_c(Q, K, V) = AP( SF( exp(-alpha_c D_L) (.) Q K^T / sqrt(e) ) ) V

with ``D_L[i, j] = i - j`` for j <= i, SF the causal softmax and AP a zero-padded average
pooling of window P along each row, whose future columns are zeroed again (Eq. 4's pooling
order, ``after_softmax``); ``before_softmax`` pools the decayed logits, then takes the softmax
(the paper's Fig. 1). The mixer (``mixers/las_attention.py``) explains these choices.

Forms: :func:`las_attention_parallel` is Eq. 4 as written, the pooled (l x l) weights of
:func:`las_weights` times V (the reference); :func:`las_attention` the fast form, which moves
the pooling of ``after_softmax`` onto the values (:func:`pooled_rows_times_values`), so the
(l x l) matrix is never pooled.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from mixerzoo.ops.alibi import alibi_bias

#: largest alpha * (l - 1) for which the decay is folded into q and k (exp(30) ~ 1e13 keeps
#: float32 far from overflow); above it the (l x l) decay matrix is built
SEPARABLE_DECAY_MAX = 30.0


def pool_rows(a: torch.Tensor, p: int) -> torch.Tensor:
    """Zero-padded average pooling of window p along the last axis, same shape (divides by p)."""
    if p == 1:
        return a
    shape = a.shape
    left = (p - 1) // 2
    flat = F.pad(a.reshape(-1, 1, shape[-1]), (left, p - 1 - left))
    return F.avg_pool1d(flat, p, stride=1).reshape(shape)


def las_weights(
    q: torch.Tensor,
    k: torch.Tensor,
    alphas: torch.Tensor,
    pool: int,
    pool_order: str = "after_softmax",
    slopes: torch.Tensor | None = None,
    alpha_max: float | None = None,
) -> torch.Tensor:
    """The LaS attention matrix. q, k: (b, h, ..., l, e); alphas (h,) -> weights (b, h, ..., l, l).

    ``slopes`` (h,): add the ALiBi bias ``-m_c (i - j)`` to the logits (Press et al. 2022).
    ``alpha_max``: ``max(alphas)`` when the caller knows it (no read of the tensor: no device
    sync, no graph break under ``torch.compile``). The decay is folded into q and k when
    ``alpha_max (l - 1) <= SEPARABLE_DECAY_MAX`` (not in float16, whose range ends at e^11).
    """
    l, e = q.shape[-2], q.shape[-1]
    pos = torch.arange(l, device=q.device)
    dist = pos.unsqueeze(1) - pos.unsqueeze(0)
    future = dist < 0
    a = alphas.to(q.dtype).view(-1, *([1] * (q.dim() - 2)))  # (h, 1, ..., 1)
    if alpha_max is None:
        alpha_max = float(alphas.max())
    if alpha_max * (l - 1) <= SEPARABLE_DECAY_MAX and q.dtype != torch.float16:
        # exp(-a (i - j)) = exp(-a i) exp(a j): the decay folds into q and k, and ELD (.) QK^T
        # is one matrix product (no l x l multiplications); future entries are masked below
        t = pos.to(q.dtype).view(l, 1)
        scores = (q * (torch.exp(-a * t) / math.sqrt(e))) @ (k * torch.exp(a * t)).transpose(-1, -2)
    else:
        decay = torch.exp(-a * dist.clamp(min=0).to(q.dtype))
        scores = torch.einsum("...ie,...je->...ij", q, k) / math.sqrt(e) * decay  # ELD (.) QK^T/sqrt(d)
    if slopes is not None:
        # Press et al. Sec. 3: softmax(q_i K^T + m (-(i - j))); (h, l, l) -> (h, 1.., l, l)
        bias = alibi_bias(slopes.to(q), pos, pos)
        scores = scores + bias.view(-1, *([1] * (q.dim() - 4)), l, l)
    if pool_order == "after_softmax":
        weights = torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1)
        if pool == 1:
            return weights  # the softmax already puts exact zeros on the future columns
        return pool_rows(weights, pool).masked_fill(future, 0.0)
    pooled = pool_rows(scores.masked_fill(future, 0.0), pool)
    return torch.softmax(pooled.masked_fill(future, float("-inf")), dim=-1)


def pooled_rows_times_values(w: torch.Tensor, v: torch.Tensor, p: int) -> torch.Tensor:
    """``(AP(w) with future columns zeroed) @ v`` without pooling the (l x l) matrix.

    w: (..., l, l) causal weights (zero above the diagonal), v: (..., l, e) -> (..., l, e).
    With ``left = (p-1)//2``, ``right = p-1-left``, :func:`pool_rows` gives
    ``AP(w)[i, j] = (1/p) sum_{u=-left..right} w[i, j+u]``, kept for ``j <= i``. Summing over j
    first: ``sum_j AP(w)[i, j] v_j = sum_k w[i, k] v~_k - corr_i`` with the pooled values
    ``v~_k = (1/p) sum_{m=k-right..k+left} v_m`` (zero outside [0, l)) and, for the terms with
    ``m > i`` that the masking drops, ``corr_i = (1/p) sum_{r<left} w[i, i-r] sum_{m=i+1..i+left-r} v_m``.
    Only ``left`` diagonals of w are read; cost O(l * e * p) on top of ``w @ v``.
    """
    if p == 1:
        return w @ v
    l = v.shape[-2]
    left = (p - 1) // 2
    right = p - 1 - left
    padded = F.pad(v, (0, 0, right, left))
    pooled = padded[..., 0:l, :]
    for s in range(1, p):
        pooled = pooled + padded[..., s : s + l, :]
    y = w @ pooled
    if left:
        ahead = F.pad(v, (0, 0, 0, left))  # ahead[..., m, :] = v_m, zero for m >= l
        tail = torch.zeros_like(v)  # sum_{m=i+1..i+n} v_m for n = 1..left, built up
        tails = []
        for n in range(1, left + 1):
            tail = tail + ahead[..., n : n + l, :]
            tails.append(tail)
        for r in range(left):
            d = torch.diagonal(w, offset=-r, dim1=-2, dim2=-1).unsqueeze(-1)  # w[i, i-r], i >= r
            y = y - F.pad(d * tails[left - r - 1][..., r:, :], (0, 0, r, 0))
    return y / p


def las_attention_parallel(q, k, v, alphas, pool, pool_order="after_softmax", slopes=None, alpha_max=None):
    """Reference: ``las_weights(q, k, ...) @ v``, the pooled (l x l) matrix -> (b, h, ..., l, e)."""
    return las_weights(q, k, alphas, pool, pool_order, slopes, alpha_max) @ v


def las_attention(q, k, v, alphas, pool, pool_order="after_softmax", slopes=None, alpha_max=None):
    """Same result as :func:`las_attention_parallel` without pooling the (l x l) matrix -> (b, h, ..., l, e).

    With ``after_softmax`` the pooling moves onto the values (about half the step time at l = 288).
    """
    if pool_order == "after_softmax":
        weights = las_weights(q, k, alphas, 1, "after_softmax", slopes, alpha_max)
        return pooled_rows_times_values(weights, v, pool)
    return las_weights(q, k, alphas, pool, pool_order, slopes, alpha_max) @ v
