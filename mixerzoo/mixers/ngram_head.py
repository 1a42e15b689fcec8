"""Static n-gram attention head NGH^n (ICLL Sec. 6, Eq. 10-11, App. F Fig. 7).

Position i attends uniformly to every earlier position that followed an occurrence of the n
tokens ending at i (``ops/ngram.py``: the matrix A(n), its App. F reading and its fast form).
The head output is ``NGH^n(h)_i = W1 h_i + W2 (A h)_i`` (Eq. 11; both maps carry a bias, as
App. F's ``nn.Linear``).
"""

from __future__ import annotations

from pydantic import Field
from torch import nn

from mixerzoo.mixers import SEQUENCE_MIXERS
from mixerzoo.mixers.base import AT_MOST_MAX_LEN, SequenceMixer
from mixerzoo.ops.ngram import ngram_attention
from mixerzoo.params import MAX_REPEATS
from mixerzoo.registry import ConfigError


@SEQUENCE_MIXERS.register("ngram_head")
class NgramHead(SequenceMixer):
    """Static n-gram head ``W1 h_i + W2 (A(n) h)_i`` (ICLL Eq. 10-11, App. F Fig. 7).

    Shapes: x (b, l, d), input_ids (b, l) -> (b, l, d). Parameters:
      * ``order`` (1): n, the number of tokens matched (App. F's ``ngram``; 1 = induction head).
    ``2 d^2 + 2 d`` parameters. Time O(b l (n log(b l) + d)), memory O(b l (n + d)).
    """

    needs_input_ids = True
    examples = [{}, {"order": 2}, {"order": 3}]

    class Params(SequenceMixer.Params):
        order: int = Field(
            1,
            ge=1,
            le=MAX_REPEATS,
            json_schema_extra=AT_MOST_MAX_LEN,
            description="n: tokens matched before the attended-to token",
        )

    def __init__(self, d_model: int, max_len: int = 2048, **params) -> None:
        super().__init__(d_model, max_len, **params)
        self.self_proj = nn.Linear(d_model, d_model)  # W1 of Eq. 11 (App. F ``t1``)
        self.match_proj = nn.Linear(d_model, d_model)  # W2 of Eq. 11 (App. F ``t0``)

    def forward(self, x, input_ids=None, rope=None):
        """x: (b, l, d), input_ids: (b, l) -> (b, l, d)."""
        if input_ids is None:
            raise ConfigError("mixer[ngram_head] needs input_ids (token ids) to find n-gram matches")
        return self.self_proj(x) + self.match_proj(ngram_attention(input_ids, x, self.p.order))
