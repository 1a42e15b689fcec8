"""Diagonal linear recurrences ``h_t = a_t ⊙ h_{t-1} + b_t``: recurrent references and chunked scans.

Layout: time-major, length on axis 1. Diagonal scan: ``log_a`` and ``b`` (b, l, *rest) with
``log_a = log a_t <= 0`` (decays in (0, 1]), broadcastable to each other; the state ``h`` is
(b, *rest). Selective scan (Mamba; Gu & Dao 2023, Alg. 2): ``u, delta`` (bt, l, D), ``a``
(D, n), ``B, C`` (bt, l, n), state (bt, D, n). The chunk-to-chunk state passing of GLA, SSD and
RWKV-6 is a diagonal scan too. Forms: ``diagonal_scan_recurrent`` / ``_chunk``,
``selective_scan_recurrent`` / ``_chunk``.

The chunked scan splits the length into chunks of ``c`` steps. Inside a chunk it runs the
recurrence from a zero state for all chunks at once (``c`` vectorised steps); the decay from
the chunk start is a chunk-local cumulative sum of ``log a`` (only non-positive exponents, so
it never overflows); the states entering the chunks are then passed along the ``l / c`` chunk
boundaries. Work is O(l * |rest|) and the number of sequential steps ``c + l / c``.
"""

from __future__ import annotations

import torch

from mixerzoo.ops.heads import split_chunks
from mixerzoo.ops.recompute import scan_in_segments, segment_length


def diagonal_scan_recurrent(
    log_a: torch.Tensor, b: torch.Tensor, initial: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Reference: one step per position. Returns (all states (b, l, *rest), final state (b, *rest))."""
    h = torch.zeros_like(b[:, 0]) if initial is None else initial
    states = []
    # unbind rather than a[:, t]: unbind backpropagates as one stack, while each index would
    # backpropagate as a zero tensor of the full size (quadratic time over the loop)
    for a_t, b_t in zip(torch.exp(log_a).expand_as(b).unbind(1), b.unbind(1)):
        h = a_t * h + b_t
        states.append(h)
    return torch.stack(states, dim=1), h


def diagonal_scan_chunk(
    log_a: torch.Tensor, b: torch.Tensor, chunk_size: int = 64, initial: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Same result as :func:`diagonal_scan_recurrent` in ``c + l / c`` sequential steps.

    ``log_a`` keeps its broadcast shape (e.g. one decay per head for RetNet, (h, e, 1) for GLA):
    only its length axis is expanded, so decays cost O(l * |log_a's rest|), not O(l * |rest|).
    """
    batch, l = b.shape[:2]
    log_a = log_a.expand(log_a.shape[0], l, *log_a.shape[2:])
    c = max(1, min(chunk_size, l))
    # padded steps decay by 1 and add 0, so they leave the final state unchanged
    log_a, b = split_chunks(log_a, c, dim=1), split_chunks(b, c, dim=1)  # (batch, n, c, *rest)
    a = torch.exp(log_a)

    # Within each chunk, from a zero state (all chunks advance together).
    h = torch.zeros_like(b[:, :, 0])
    local = []
    for a_j, b_j in zip(a.unbind(2), b.unbind(2)):  # unbind: see diagonal_scan_recurrent
        h = a_j * h + b_j
        local.append(h)
    local_states = torch.stack(local, dim=2)  # (batch, n, c, *rest)
    # Decay from the chunk start through step j: a chunk-local cumulative sum in log space.
    decay_from_start = torch.exp(torch.cumsum(log_a, dim=2))

    # Pass states across chunk boundaries: entering_{i+1} = decay_i * entering_i + local_i[-1].
    carry = torch.zeros_like(b[:, 0, 0]) if initial is None else initial
    entering = []
    chunk_decays, chunk_states = decay_from_start[:, :, -1].unbind(1), local_states[:, :, -1].unbind(1)
    for chunk_decay, chunk_state in zip(chunk_decays, chunk_states):
        entering.append(carry)
        carry = chunk_decay * carry + chunk_state
    entering_states = torch.stack(entering, dim=1).unsqueeze(2)  # (batch, n, 1, *rest)

    states = local_states + decay_from_start * entering_states
    return states.flatten(1, 2)[:, :l], carry


def selective_scan_recurrent(u, delta, a, b, c, initial=None):
    """Reference selective scan (Gu & Dao 2023, Alg. 2), one step per position.

    u, delta: (bt, l, D); a: (D, n) (negative); b, c: (bt, l, n); state h (bt, D, n) with
    ``h_t = exp(delta_t a) ⊙ h_{t-1} + delta_t u_t b_t`` and ``y_t = h_t c_t`` (contracting n).
    Returns (y (bt, l, D), final state h (bt, D, n)).
    """
    h = u.new_zeros(u.shape[0], u.shape[2], a.shape[1]) if initial is None else initial
    ys = []
    for u_t, delta_t, b_t, c_t in zip(u.unbind(1), delta.unbind(1), b.unbind(1), c.unbind(1)):
        h = torch.exp(delta_t.unsqueeze(-1) * a) * h + (delta_t * u_t).unsqueeze(-1) * b_t.unsqueeze(1)
        ys.append(torch.einsum("bdn,bn->bd", h, c_t))
    return torch.stack(ys, dim=1), h


def selective_scan_chunk(u, delta, a, b, c, chunk_size: int = 64, initial=None):
    """Same result as :func:`selective_scan_recurrent` in ``2c + l / c`` vectorised steps per segment.

    The (bt, l, D, n) decays and states are never built for the whole length: segments of whole
    chunks run one after the other, carrying the (bt, D, n) state, and are recomputed in the
    backward pass (``ops/recompute.py``), so a training step stores O(l * (D + n)), not O(l * D * n).
    """
    bt, l, d = u.shape
    cs = max(1, min(chunk_size, l))
    segment = segment_length(cs, 4 * bt * d * a.shape[1])  # ~4 (D, n) tensors per step of a segment
    return scan_in_segments(_selective_scan_segment, (u, delta, b, c), (a, cs), initial, segment, dim=1)


def _selective_scan_segment(u, delta, b, c, a, cs, initial):
    """One segment of :func:`selective_scan_chunk` from state ``initial`` (bt, D, n) or None.

    Inside each chunk the recurrence runs from a zero state for all chunks at once; the decay
    from the chunk start is ``exp(a * cumsum(delta))``, a chunk-local cumulative sum in log space.
    Each step forms the (bt, l / c, D, n) decays and inputs of one position of every chunk only.
    """
    bt, l, d = u.shape
    # delta = 0 decays by 1 and adds 0: padded steps change neither outputs nor the final state
    u, delta, b, c = (split_chunks(t, cs, dim=1) for t in (u, delta, b, c))  # (bt, n, cs, ·)
    du = delta * u

    h = u.new_zeros(bt, u.shape[1], d, a.shape[1])
    local = []
    for delta_j, du_j, b_j in zip(delta.unbind(2), du.unbind(2), b.unbind(2)):
        h = torch.exp(delta_j.unsqueeze(-1) * a) * h + du_j.unsqueeze(-1) * b_j.unsqueeze(2)
        local.append(h)

    cum = torch.cumsum(delta, dim=2)  # (bt, n, cs, D): log decay from the chunk start is cum * a
    carry = h.new_zeros(bt, d, a.shape[1]) if initial is None else initial
    entering = []
    for total, end_state in zip(cum[:, :, -1].unbind(1), h.unbind(1)):
        entering.append(carry)
        carry = torch.exp(total.unsqueeze(-1) * a) * carry + end_state
    entering_states = torch.stack(entering, dim=1)  # (bt, n, D, n_state)

    ys = []
    for h_j, cum_j, c_j in zip(local, cum.unbind(2), c.unbind(2)):
        h_j = h_j + torch.exp(cum_j.unsqueeze(-1) * a) * entering_states
        ys.append(torch.einsum("bkdn,bkn->bkd", h_j, c_j))
    return torch.stack(ys, dim=2).flatten(1, 2)[:, :l], carry
