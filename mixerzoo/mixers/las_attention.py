"""LaS attention: exponential local decay of the scores, then average pooling of each attention row.

LaS (Zimerman & Wolf), Sec. 4.1, Eq. (4), for head c:

    LaS_c(Q, K, V) = AP( SF( exp(-alpha_c D_L) (.) Q K^T / sqrt(d_k) ) ) V

``D_L`` is the distance matrix times the causal mask (``D_L[i, j] = i - j`` for j <= i, 0 above
the diagonal, where the causal mask then applies), ``(.)`` the element-wise product (the decay
multiplies the scores, Sec. 4.1 "element-wise multiplication ... with a non-learnable locally
decaying matrix"), SF the causal softmax and AP a 1-D average pooling of window P along each row,
padded to keep the l x l shape. Nothing here is trained: alpha_c are fixed buffers.

Design decisions, where the paper leaves room:
  * alpha_c initialisation (Sec. 4.1 "Initialization of alpha_c"): alpha_0 = 0 (one vanilla head),
    and ``exp(-alpha_c)`` evenly spaced from 1 down to ``exp(-B)`` over the h heads -- the text's
    "evenly spaced alpha_c in exponential space", "exp(-alpha_c) uniformly distributed", with
    alpha_c in [0, B]; B = ``decay_max`` (App. A Table 9 uses B = 0.001 or 0.0001).
  * Pooling and causality: pooling a row with a centred window moves weight from column j to
    columns j +- P/2, so the pooled row of query i would put weight on keys i+1, i+2 (the future).
    We zero-pad (PyTorch's ``AvgPool1d(count_include_pad=True)``: divide by P), pool, then zero
    every column j > i again. Rows then sum to slightly less than 1 near their ends, as the
    zero-padded pooling of Eq. 4 implies.
  * Order of softmax and pooling: Eq. 4 pools the probabilities (``pool_order="after_softmax"``,
    default); the paper's Fig. 1 draws pooling before the softmax (``"before_softmax"``: the
    decayed scores, with future entries set to 0 so they carry no future information, are pooled,
    then masked and normalised).
  * Variants (Sec. 5.2, Table 4): ``las`` (both), ``l`` (decay only, P = 1), ``s`` (pooling only,
    all alpha = 0), ``chunk`` (LaS-chunk, Sec. 5.1: both operators inside fixed blocks of
    ``chunk_size`` tokens, O(l * chunk_size) instead of O(l^2)).
  * ALiBi (``alibi=True``; Table 4's "cT+Smooth+ALiBi" row is ``variant="chunk"``,
    ``decay_max=0``, ``alibi=True``): the bias ``-m_c (i - j)`` of Press et al. (2022), with the
    slopes of ``attention.alibi_slopes`` (2^(-8c/h) for h a power of two), is added to the scaled,
    decayed scores, i.e. to the logits, as the ALiBi reference does (it adds the bias after
    ``q / sqrt(d)``); LaS Eq. (2) writes the bias inside ``/ sqrt(d_k)``, which is the same
    bias with slopes sqrt(d_k) times smaller. With ``before_softmax`` the biased logits are what is
    pooled. In the chunk variant the distance is counted inside each block, as in blocked
    attention with ALiBi (Table 4's cT+ALiBi row).
"""

from __future__ import annotations

import math
from typing import Literal

import torch
from pydantic import Field
from torch import nn

from mixerzoo.mixers import SEQUENCE_MIXERS
from mixerzoo.mixers.base import AT_MOST_MAX_LEN, SequenceMixer
from mixerzoo.ops.alibi import alibi_slopes
from mixerzoo.ops.heads import merge_heads, split_chunks, split_heads
from mixerzoo.ops.las import las_attention, las_weights


def las_alphas(h: int, decay_max: float) -> torch.Tensor:
    """alpha_c for c = 0..h-1: exp(-alpha_c) evenly spaced in [exp(-B), 1], alpha_0 = 0 (Sec. 4.1)."""
    if h == 1:
        return torch.zeros(1, dtype=torch.float64)
    return -torch.log(torch.linspace(1.0, math.exp(-decay_max), h, dtype=torch.float64))


@SEQUENCE_MIXERS.register("las_attention")
class LaSAttention(SequenceMixer):
    """Local and Smooth attention (LaS Eq. 4) and its L / S / chunk variants.

    Shapes: x (b, l, d) -> (b, l, d); the attention matrix is (b, h, l, l), or (b, h, l/c, c, c)
    for ``chunk``. Parameters:
      * ``num_heads`` (8): heads h (App. A: 8 heads in all experiments); head 0 is vanilla.
      * ``variant`` ("las"): ``las``, ``l`` (decay only), ``s`` (pooling only), ``chunk``.
      * ``decay_max`` (0.001): B, the largest decay rate alpha (App. A Table 9).
      * ``pool_size`` (3): pooling window P (App. A grid: 3 or 5).
      * ``pool_order`` ("after_softmax"): Eq. 4 order, or ``before_softmax`` (Fig. 1).
      * ``chunk_size`` (128): block length of the ``chunk`` variant (Sec. 5.1).
      * ``bias`` (True): biases on the projections.
      * ``alibi`` (False): add the ALiBi bias ``-m_c (i - j)`` to the logits (Table 4, Press et al.).
    """

    uses_positions = True

    examples = [
        {"num_heads": 4},
        {"num_heads": 2, "variant": "l", "decay_max": 0.5},
        {"num_heads": 2, "variant": "s", "pool_size": 5},
        {"num_heads": 4, "variant": "chunk", "chunk_size": 7, "decay_max": 0.3},
        {"num_heads": 4, "pool_order": "before_softmax", "decay_max": 0.3, "pool_size": 4},
        {"num_heads": 4, "variant": "chunk", "chunk_size": 7, "decay_max": 0.0, "alibi": True},
        {"num_heads": 2, "pool_order": "before_softmax", "decay_max": 0.3, "alibi": True},
    ]

    class Params(SequenceMixer.Params):
        num_heads: int = Field(8, ge=1, description="attention heads (head 0 has no decay)")
        variant: Literal["las", "l", "s", "chunk"] = Field("las", description="LaS variant")
        decay_max: float = Field(0.001, ge=0.0, description="B: alpha_c spans [0, B]")
        pool_size: int = Field(
            3, ge=1, json_schema_extra=AT_MOST_MAX_LEN, description="average pooling window P"
        )
        pool_order: Literal["after_softmax", "before_softmax"] = Field(
            "after_softmax", description="pool the probabilities (Eq. 4) or the scores (Fig. 1)"
        )
        chunk_size: int = Field(128, ge=1, description="block length of the chunk variant")
        bias: bool = Field(True, description="bias on projections")
        alibi: bool = Field(False, description="ALiBi linear distance bias on the logits (Press et al. 2022)")

    def __init__(self, d_model: int, max_len: int = 2048, **params) -> None:
        super().__init__(d_model, max_len, **params)
        h = self.p.num_heads
        self.check_divides("num_heads", h)
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=self.p.bias)
        self.out = nn.Linear(d_model, d_model, bias=self.p.bias)
        decay_max = 0.0 if self.p.variant == "s" else self.p.decay_max
        self.register_buffer("alphas", las_alphas(h, decay_max).float(), persistent=False)
        # max alpha_c = B (las_alphas), in Python: the module may be built on the meta device
        self.alpha_max = decay_max if h > 1 else 0.0
        self.pool = 1 if self.p.variant == "l" else self.p.pool_size
        slopes = alibi_slopes(h) if self.p.alibi else None
        self.register_buffer("alibi_slopes", slopes, persistent=False)

    def attention_weights(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        """q, k: (b, h, l, e) -> (b, h, l, l) weights (full variants) or (b, h, n, c, c) (chunk)."""
        if self.p.variant == "chunk":
            q, k = self.blocks(q), self.blocks(k)
        args = (self.alphas, self.pool, self.p.pool_order, self.alibi_slopes, self.alpha_max)
        return las_weights(q, k, *args)

    def blocks(self, t: torch.Tensor) -> torch.Tensor:
        """(b, h, l, e) -> (b, h, n, c, e), zero-padded at the end (padding is every query's future)."""
        return split_chunks(t, min(self.p.chunk_size, t.shape[2]))

    def forward(self, x, input_ids=None, rope=None):
        """x: (b, l, d) -> (b, l, d)."""
        b, l, _ = x.shape
        h = self.p.num_heads
        q, k, v = (split_heads(t, h) for t in self.qkv(x).chunk(3, dim=-1))
        if rope is not None:
            q, k = rope(q, k)
        if self.p.variant == "chunk":
            q, k, v = self.blocks(q), self.blocks(k), self.blocks(v)
        args = (self.alphas, self.pool, self.p.pool_order, self.alibi_slopes, self.alpha_max)
        y = las_attention(q, k, v, *args)
        if self.p.variant == "chunk":
            y = y.reshape(b, h, -1, y.shape[-1])[:, :, :l]
        return self.out(merge_heads(y))

    @torch.no_grad()
    def attention_map(self, x, input_ids=None, rope=None) -> torch.Tensor:
        """The weights (b, h, l, l) of ``forward`` on x (the chunk variant's blocks on the diagonal).

        Rows are the pooled causal softmax of Eq. 4: they sum to 1 without pooling (P = 1) and to
        slightly less near their ends with it (zero-padded pooling, see the module docstring).
        """
        l = x.shape[1]
        q, k, _ = (split_heads(t, self.p.num_heads) for t in self.qkv(x).chunk(3, dim=-1))
        if rope is not None:
            q, k = rope(q, k)
        w = self.attention_weights(q, k)
        if self.p.variant != "chunk":
            return w
        b, h, n, c, _ = w.shape
        full = w.new_zeros(b, h, n, c, n, c)
        blocks = torch.arange(n, device=x.device)
        full[:, :, blocks, :, blocks] = w.permute(2, 0, 1, 3, 4)
        return full.reshape(b, h, n * c, n * c)[:, :, :l, :l]
