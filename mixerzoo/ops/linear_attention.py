"""Causal linear attention (Katharopoulos et al. 2020; ICLL App. A.4).

Shapes: ``b`` batch, ``h`` heads, ``l`` length, ``e`` key width, ``f`` value width, ``n``
chunks of ``c`` steps. Inputs ``q, k`` (b, h, l, e), already passed through a positive feature
map; ``v`` (b, h, l, f). State ``(S, z)``: S (b, h, e, f), z (b, h, e). Output
``y_t = phi(q_t)^T S_t / (phi(q_t)^T z_t + eps)`` with ``S_t = sum_{s<=t} phi(k_s) v_s^T`` and
``z_t = sum_{s<=t} phi(k_s)`` (without the division when ``normalize=False``).

Forms: :func:`linear_attention_parallel` the masked l x l matrix; :func:`linear_attention_recurrent`
one step per position (the reference); :func:`linear_attention_chunk` the chunked fast path
(O(l * (c + e) * f) time, never an l x l matrix), run in segments that are recomputed in the
backward pass (``ops/recompute.py``), so a training step stores O(l * (e + f)) per head.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from mixerzoo.ops.heads import split_chunks
from mixerzoo.ops.recompute import scan_in_segments, segment_length


def linear_attention_parallel(q, k, v, normalize: bool = True, eps: float = 1e-6) -> torch.Tensor:
    """The masked l x l score matrix, O(l^2) memory -> y (b, h, l, f)."""
    scores = (q @ k.transpose(-1, -2)).tril()
    y = scores @ v
    return y / (scores.sum(-1, keepdim=True) + eps) if normalize else y


def linear_attention_recurrent(q, k, v, normalize: bool = True, eps: float = 1e-6, initial=None):
    """Reference, one step per position -> (y (b, h, l, f), final state (S, z))."""
    b, h, _, e = q.shape
    s, z = (q.new_zeros(b, h, e, v.shape[-1]), q.new_zeros(b, h, e)) if initial is None else initial
    out = []
    for q_t, k_t, v_t in zip(q.unbind(2), k.unbind(2), v.unbind(2)):
        s = s + k_t.unsqueeze(-1) * v_t.unsqueeze(-2)
        z = z + k_t
        y_t = torch.einsum("bhe,bhef->bhf", q_t, s)
        out.append(y_t / ((q_t * z).sum(-1, keepdim=True) + eps) if normalize else y_t)
    return torch.stack(out, dim=2), (s, z)


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


def linear_attention_chunk(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    chunk_size: int = 64,
    normalize: bool = True,
    eps: float = 1e-6,
    initial: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
    """Same result as :func:`linear_attention_recurrent` -> (y (b, h, l, f), final state (S, z))."""
    b, h, l, e = q.shape
    f = v.shape[-1]
    c = max(1, min(chunk_size, l))
    # per step of a segment: c scores, e * f / c of the chunk states, the inputs and output
    segment = segment_length(c, b * h * (c + e * f // c + 2 * e + 2 * f))
    consts = (c, normalize, eps)
    return scan_in_segments(_linear_attention_segment, (q, k, v), consts, initial, segment, dim=2)


def elu_feature_map(x: torch.Tensor) -> torch.Tensor:
    """phi(x) = elu(x) + 1 (Katharopoulos et al. 2020)."""
    return F.elu(x) + 1.0
