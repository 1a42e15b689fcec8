"""Gated linear attention (GLA; Yang et al. 2023, Sec. 4; ICLL App. A.6, Eq. 46-47): a per-channel decay.

Shapes: ``b`` batch, ``h`` heads, ``l`` length, ``e`` key width, ``f`` value width, ``n``
chunks of ``c`` steps. Inputs q, k (b, h, l, e), v (b, h, l, f), ``log_alpha = log alpha_t <= 0``
(b, h, l, e); state S (b, h, e, f). Per head::

    S_t = diag(alpha_t) S_{t-1} + k_t^T v_t,      z_t = q_t S_t.

Forms: :func:`gla_recurrent` one step per position (the reference; :func:`gla_step` is one
step); :func:`gla_chunk` the chunkwise form (Yang et al. Sec. 4.2): inside a chunk
``A_ij = sum_e q_ie k_je exp(b_ie - b_je)`` with ``b`` the chunk-local cumulative sum of
``log alpha``; only ``j <= i`` is exponentiated, so every exponent is <= 0 and nothing
overflows. States are passed between chunks with ``ops/scan.py``.
"""

from __future__ import annotations

import math

import torch

from mixerzoo.ops.heads import split_chunks
from mixerzoo.ops.recompute import scan_in_segments, segment_length
from mixerzoo.ops.scan import diagonal_scan_chunk


def gla_step(q_t, k_t, v_t, log_alpha_t, state):
    """One position. q_t, k_t, log_alpha_t (b, h, e), v_t (b, h, f), state (b, h, e, f) -> (z_t, state)."""
    state = torch.exp(log_alpha_t).unsqueeze(-1) * state + k_t.unsqueeze(-1) * v_t.unsqueeze(-2)
    return torch.einsum("bhe,bhef->bhf", q_t, state), state


def gla_recurrent(q, k, v, log_alpha, initial=None):
    """Reference, one step per position -> (z (b, h, l, f), final state (b, h, e, f))."""
    b, h, _, e = q.shape
    state = q.new_zeros(b, h, e, v.shape[-1]) if initial is None else initial
    out = []
    for q_t, k_t, v_t, a_t in zip(q.unbind(2), k.unbind(2), v.unbind(2), log_alpha.unbind(2)):
        z_t, state = gla_step(q_t, k_t, v_t, a_t, state)
        out.append(z_t)
    return torch.stack(out, dim=2), state


def gla_chunk(q, k, v, log_alpha, chunk_size=16, initial=None):
    """Same result as :func:`gla_recurrent`, chunkwise (Yang et al. Sec. 4.2) -> (z, final state).

    Runs in segments of whole chunks recomputed in the backward pass (``ops/recompute.py``), so
    a training step does not store the (c, c, e) decay products and per-chunk (e, f) states.
    """
    b, h, l, e = q.shape
    f = v.shape[-1]
    c = max(1, min(chunk_size, l))
    segment = segment_length(c, b * h * (3 * c * e + 3 * e * f // c + 3 * e + 2 * f))
    return scan_in_segments(_gla_segment, (q, k, v, log_alpha), (c,), initial, segment, dim=2)


def _gla_segment(q, k, v, log_alpha, c, initial):
    """One segment from the state entering it, (b, h, e, f) or None (zero) -> (z, state after it)."""
    l = q.shape[2]
    qc, kc, vc, gc = (split_chunks(t, c) for t in (q, k, v, log_alpha))  # padded: decay 1, add 0
    cum = torch.cumsum(gc, dim=3)  # log decay from the chunk start through step i (inclusive)
    causal = torch.ones(c, c, dtype=torch.bool, device=q.device).tril()
    diff = (cum.unsqueeze(4) - cum.unsqueeze(3)).masked_fill(~causal[:, :, None], -math.inf)
    scores = (qc.unsqueeze(4) * torch.exp(diff) * kc.unsqueeze(3)).sum(-1)  # (b, h, n, c, c)
    inner = scores @ vc
    # Chunk n's own contribution to the state at its last step, and its total decay.
    last = cum[:, :, :, -1:]  # (b, h, n, 1, e)
    chunk_states = (kc * torch.exp(last - cum)).transpose(-1, -2) @ vc  # (b, h, n, e, f)
    log_a = last.transpose(-1, -2).transpose(1, 2)  # (b, n, h, e, 1)
    states, final = diagonal_scan_chunk(log_a, chunk_states.transpose(1, 2), initial=initial)
    zero = torch.zeros_like(states[:, :1]) if initial is None else initial.unsqueeze(1)
    entering = torch.cat([zero, states[:, :-1]], dim=1).transpose(1, 2)  # (b, h, n, e, f)
    cross = (qc * torch.exp(cum)) @ entering
    return (inner + cross).flatten(2, 3)[:, :, :l], final
