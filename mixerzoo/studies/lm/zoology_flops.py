"""Zoology's FLOPs accounting (App. C.2, Tables 8 and 10), as its Table 2 "TFLOPs" column counts them.

Names as in the paper: ``D`` model width, ``H`` head dimension, ``N`` sequence length, ``V``
vocabulary, batch ``B = 1``. Per sequence, a forward pass costs

* input layer and language-modelling head: ``V N D`` each;
* attention layer (Table 8): Q, K, V projections ``3 N D^2``; attention ``H H D + H N N + 2 N N D``;
  output projection ``N D^2``;
* BaseConv layer (Table 10): long convolution ``10 N log2(N) D/2``; short convolution ``N D/2``;
  implicit filter MLP ``D/2 x order``; linear projection ``N D^2``;
* channel mixer of FFN width ``w``: two ``N x D x wD`` products, ``2 w N D^2``;

and a training step three forward passes of two FLOPs per multiply-add: ``6 x`` the sum.

Two terms are read differently from Table 8 as printed, because the printed ones do not give
Table 2's numbers: its attention term counts ``N N D`` once (the scores ``Q K^T`` and their product
with ``V`` are one such product each), and its FFN of width 4 is ``D D 8 (2/3) N`` (a SwiGLU's).
As printed, the 360M attention model costs 4.81 TFLOPs, not Table 2's 6.23; with both ``N N D``
products and the width-4 MLP's ``8 N D^2`` it costs 6.25 (and the 125M one 2.48 vs 2.46). Table 10
as printed gives BaseConv's 4.81 at 354M, and the hybrid of 45 BaseConv layers and three attention
layers (with BaseConv's FFN of width 2) 5.10, as Table 2 does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

#: GPT-2's BPE vocabulary, Zoology's tokenizer (App. C)
GPT2_VOCAB = 50_257
#: training FLOPs per forward multiply-add: forward + backward (3 passes), 2 FLOPs each
TRAIN_FACTOR = 6


@dataclass(frozen=True)
class Layer:
    """One block: its sequence mixer (``attention`` or ``base_conv``), heads and FFN width."""

    mixer: str
    ffn_width: float
    heads: int = 1
    filter_order: int = 64


def layer_flops(layer: Layer, d: int, n: int) -> float:
    """Forward multiply-adds of one block on one sequence of ``n`` tokens at width ``d``."""
    if layer.mixer == "attention":
        h = d / layer.heads
        mixer = 3 * n * d * d + (h * h * d + h * n * n + 2 * n * n * d) + n * d * d
    elif layer.mixer == "base_conv":
        mixer = 10 * n * math.log2(n) * 0.5 * d + n * 0.5 * d + 0.5 * d * layer.filter_order + n * d * d
    else:
        raise ValueError(f"layer mixer {layer.mixer!r}: Zoology counts attention and base_conv")
    return mixer + 2 * layer.ffn_width * n * d * d


def training_flops(layers: list[Layer], d: int, n: int, vocab: int) -> float:
    """Training FLOPs per sequence of ``n`` tokens (Zoology Table 2's TFLOPs x 10^12)."""
    forward = 2 * vocab * n * d + sum(layer_flops(layer, d, n) for layer in layers)
    return TRAIN_FACTOR * forward
