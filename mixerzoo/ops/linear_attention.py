"""Causal linear attention, chunked (O(l * (c + e) * f) time, never an l x l matrix).

Shapes: ``q, k`` (b, h, l, e) already passed through a positive feature map; ``v`` (b, h, l, f).
Output ``y_t = phi(q_t)^T S_t / (phi(q_t)^T z_t + eps)`` with ``S_t = sum_{s<=t} phi(k_s) v_s^T``
and ``z_t = sum_{s<=t} phi(k_s)`` (Katharopoulos et al. 2020; paper 004 App. A.4).

Layout (fla's): :func:`dense_linear_attention` is the plain reference (an l x l matrix);
:func:`causal_linear_attention` the chunked fast path, run in segments that are recomputed in
the backward pass (``ops/recompute.py``), so a training step stores O(l * (e + f)) per head.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from mixerzoo.ops.heads import split_chunks
from mixerzoo.ops.recompute import scan_in_segments, segment_length


def dense_linear_attention(q, k, v, normalize: bool = True, eps: float = 1e-6) -> torch.Tensor:
    """Reference: the masked l x l score matrix, O(l^2) memory."""
    scores = (q @ k.transpose(-1, -2)).tril()
    y = scores @ v
    return y / (scores.sum(-1, keepdim=True) + eps) if normalize else y


def _linear_attention_segment(q, k, v, c, normalize, eps, state):
    """One segment from the state (S (b, h, e, f), z (b, h, e)) entering it (None: zero)."""
    l = q.shape[2]
    qc, kc, vc = (split_chunks(t, c) for t in (q, k, v))  # (b, h, n, c, ·)
    mask = torch.ones(c, c, dtype=torch.bool, device=q.device).tril()
    scores = torch.einsum("bhnie,bhnje->bhnij", qc, kc).masked_fill(~mask, 0.0)
    y = torch.einsum("bhnij,bhnjf->bhnif", scores, vc)
    # state entering each chunk: exclusive prefix sum of per-chunk k^T v (padded keys are zero)
    kv = torch.einsum("bhnje,bhnjf->bhnef", kc, vc)
    kv_incl = torch.cumsum(kv, dim=2)
    ksum = kc.sum(dim=3)  # (b, h, n, e)
    z_incl = torch.cumsum(ksum, dim=2)
    if state is not None:
        kv_incl = kv_incl + state[0].unsqueeze(2)
        z_incl = z_incl + state[1].unsqueeze(2)
    y = y + torch.einsum("bhnie,bhnef->bhnif", qc, kv_incl - kv)
    if normalize:
        denom = scores.sum(-1) + torch.einsum("bhnie,bhne->bhni", qc, z_incl - ksum)
        y = y / (denom.unsqueeze(-1) + eps)
    return y.flatten(2, 3)[:, :, :l], (kv_incl[:, :, -1], z_incl[:, :, -1])


def causal_linear_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    chunk_size: int = 64,
    normalize: bool = True,
    eps: float = 1e-6,
) -> torch.Tensor:
    """q, k: (b, h, l, e), v: (b, h, l, f) -> (b, h, l, f); equals :func:`dense_linear_attention`."""
    b, h, l, e = q.shape
    f = v.shape[-1]
    c = max(1, min(chunk_size, l))
    # per step of a segment: c scores, e * f / c of the chunk states, the inputs and output
    segment = segment_length(c, b * h * (c + e * f // c + 2 * e + 2 * f))
    y, _ = scan_in_segments(_linear_attention_segment, (q, k, v), (c, normalize, eps), None, segment, dim=2)
    return y


def elu_feature_map(x: torch.Tensor) -> torch.Tensor:
    """phi(x) = elu(x) + 1 (Katharopoulos et al. 2020)."""
    return F.elu(x) + 1.0
