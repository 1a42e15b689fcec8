"""RWKV-4 time mixing (Peng et al. 2023, Sec. 3-4; paper 002 H.2.2 Alg. 5; paper 004 App. A.8, Eq. 62-67).

Token shift ``x'_t = mu ⊙ x_t + (1 - mu) ⊙ x_{t-1}`` (separate mu for k, v, r) feeds
``k, v, r = W_k x'^k, W_v x'^v, W_r x'^r``. Per channel, with log decay ``w = -exp(time_decay) < 0``
and bonus ``u``::

    wkv_t = (sum_{s<t} e^{(t-1-s) w + k_s} v_s + e^{u + k_t} v_t) / (same with v -> 1)   (004 Eq. 65)

and ``y_t = W_o (sigmoid(r_t) ⊙ wkv_t)``. Every exponential is evaluated relative to a running
maximum (the (aa, bb, pp) state of the reference CUDA kernel), so large keys never overflow.

Three evaluations of WKV give the same numbers: ``chunked`` (default; O(l * c * d): the c x c
terms inside a chunk plus the carried state, chunk states passed in l / c steps), ``sequential``
(one step per position, the reference), and the recurrent ``step``.
"""

from __future__ import annotations

import math
from typing import Literal

import torch
import torch.nn.functional as F
from pydantic import Field
from torch import nn

from mixerzoo.mixers import SEQUENCE_MIXERS
from mixerzoo.mixers.base import SequenceMixer
from mixerzoo.ops.heads import split_chunks
from mixerzoo.ops.recompute import scan_in_segments, segment_length

EMPTY_LOG = -1e38  # log-scale of an empty sum, as in the reference kernel (finite, so no inf - inf)


def wkv_step(k, v, w, u, state):
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


def empty_wkv_state(batch, d, device=None, dtype=None):
    zeros = torch.zeros(batch, d, device=device, dtype=dtype)
    return zeros, zeros.clone(), torch.full_like(zeros, EMPTY_LOG)


def sequential_wkv(k, v, w, u):
    """k, v: (b, l, d); w, u: (d,) -> wkv (b, l, d), one step per position."""
    state = empty_wkv_state(k.shape[0], k.shape[2], k.device, k.dtype)
    out = []
    for k_t, v_t in zip(k.unbind(1), v.unbind(1)):
        wkv, state = wkv_step(k_t, v_t, w, u, state)
        out.append(wkv)
    return torch.stack(out, dim=1)


def chunked_wkv(k, v, w, u, chunk_size=16):
    """Same as :func:`sequential_wkv` with l / c sequential steps.

    Runs in segments of whole chunks recomputed in the backward pass (``ops/recompute.py``): a
    training step stores O(l * d), not the (c, c) weights of every chunk and channel.
    """
    b, l, d = k.shape
    c = max(1, min(chunk_size, l))
    segment = segment_length(c, b * d * (4 * c + 8))
    y, _ = scan_in_segments(_wkv_segment, (k, v), (w, u, c), None, segment, dim=1)
    return y


def _wkv_segment(k, v, w, u, c, initial):
    """One segment from the (aa, bb, pp) state entering it (None: empty) -> (wkv, state after it).

    The state after the segment is exact when its length is a multiple of c (padded keys count).
    """
    b, l, d = k.shape
    # padded keys/values sit after every real position, so they change no real output
    kc, vc = split_chunks(k, c, dim=1), split_chunks(v, c, dim=1)  # (b, n, c, d)
    pos = torch.arange(c, device=k.device)

    # State entering each chunk, from per-chunk summaries of the keys: a chunk adds
    # sum_s e^{(c-1-s) w + k_s} v_s to the state at its last step and decays older content by e^{c w}.
    to_end = kc + (c - 1 - pos).to(k.dtype)[:, None] * w  # (b, n, c, d)
    local_max = to_end.max(dim=2).values.detach()
    weights = torch.exp(to_end - local_max.unsqueeze(2))
    local_num, local_den = (weights * vc).sum(2), weights.sum(2)
    aa, bb, pp = empty_wkv_state(b, d, k.device, k.dtype) if initial is None else initial
    entering = []
    for top, num_i, den_i in zip(local_max.unbind(1), local_num.unbind(1), local_den.unbind(1)):
        entering.append((aa, bb, pp))
        m = torch.maximum(pp + c * w, top).detach()  # any stabiliser is exact; no gradient through max
        e_prev, e_now = torch.exp(pp + c * w - m), torch.exp(top - m)
        aa, bb, pp = e_prev * aa + e_now * num_i, e_prev * bb + e_now * den_i, m
    final = (aa, bb, pp)
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
    return (num / den).transpose(2, 3).flatten(1, 2)[:, :l], final


@SEQUENCE_MIXERS.register("rwkv")
class RWKV(SequenceMixer):
    """RWKV-4 time mixing: token shift, WKV with per-channel decay and bonus, sigmoid receptance.

    Shapes: x (b, l, d) -> (b, l, d); WKV state (aa, bb, pp) each (b, d), plus the previous input
    (b, d) for the token shift. Parameters:
      * ``wkv`` ("chunked"): ``chunked`` or ``sequential`` (reference); both give the same result.
      * ``chunk_size`` (16): chunk length of the chunked WKV.
    Initialisation follows the RWKV-4 reference code for the first layer (decay speeds
    ``-5 + 8 (i / (d-1))^0.7``, bonus ``log 0.3`` plus a zigzag, mu_k = mu_v = i/d, mu_r = sqrt(i/d)).
    """

    recurrent = True
    examples = [{}, {"wkv": "sequential"}, {"chunk_size": 5}]

    class Params(SequenceMixer.Params):
        wkv: Literal["chunked", "sequential"] = Field("chunked", description="WKV implementation")
        chunk_size: int = Field(16, ge=1, description="chunk length of the chunked WKV")

    def __init__(self, d_model: int, max_len: int = 2048, **params) -> None:
        super().__init__(d_model, max_len, **params)
        d = d_model
        i = torch.arange(d, dtype=torch.float32)
        self.time_decay = nn.Parameter(-5 + 8 * (i / max(d - 1, 1)) ** 0.7)
        zigzag = ((i + 1) % 3 - 1) * 0.5
        self.time_first = nn.Parameter(torch.full((d,), math.log(0.3)) + zigzag)
        self.mix_k = nn.Parameter(i / d)
        self.mix_v = nn.Parameter(i / d)
        self.mix_r = nn.Parameter((i / d) ** 0.5)
        self.key = nn.Linear(d, d, bias=False)
        self.value = nn.Linear(d, d, bias=False)
        self.receptance = nn.Linear(d, d, bias=False)
        self.output = nn.Linear(d, d, bias=False)

    def project(self, x, x_prev):
        """x, x_prev: (..., d) -> k, v, r (..., d) from the token-shifted inputs."""
        k = self.key(x * self.mix_k + x_prev * (1 - self.mix_k))
        v = self.value(x * self.mix_v + x_prev * (1 - self.mix_v))
        r = self.receptance(x * self.mix_r + x_prev * (1 - self.mix_r))
        return k, v, r

    def forward(self, x, input_ids=None, rope=None):
        """x: (b, l, d) -> (b, l, d)."""
        k, v, r = self.project(x, F.pad(x, (0, 0, 1, -1)))  # x_{t-1}, zero before the start
        w = -torch.exp(self.time_decay)
        if self.p.wkv == "chunked":
            wkv = chunked_wkv(k, v, w, self.time_first, self.p.chunk_size)
        else:
            wkv = sequential_wkv(k, v, w, self.time_first)
        return self.output(torch.sigmoid(r) * wkv)

    def state_size(self) -> int:
        return 4 * self.d_model

    def init_state(self, batch, device=None, dtype=None):
        x_prev = torch.zeros(batch, self.d_model, device=device, dtype=dtype)
        return x_prev, empty_wkv_state(batch, self.d_model, device, dtype)

    def step(self, x_t, state):
        """x_t: (b, d) -> (y_t (b, d), (x_t, (aa, bb, pp)))."""
        x_prev, wkv_state = state
        k, v, r = self.project(x_t, x_prev)
        wkv, wkv_state = wkv_step(k, v, -torch.exp(self.time_decay), self.time_first, wkv_state)
        return self.output(torch.sigmoid(r) * wkv), (x_t, wkv_state)
