"""RWKV-4's WKV (Peng et al. 2023, Sec. 3-4; ICLL App. A.8, Eq. 62-67): per-channel decay and bonus.

Shapes: ``b`` batch, ``l`` length, ``d`` channels, ``n`` chunks of ``c`` steps. Inputs ``k, v``
(b, l, d); ``w`` (d,) the log decay, < 0; ``u`` (d,) the bonus of the current key. Output
(b, l, d). Per channel::

    wkv_t = (sum_{s<t} e^{(t-1-s) w + k_s} v_s + e^{u + k_t} v_t) / (same with v -> 1)   (ICLL Eq. 65)

The state is ``(aa, bb, pp)``, each (b, d): the numerator and denominator sums of the past are
``(aa, bb) * e^pp``. Every exponential is taken relative to a running maximum, as in the
reference CUDA kernel, so large keys never overflow.

Forms: :func:`wkv4_recurrent` one step per position (the reference); :func:`wkv4_chunk` the
c x c terms inside a chunk plus the carried state, states passed in l / c steps, O(l c d);
:func:`wkv4_step` one position (the layer's recurrent step).
"""

from __future__ import annotations

import math

import torch

from mixerzoo.ops.heads import split_chunks
from mixerzoo.ops.recompute import scan_in_segments, segment_length

EMPTY_LOG = -1e38  # log-scale of an empty sum, as in the reference kernel (finite, so no inf - inf)


def wkv4_step(k, v, w, u, state):
    """One position. k, v: (b, d); state (aa, bb, pp) with sums = (aa, bb) * e^pp -> (wkv, new state)."""
    aa, bb, pp = state
    bonus = u + k
    m = torch.maximum(pp, bonus)
    e_prev, e_now = torch.exp(pp - m), torch.exp(bonus - m)
    wkv = (e_prev * aa + e_now * v) / (e_prev * bb + e_now)
    decayed = pp + w
    m = torch.maximum(decayed, k)
    e_prev, e_now = torch.exp(decayed - m), torch.exp(k - m)
    return wkv, (e_prev * aa + e_now * v, e_prev * bb + e_now, m)


def wkv4_empty_state(batch, d, device=None, dtype=None):
    """The state before the first position: empty sums (aa = bb = 0, pp = EMPTY_LOG), each (b, d)."""
    zeros = torch.zeros(batch, d, device=device, dtype=dtype)
    return zeros, zeros.clone(), torch.full_like(zeros, EMPTY_LOG)


def wkv4_recurrent(k, v, w, u, initial=None):
    """Reference, one step per position -> (wkv (b, l, d), final state (aa, bb, pp))."""
    state = wkv4_empty_state(k.shape[0], k.shape[2], k.device, k.dtype) if initial is None else initial
    out = []
    for k_t, v_t in zip(k.unbind(1), v.unbind(1)):
        wkv, state = wkv4_step(k_t, v_t, w, u, state)
        out.append(wkv)
    return torch.stack(out, dim=1), state


def wkv4_chunk(k, v, w, u, chunk_size=16, initial=None):
    """Same result as :func:`wkv4_recurrent` with l / c sequential steps -> (wkv, final state).

    Runs in segments of whole chunks recomputed in the backward pass (``ops/recompute.py``): a
    training step stores O(l * d), not the (c, c) weights of every chunk and channel.
    """
    b, l, d = k.shape
    c = max(1, min(chunk_size, l))
    segment = segment_length(c, b * d * (4 * c + 8))
    return scan_in_segments(_wkv4_segment, (k, v), (w, u, c), initial, segment, dim=1)


def _summaries(kc, vc, w, steps):
    """A chunk's keys summed to its last step ``steps - 1``: (top, num, den), num / den = sums * e^-top.

    A chunk adds ``sum_s e^{(steps-1-s) w + k_s} v_s`` to the state at its last step.
    """
    pos = torch.arange(steps, device=kc.device)
    to_end = kc + (steps - 1 - pos).to(kc.dtype)[:, None] * w  # (b, n, c, d)
    top = to_end.max(dim=2).values.detach()
    weights = torch.exp(to_end - top.unsqueeze(2))
    return top, (weights * vc).sum(2), weights.sum(2)


def _absorb(state, top, num, den, log_decay):
    """The state after a block whose summaries are (top, num, den); older content decays by e^log_decay."""
    aa, bb, pp = state
    m = torch.maximum(pp + log_decay, top).detach()  # any stabiliser is exact; no gradient through max
    e_prev, e_now = torch.exp(pp + log_decay - m), torch.exp(top - m)
    return e_prev * aa + e_now * num, e_prev * bb + e_now * den, m


def _wkv4_segment(k, v, w, u, c, initial):
    """One segment from the (aa, bb, pp) state entering it (None: empty) -> (wkv, state after it)."""
    b, l, d = k.shape
    # padded keys/values sit after every real position, so they change no real output
    kc, vc = split_chunks(k, c, dim=1), split_chunks(v, c, dim=1)  # (b, n, c, d)
    pos = torch.arange(c, device=k.device)

    # State entering each chunk, from per-chunk summaries of the keys.
    state = wkv4_empty_state(b, d, k.device, k.dtype) if initial is None else initial
    entering = []
    for summary in zip(*(t.unbind(1) for t in _summaries(kc, vc, w, c))):
        entering.append(state)
        state = _absorb(state, *summary, c * w)
    ragged = l - (kc.shape[1] - 1) * c  # real steps of the last chunk
    if ragged < c:  # its padded steps must not decay the state it leaves
        last = _summaries(kc[:, -1:, :ragged], vc[:, -1:, :ragged], w, ragged)
        state = _absorb(entering[-1], *(t.squeeze(1) for t in last), ragged * w)
    aa, bb, pp = (torch.stack(t, dim=1).unsqueeze(-1) for t in zip(*entering))  # (b, n, d, 1)

    # Inside a chunk, channels first (b, n, d, t, s) so the sums over keys s run along the last axis.
    k_t, v_t = kc.transpose(2, 3), vc.transpose(2, 3)  # (b, n, d, c)
    lag = (pos[:, None] - 1 - pos[None, :]).to(k.dtype)  # t - 1 - s
    past = torch.where(lag >= 0, lag * w[:, None, None], -math.inf)  # (d, t, s): only keys s < t
    logits = k_t.unsqueeze(3) + past  # (t-1-s) w + k_s
    bonus = u[:, None] + k_t  # the current key, with bonus u instead of decay
    state_logit = pp + pos.to(k.dtype) * w[:, None]  # the entering state decays by e^{t w} to step t
    m = torch.maximum(torch.maximum(logits.amax(-1), bonus), state_logit).detach()
    e_past = torch.exp(logits - m.unsqueeze(-1))
    e_bonus, e_state = torch.exp(bonus - m), torch.exp(state_logit - m)
    num = (e_past * v_t.unsqueeze(3)).sum(-1) + e_bonus * v_t + e_state * aa
    den = e_past.sum(-1) + e_bonus + e_state * bb
    return (num / den).transpose(2, 3).flatten(1, 2)[:, :l], state
