"""Causal multi-head softmax attention (Vaswani et al. 2017), via ``scaled_dot_product_attention``.

Zoology's synthetic runs use 1 head with learned absolute positions (paper 002 App. E.2).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from einops import rearrange
from pydantic import Field
from torch import nn

from mixerzoo.mixers import SEQUENCE_MIXERS
from mixerzoo.mixers.base import SequenceMixer


def split_heads(x: torch.Tensor, h: int) -> torch.Tensor:
    """(b, l, h*e) -> (b, h, l, e)."""
    return rearrange(x, "b l (h e) -> b h l e", h=h)


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """(b, h, l, e) -> (b, l, h*e)."""
    return rearrange(x, "b h l e -> b l (h e)")


@SEQUENCE_MIXERS.register("attention")
class Attention(SequenceMixer):
    """Causal multi-head softmax attention.

    Shapes: x (b, l, d) -> (b, l, d). Parameters:
      * ``num_heads`` (1): heads h; ``d_model`` must be divisible by h.
      * ``bias`` (True): biases on the q/k/v and output projections.
      * ``dropout`` (0.0): attention-probability dropout (training only).
    """

    uses_positions = True

    examples = [{}, {"num_heads": 2}]

    class Params(SequenceMixer.Params):
        num_heads: int = Field(1, ge=1, description="attention heads")
        bias: bool = Field(True, description="bias on projections")
        dropout: float = Field(0.0, ge=0.0, lt=1.0, description="attention dropout")

    def __init__(self, d_model: int, max_len: int = 2048, **params) -> None:
        super().__init__(d_model, max_len, **params)
        h = self.p.num_heads
        if d_model % h:
            from mixerzoo.registry import ConfigError

            raise ConfigError(f"mixer[attention].num_heads = {h}: must divide d_model = {d_model}")
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=self.p.bias)
        self.out = nn.Linear(d_model, d_model, bias=self.p.bias)

    def forward(self, x, input_ids=None, rope=None):
        """x: (b, l, d) -> (b, l, d)."""
        h = self.p.num_heads
        q, k, v = (split_heads(t, h) for t in self.qkv(x).chunk(3, dim=-1))
        if rope is not None:
            q, k = rope(q, k)
        drop = self.p.dropout if self.training else 0.0
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=drop)
        return self.out(merge_heads(y))
