"""State-space duality (SSD): Mamba-2's scalar-decay SSM (Dao & Gu 2024, "Transformers are SSMs").

Shapes: ``x`` (b, l, h, p) -- h heads of head width p; ``dt`` (b, l, h) step sizes (after the
softplus); ``a`` (h,) negative; ``B``, ``C`` (b, l, n) shared by every head (one group, the
multi-input / multi-value pattern of Sec. 7.2); state ``H`` (b, h, p, n). Per head, with the
scalar decay ``exp(dt_t a)`` (the SSD restriction A_t = a_t I of Sec. 3 / Sec. 6):

    H_t = exp(dt_t a) H_{t-1} + (dt_t x_t) B_t^T,      y_t = H_t C_t.

:func:`ssd_recurrent` is the recurrent reference (one step per position, Sec. 3.1).
:func:`ssd_chunk` is the SSD algorithm of Sec. 6 (the paper's Listing 1): inside a chunk of
``c`` steps the quadratic (attention-like) form ``Y = (L ∘ C B^T) (dt x)`` with the 1-semiseparable
mask ``L_ij = exp(segsum(dt a)_ij)`` (only ``j <= i`` is exponentiated, so every exponent is
<= 0); each chunk's own final state; the states passed between chunks with the chunks' total
decays (``ops/scan.py``); and each chunk's outputs from the state entering it. O(l (c + p n / c))
per head: linear in l.
"""

from __future__ import annotations

import math

import torch

from mixerzoo.ops.heads import split_chunks
from mixerzoo.ops.recompute import scan_in_segments, segment_length
from mixerzoo.ops.scan import diagonal_scan_chunk


def segment_sums(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Stable segment sums (the paper's ``segsum``, Sec. 6 Listing 1) along ``dim`` of length c.

    x (..., c, ...) -> (..., c, c, ...) with the two new axes at ``dim`` (i) and ``dim + 1`` (j):
    ``out[i, j] = sum_{s=j+1..i} x_s`` for j <= i and -inf for j > i. Each entry sums only its
    own terms (a masked cumulative sum), not a difference of two long prefix sums, so it keeps
    full precision where the decays are strong.
    """
    dim = dim % x.ndim
    x = x.movedim(dim, -1)
    c = x.shape[-1]
    causal = torch.ones(c, c, dtype=torch.bool, device=x.device).tril()  # j <= i
    terms = x.unsqueeze(-1).expand(*x.shape, c).masked_fill(~causal.tril(-1), 0.0)  # [..., s, j]: s > j
    sums = torch.cumsum(terms, dim=-2).masked_fill(~causal, -math.inf)  # [..., i, j]
    return sums.movedim(-1, dim).movedim(-1, dim)


def ssd_recurrent(x, dt, a, b, c, initial=None):
    """Reference recurrence, one step per position -> (y (b, l, h, p), final state (b, h, p, n))."""
    batch, _, h, p = x.shape
    state = x.new_zeros(batch, h, p, b.shape[-1]) if initial is None else initial
    ys = []
    for x_t, dt_t, b_t, c_t in zip(x.unbind(1), dt.unbind(1), b.unbind(1), c.unbind(1)):
        decay = torch.exp(dt_t * a)[..., None, None]  # (b, h, 1, 1)
        state = decay * state + (dt_t.unsqueeze(-1) * x_t).unsqueeze(-1) * b_t[:, None, None, :]
        ys.append(torch.einsum("bhpn,bn->bhp", state, c_t))
    return torch.stack(ys, dim=1), state


def ssd_chunk(x, dt, a, b, c, chunk_size: int = 64, initial=None):
    """Same result as :func:`ssd_recurrent`, chunked (Sec. 6) -> (y (b, l, h, p), final state).

    Runs in segments of whole chunks recomputed in the backward pass (``ops/recompute.py``), so
    a training step stores the inputs, not the (c, c) masks and (p, n) states of every chunk.
    """
    batch, l, h, p = x.shape
    n = b.shape[-1]
    cs = max(1, min(chunk_size, l))
    # per step of a segment: h * c mask entries and scores, 2 (p, n) chunk states / c, the inputs
    per_step = batch * (h * cs + cs + 2 * h * p * n // cs + 3 * h * p + 2 * n + 2 * h)
    segment = segment_length(cs, per_step)
    return scan_in_segments(_ssd_segment, (x, dt, b, c), (a, cs), initial, segment, dim=1)


def _ssd_segment(x, dt, b, c, a, cs, initial):
    """One segment from the (b, h, p, n) state entering it (None: zero) -> (y, state after it)."""
    l = x.shape[1]
    # padded steps have dt = 0: decay 1 and input 0, so the final state is unchanged
    x, dt, b, c = (split_chunks(t, cs, dim=1) for t in (x, dt, b, c))  # (b, k, cs, ...) k chunks
    log_decay = dt * a  # (b, k, cs, h), <= 0
    cum = torch.cumsum(log_decay, dim=2)  # log decay from the chunk start through step i
    dtx = dt.unsqueeze(-1) * x  # (b, k, cs, h, p)

    # Sec. 6 step 1 (diagonal blocks): Y = (L ∘ C B^T) dtx, L_ij = exp(cum_i - cum_j) for j <= i.
    segsum = segment_sums(log_decay, dim=2)  # (b, k, cs, cs, h): sum of log decays j+1..i
    mask = torch.exp(segsum).permute(0, 1, 4, 2, 3)  # (b, k, h, cs, cs)
    scores = torch.einsum("bkin,bkjn->bkij", c, b)  # shared by the heads
    y = torch.einsum("bkhij,bkij,bkjhp->bkihp", mask, scores, dtx)

    # Step 2: each chunk's own state at its end, H = sum_j exp(cum_last - cum_j) dtx_j B_j^T.
    to_end = torch.exp(segsum[:, :, -1])  # (b, k, cs, h): decay from step j to the chunk end
    chunk_states = torch.einsum("bkjh,bkjhp,bkjn->bkhpn", to_end, dtx, b)

    # Step 3: pass the states across chunk boundaries with each chunk's total decay.
    chunk_log_decay = cum[:, :, -1, :, None, None]  # (b, k, h, 1, 1)
    states, final = diagonal_scan_chunk(chunk_log_decay, chunk_states, initial=initial)
    zero = torch.zeros_like(states[:, :1]) if initial is None else initial.unsqueeze(1)
    entering = torch.cat([zero, states[:, :-1]], dim=1)  # (b, k, h, p, n)

    # Step 4 (off-diagonal blocks): the entering state read by C, decayed to step i.
    y = y + torch.einsum("bkhpn,bkin,bkih->bkihp", entering, c, torch.exp(cum))
    return y.flatten(1, 2)[:, :l], final
