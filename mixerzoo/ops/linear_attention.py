"""Causal linear attention, chunked (O(l * (c + e) * e) time, never an l x l matrix).

Shapes: ``q, k`` (b, h, l, e) already passed through a positive feature map; ``v`` (b, h, l, f).
Output ``y_t = phi(q_t)^T S_t / (phi(q_t)^T z_t + eps)`` with ``S_t = sum_{s<=t} phi(k_s) v_s^T``
and ``z_t = sum_{s<=t} phi(k_s)`` (Katharopoulos et al. 2020; paper 004 App. A.4).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def causal_linear_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    chunk_size: int = 64,
    normalize: bool = True,
    eps: float = 1e-6,
) -> torch.Tensor:
    b, h, l, e = q.shape
    c = min(chunk_size, l)
    pad = (-l) % c
    if pad:
        q, k, v = (F.pad(t, (0, 0, 0, pad)) for t in (q, k, v))
    n = (l + pad) // c
    qc = q.reshape(b, h, n, c, e)
    kc = k.reshape(b, h, n, c, e)
    vc = v.reshape(b, h, n, c, v.shape[-1])
    mask = torch.ones(c, c, dtype=torch.bool, device=q.device).tril()
    scores = torch.einsum("bhnie,bhnje->bhnij", qc, kc).masked_fill(~mask, 0.0)
    intra = torch.einsum("bhnij,bhnjf->bhnif", scores, vc)
    # state entering each chunk: exclusive prefix sum of per-chunk k^T v
    kv = torch.einsum("bhnje,bhnjf->bhnef", kc, vc)
    kv_prev = torch.cumsum(kv, dim=2) - kv
    y = intra + torch.einsum("bhnie,bhnef->bhnif", qc, kv_prev)
    if normalize:
        ksum = kc.sum(dim=3)  # (b, h, n, e)
        z_prev = torch.cumsum(ksum, dim=2) - ksum
        denom = scores.sum(-1) + torch.einsum("bhnie,bhne->bhni", qc, z_prev)
        y = y / (denom.unsqueeze(-1) + eps)
    return y.reshape(b, h, n * c, -1)[:, :, :l]


def elu_feature_map(x: torch.Tensor) -> torch.Tensor:
    """phi(x) = elu(x) + 1 (Katharopoulos et al. 2020)."""
    return F.elu(x) + 1.0
