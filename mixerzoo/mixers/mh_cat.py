"""MH-CAT: CAT whose multi-head convolution mixes the attention maps instead of the embeddings.

CAT Sec. 3.1, last paragraph, and Table 2 ("MH-CAT"): "we also examine multi-head
convolution where we mix the attention maps rather than embeddings". The paper gives no formula;
our reading follows from two facts of Sec. 3.1:

  * a causal filter on the keys is a filter along the key axis of the score map:
    ``q_t . (F * K)_s = sum_i F_i (q_t . k_{s-i}) = (F * S[t, :])_s``;
  * multi-head convolution uses ``F in R^{W x H x H}`` whose output head a mixes all heads
    (``out_a = sum_c F_ac * X_c``).

So MH-CAT convolves the stack of H per-head score maps along the key axis with an H x H x W
filter: ``S'_a[t, s] = sum_c sum_{i<W} F[a, c, i] S_c[t, s - i]`` (``S_c = Q_c K_c^T / sqrt(e)``,
S[t, s] = 0 for s < 0), then applies the causal mask and softmax per head. This is causal: entry
(t, s <= t) only reads entries (t, s - i) with s - i <= t. With ``maps="probabilities"`` the mixing
is applied to the softmax outputs instead (as "talking-heads" attention, Shazeer et al. 2020, mixes
after the softmax); entries above the diagonal are then zeroed again, since a shifted row would
otherwise place weight on future keys. The filter starts as the identity (F[a, a, 0] = 1) plus
small noise, so an untrained MH-CAT is close to ordinary multi-head attention.

Cost: O(h^2 w l^2) for the mixing on top of attention's O(h l^2 e); the maps are l x l per head
as in dense attention.
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
from mixerzoo.ops.heads import merge_heads, split_heads


def mix_maps(maps: torch.Tensor, filt: torch.Tensor) -> torch.Tensor:
    """maps: (b, h, l, l); filt (h_out, h_in, w), lag-indexed along the key axis -> (b, h_out, l, l)."""
    b, h, l, _ = maps.shape
    w = filt.shape[-1]
    rows = maps.permute(0, 2, 1, 3).reshape(b * l, h, l)  # one signal per (batch, query row)
    mixed = F.conv1d(F.pad(rows, (w - 1, 0)), filt.flip(-1))  # conv1d correlates: flip to lags
    return mixed.reshape(b, l, -1, l).permute(0, 2, 1, 3)


@SEQUENCE_MIXERS.register("mh_cat")
class MultiHeadMapCAT(SequenceMixer):
    """CAT with a head-mixing convolution of the attention maps (CAT Sec. 3.1, Table 2).

    Shapes: x (b, l, d) -> (b, l, d); maps (b, h, l, l); filter (h, h, w). Parameters:
      * ``num_heads`` (4): heads h (mixing needs h >= 2 to differ from a per-head key filter).
      * ``conv_width`` (3): filter length W along the key axis (Sec. 6.1 uses W = 3).
      * ``maps`` ("scores"): mix the pre-softmax ``scores`` or the post-softmax ``probabilities``.
      * ``bias`` (True): biases on the projections.
    """

    uses_positions = False  # as CAT: the convolution supplies local position

    examples = [
        {"num_heads": 2},
        {"num_heads": 4, "conv_width": 5},
        {"num_heads": 2, "maps": "probabilities"},
        {"num_heads": 1, "conv_width": 2},
    ]

    class Params(SequenceMixer.Params):
        num_heads: int = Field(4, ge=1, description="attention heads")
        conv_width: int = Field(3, ge=1, description="filter length W along the key axis")
        maps: Literal["scores", "probabilities"] = Field("scores", description="which maps are mixed")
        bias: bool = Field(True, description="bias on projections")

    def __init__(self, d_model: int, max_len: int = 2048, **params) -> None:
        super().__init__(d_model, max_len, **params)
        h, w = self.p.num_heads, self.p.conv_width
        self.check_divides("num_heads", h)
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=self.p.bias)
        self.out = nn.Linear(d_model, d_model, bias=self.p.bias)
        init = torch.empty(h, h, w).uniform_(-0.1, 0.1) / math.sqrt(h * w)
        init[:, :, 0] += torch.eye(h)
        self.filters = nn.Parameter(init)

    def attention_weights(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        """q, k: (b, h, l, e) -> mixed attention weights (b, h, l, l), zero above the diagonal."""
        l, e = q.shape[-2], q.shape[-1]
        future = torch.ones(l, l, dtype=torch.bool, device=q.device).triu(1)
        scores = q @ k.transpose(-1, -2) / math.sqrt(e)
        filt = self.filters.to(q.dtype)
        if self.p.maps == "scores":
            mixed = mix_maps(scores.masked_fill(future, 0.0), filt)
            return torch.softmax(mixed.masked_fill(future, float("-inf")), dim=-1)
        probs = torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1)
        return mix_maps(probs, filt).masked_fill(future, 0.0)

    def forward(self, x, input_ids=None, rope=None):
        """x: (b, l, d) -> (b, l, d)."""
        h = self.p.num_heads
        q, k, v = (split_heads(t, h) for t in self.qkv(x).chunk(3, dim=-1))
        if rope is not None:
            q, k = rope(q, k)
        return self.out(merge_heads(self.attention_weights(q, k) @ v))

    @torch.no_grad()
    def attention_map(self, x, input_ids=None, rope=None) -> torch.Tensor:
        """The mixed weights (b, h, l, l) of ``forward`` on x. ``maps = "scores"``: softmax rows
        (sum 1); ``"probabilities"``: head mixtures of softmax rows, which need not sum to 1."""
        q, k, _ = (split_heads(t, self.p.num_heads) for t in self.qkv(x).chunk(3, dim=-1))
        if rope is not None:
            q, k = rope(q, k)
        return self.attention_weights(q, k)
