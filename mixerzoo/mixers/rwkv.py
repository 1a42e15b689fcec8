"""RWKV-4 time mixing (Peng et al. 2023, Sec. 3-4; Zoology H.2.2 Alg. 5; ICLL App. A.8, Eq. 62-67).

Token shift ``x'_t = mu ⊙ x_t + (1 - mu) ⊙ x_{t-1}`` (separate mu for k, v, r) feeds
``k, v, r = W_k x'^k, W_v x'^v, W_r x'^r``. Per channel, with log decay ``w = -exp(time_decay) < 0``
and bonus ``u``::

    wkv_t = (sum_{s<t} e^{(t-1-s) w + k_s} v_s + e^{u + k_t} v_t) / (same with v -> 1)   (ICLL Eq. 65)

and ``y_t = W_o (sigmoid(r_t) ⊙ wkv_t)``. WKV is ``ops/wkv4.py``: ``wkv = "chunked"`` runs
:func:`wkv4_chunk` (O(l * c * d)), ``"sequential"`` the reference :func:`wkv4_recurrent`, and the
recurrent ``step`` :func:`wkv4_step`; all give the same numbers.
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
from mixerzoo.ops.wkv4 import wkv4_chunk, wkv4_empty_state, wkv4_recurrent, wkv4_step


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
            wkv, _ = wkv4_chunk(k, v, w, self.time_first, self.p.chunk_size)
        else:
            wkv, _ = wkv4_recurrent(k, v, w, self.time_first)
        return self.output(torch.sigmoid(r) * wkv)

    def state_size(self) -> int:
        return 4 * self.d_model

    def init_state(self, batch, device=None, dtype=None):
        x_prev = torch.zeros(batch, self.d_model, device=device, dtype=dtype)
        return x_prev, wkv4_empty_state(batch, self.d_model, device, dtype)

    def step(self, x_t, state):
        """x_t: (b, d) -> (y_t (b, d), (x_t, (aa, bb, pp)))."""
        x_prev, wkv_state = state
        k, v, r = self.project(x_t, x_prev)
        wkv, wkv_state = wkv4_step(k, v, -torch.exp(self.time_decay), self.time_first, wkv_state)
        return self.output(torch.sigmoid(r) * wkv), (x_t, wkv_state)
