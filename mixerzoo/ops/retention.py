"""Retention (RetNet; Sun et al. 2023, "Retentive Network"; ICLL App. A.5): a fixed decay per head.

Shapes: ``b`` batch, ``h`` heads, ``l`` length, ``e`` key width, ``f`` value width, ``n``
chunks of ``c`` steps. Inputs q, k (b, h, l, e), v (b, h, l, f), ``log_gamma`` (h,) the log
decay of each head, < 0; state S (b, h, e, f). Per head (ICLL Eq. 41-42)::

    S_t = gamma S_{t-1} + k_t^T v_t,      z_t = q_t S_t,

i.e. ``z = (Q K^T ⊙ D) V`` with ``D_ij = gamma^{i-j}`` for ``j <= i`` (Eq. 34-36).

Forms: :func:`retention_parallel` the decay-masked l x l matrix (Sun et al. Eq. 5);
:func:`retention_recurrent` one step per position (Eq. 6; :func:`retention_step` is one step);
:func:`retention_chunk` l x l only inside chunks, states passed between chunks (Eq. 7).
"""

from __future__ import annotations

import torch

from mixerzoo.ops.heads import split_chunks
from mixerzoo.ops.recompute import scan_in_segments, segment_length


def retention_log_decays(num_heads: int, device=None, dtype=None) -> torch.Tensor:
    """log gamma_h with gamma_h = 1 - 2^{-5-h} (Sun et al. Sec. 2.2), shape (h,)."""
    work = torch.promote_types(dtype or torch.get_default_dtype(), torch.float32)  # no float64 unless asked
    h = torch.arange(num_heads, device=device, dtype=work)
    return torch.log1p(-torch.exp2(-5.0 - h)).to(dtype)


def retention_step(q_t, k_t, v_t, log_gamma, state):
    """One position. q_t, k_t (b, h, e), v_t (b, h, f), state (b, h, e, f) -> (z_t (b, h, f), new state)."""
    gamma = torch.exp(log_gamma)
    state = gamma[:, None, None] * state + k_t.unsqueeze(-1) * v_t.unsqueeze(-2)
    return torch.einsum("bhe,bhef->bhf", q_t, state), state


def retention_recurrent(q, k, v, log_gamma, initial=None):
    """Reference, one step per position -> (z (b, h, l, f), final state (b, h, e, f))."""
    b, h, _, e = q.shape
    state = q.new_zeros(b, h, e, v.shape[-1]) if initial is None else initial
    out = []
    for q_t, k_t, v_t in zip(q.unbind(2), k.unbind(2), v.unbind(2)):
        z_t, state = retention_step(q_t, k_t, v_t, log_gamma, state)
        out.append(z_t)
    return torch.stack(out, dim=2), state


def retention_parallel(q, k, v, log_gamma):
    """The decay-masked l x l matrix -> z (b, h, l, f); materialises (h, l, l)."""
    l = q.shape[2]
    pos = torch.arange(l, device=q.device)
    dist = (pos[:, None] - pos[None, :]).to(q.dtype)  # i - j
    causal = dist >= 0
    decay = torch.exp(log_gamma[:, None, None] * dist.clamp(min=0)) * causal  # (h, l, l)
    return torch.einsum("bhie,bhje,hij,bhjf->bhif", q, k, decay, v)


def retention_chunk(q, k, v, log_gamma, chunk_size=64, initial=None):
    """Same result as :func:`retention_recurrent` in O(l * (c + e) * f) time (Sun et al. Eq. 7).

    Runs in segments of whole chunks that are recomputed in the backward pass
    (``ops/recompute.py``): a training step stores O(l * (e + f)) per head, not the per-chunk
    (e, f) states and c x c scores. Returns (z (b, h, l, f), final state (b, h, e, f)).
    """
    b, h, l, e = q.shape
    f = v.shape[-1]
    c = max(1, min(chunk_size, l))
    segment = segment_length(c, b * h * (2 * c + 3 * e * f // c + 2 * e + 2 * f))
    return scan_in_segments(_retention_segment, (q, k, v), (log_gamma, c), initial, segment, dim=2)


def _retention_segment(q, k, v, log_gamma, c, initial):
    """One segment from the state entering it, (b, h, e, f) or None (zero) -> (z, state after it)."""
    l = q.shape[2]
    qc, kc, vc = (split_chunks(t, c) for t in (q, k, v))  # (b, h, n, c, ·)
    g = log_gamma[:, None]
    pos = torch.arange(c, device=q.device).to(q.dtype)
    dist = pos[:, None] - pos[None, :]
    inner_decay = torch.exp(g[..., None] * dist.clamp(min=0)) * (dist >= 0)  # (h, c, c)
    scores = torch.einsum("bhnie,bhnje->bhnij", qc, kc) * inner_decay[:, None]
    inner = scores @ vc
    # Each chunk's own contribution to the state at its last step: sum_j gamma^{c-1-j} k_j^T v_j.
    to_end = torch.exp(g * (c - 1 - pos))  # (h, c)
    chunk_states = torch.einsum("bhnje,bhnjf->bhnef", kc * to_end[:, None, :, None], vc)
    # Sun et al. Eq. 7: R_i = gamma^c R_{i-1} + K_i^T (V_i ⊙ zeta), one step per chunk. The decay is a
    # scalar per head, so a plain loop over the few chunks of a segment is all the scan needs.
    chunk_decay = torch.exp(c * log_gamma)[:, None, None]  # (h, 1, 1)
    state = torch.zeros_like(chunk_states[:, :, 0]) if initial is None else initial
    entering = []
    for chunk_state in chunk_states.unbind(2):  # unbind: one stacked gradient, not one per index
        entering.append(state)
        state = chunk_decay * state + chunk_state
    ragged = l - (qc.shape[2] - 1) * c  # real steps of the last chunk
    if ragged < c:  # its padded steps must not decay the state it leaves
        tail = torch.exp(g * (ragged - 1 - pos[:ragged]))  # (h, ragged)
        last = torch.einsum("bhje,bhjf->bhef", kc[:, :, -1, :ragged] * tail[..., None], vc[:, :, -1, :ragged])
        state = torch.exp(ragged * log_gamma)[:, None, None] * entering[-1] + last
    entering = torch.stack(entering, dim=2)  # (b, h, n, e, f): the state before each chunk
    from_start = torch.exp(g * (pos + 1))  # gamma^{i+1}: decay from the previous chunk's end to step i
    cross = (qc * from_start[:, None, :, None]) @ entering
    return (inner + cross).flatten(2, 3)[:, :, :l], state
