"""LinCAT: CAT with linear attention in place of softmax (CAT Sec. 6.1)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from mixerzoo.mixers import SEQUENCE_MIXERS
from mixerzoo.mixers.cat import CAT


@SEQUENCE_MIXERS.register("lincat")
class LinCAT(CAT):
    """CAT whose attention is causal linear attention with the elu+1 feature map (CAT Sec. 6.1).

    Shapes: x (b, l, d) -> (b, l, d). Parameters as ``cat``; ``attention`` defaults to ``linear``.
    Runs in O(l) time through the chunked linear-attention kernel.
    """

    examples = [{}, {"num_heads": 2, "conv_type": "multi_head"}]

    class Params(CAT.Params):
        attention: Literal["softmax", "linear"] = Field("linear", description="attention kind")
