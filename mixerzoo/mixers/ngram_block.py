"""The n-gram block and NGH_m^(1,2,3) bundles (ICLL Sec. 6, App. F Fig. 8).

An n-gram block is a whole pre-norm residual sub-block, as in Fig. 8::

    x = x + NGH^n(RMSNorm(x))
    x = x + MLP(RMSNorm(x))        # MLP: Linear(d, d) -> SiLU -> Linear(d, d)

so it carries its own residual connections (like BaseConv's ``inner_residual``): one NGH^n plus
MLP is 4 d^2 weights (Sec. 6 "Language Modeling"). Sec. 6 inserts "a sequence of three NGH heads
with increasing context size [NGH^1, NGH^2, NGH^3] sequentially" and counts "three NGH layers
(12 d^2)", so a bundle NGH_m^(1,2,3) here is three n-gram blocks in sequence (orders 1, 2, 3),
not one block with three heads. ``mlp=False`` gives the bare residual NGH layers of the ICLL
experiments (Table 1), which the paper describes without the MLP.

:func:`insert_ngram_bundles` places bundles between a backbone's blocks: after layer m, counted
from the input for m >= 0 and from the output for m < 0 (NGH_{-2} leaves two original layers
above it), i.e. Python's ``list.insert(m, ...)`` position.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import Field
from torch import nn

from mixerzoo.mixers import SEQUENCE_MIXERS
from mixerzoo.mixers.base import AT_MOST_MAX_LEN, SequenceMixer
from mixerzoo.mixers.ngram_head import NgramHead
from mixerzoo.params import MAX_REPEATS
from mixerzoo.registry import ConfigError


@SEQUENCE_MIXERS.register("ngram_block")
class NgramBlock(SequenceMixer):
    """RMSNorm + NGH^n + RMSNorm + MLP with residuals (ICLL App. F Fig. 8).

    Shapes: x (b, l, d), input_ids (b, l) -> (b, l, d), the residual stream *after* the block.
    Used as a model ``mixer`` it is additionally wrapped in the backbone's pre-norm residual
    block; the ``ngram_heads`` model option inserts it bare, as the paper does. Parameters:
      * ``order`` (1): n of the n-gram head (1 = induction head).
      * ``mlp`` (True): the RMSNorm + MLP half of Fig. 8.
      * ``mlp_hidden_mult`` (1.0): MLP hidden width / d (Fig. 8: ``mlp_hidden = d_model``).
      * ``eps`` (1e-5): RMSNorm epsilon (Fig. 8).
    """

    needs_input_ids = True
    examples = [{}, {"order": 3}, {"order": 2, "mlp": False}]

    class Params(SequenceMixer.Params):
        order: int = Field(
            1,
            ge=1,
            le=MAX_REPEATS,
            json_schema_extra=AT_MOST_MAX_LEN,
            description="n: tokens matched by the n-gram head",
        )
        mlp: bool = Field(True, description="add the RMSNorm + MLP half of the block (Fig. 8)")
        mlp_hidden_mult: float = Field(1.0, gt=0, description="MLP hidden width / d_model")
        eps: float = Field(1e-5, gt=0, description="RMSNorm epsilon")

    def __init__(self, d_model: int, max_len: int = 2048, **params) -> None:
        super().__init__(d_model, max_len, **params)
        p = self.p
        self.norm1 = nn.RMSNorm(d_model, eps=p.eps)
        self.head = NgramHead(d_model, max_len, order=p.order)
        if p.mlp:
            hidden = max(1, int(round(p.mlp_hidden_mult * d_model)))
            self.norm2 = nn.RMSNorm(d_model, eps=p.eps)
            self.mlp = nn.Sequential(nn.Linear(d_model, hidden), nn.SiLU(), nn.Linear(hidden, d_model))

    def forward(self, x, input_ids=None, rope=None):
        """x: (b, l, d), input_ids: (b, l) -> (b, l, d)."""
        x = x + self.head(self.norm1(x), input_ids=input_ids)
        if self.p.mlp:
            x = x + self.mlp(self.norm2(x))
        return x


class NgramBundleLayer(nn.Module):
    """One n-gram block placed directly in a backbone's block list (no extra norm or residual).

    Exposes ``mixer`` (and ``state_mixer = None``) like the backbone's ``Block`` so code that
    inspects ``model.blocks`` treats it uniformly.
    """

    def __init__(self, d_model: int, max_len: int, order: int, mlp: bool) -> None:
        super().__init__()
        self.mixer = NgramBlock(d_model, max_len, order=order, mlp=mlp)
        self.state_mixer = None

    def forward(self, x, input_ids=None, rope=None):
        return self.mixer(x, input_ids=input_ids)


def insert_ngram_bundles(
    blocks: Sequence[nn.Module], bundles: Sequence[Any], d_model: int, max_len: int
) -> nn.ModuleList:
    """Blocks with NGH_m^(orders) bundles inserted (ICLL Sec. 6).

    ``bundles``: items with ``after_layer`` (m), ``orders`` (e.g. [1, 2, 3]) and ``mlp``; a bundle
    is one :class:`NgramBundleLayer` per order, in the listed order. Several bundles at the same m
    keep their listed order.
    """
    n = len(blocks)
    at: dict[int, list[nn.Module]] = {}
    for spec in bundles:
        m = spec.after_layer
        if not -n <= m <= n:
            raise ConfigError(f"model.ngram_heads.after_layer = {m}: must lie in [-{n}, {n}] (n_layers)")
        pos = m if m >= 0 else n + m
        at.setdefault(pos, []).extend(NgramBundleLayer(d_model, max_len, o, spec.mlp) for o in spec.orders)
    out: list[nn.Module] = []
    for i in range(n + 1):
        out.extend(at.get(i, []))
        if i < n:
            out.append(blocks[i])
    return nn.ModuleList(out)
