"""Static n-gram attention head NGH^n (paper 004 Sec. 6, Eq. 10-11, App. F Fig. 7).

Position i attends *uniformly* to every earlier position j + 1 (with j + 1 < i) such that the n
tokens ending at j equal the n tokens ending at i: it reads the token that followed each earlier
occurrence of the current n-gram, as App. F's ``ngram_head(..., shift_step=1, ngram=n)`` does
(``ngram=1`` is the induction head). Rows with no match read zero. The head output is
``NGH^n(h)_i = W1 h_i + W2 (A h)_i`` (Eq. 11; both maps carry a bias, as App. F's ``nn.Linear``).

Eq. 10 as printed (``x_{i-k} = x_{j-k-1}``, k = 1..n) is shifted by one position from App. F's code;
App. F is what the paper ran and is followed here.

Memory is O(l * (n + d)), never an l x l mask: every n-gram gets an exact integer key (the
n-gram is re-ranked one token at a time, so distinct n-grams can never share a key), positions are
sorted by (key, position), and the uniform average over earlier matches is a segmented exclusive
prefix sum of ``h_{j+1}`` within each key group, divided by the group count so far.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from pydantic import Field
from torch import nn

from mixerzoo.mixers import SEQUENCE_MIXERS
from mixerzoo.mixers.base import SequenceMixer
from mixerzoo.registry import ConfigError


def ngram_keys(input_ids: torch.Tensor, n: int) -> torch.Tensor:
    """Exact n-gram identities. input_ids (b, l) -> keys (b, l) int64.

    ``keys[s, i] == keys[s2, i2]`` iff ``s == s2`` and the n tokens ending at i equal the n tokens
    ending at i2. Positions ``i < n - 1`` (no complete n-gram) get a key of their own (negative).
    Each step ranks the pair (key of the (k-1)-gram ending at i-1, token i) with ``torch.unique``,
    so keys stay below b * l and products never overflow: no hashing, hence no collisions.
    """
    b, l = input_ids.shape
    device = input_ids.device
    tokens = torch.unique(input_ids, return_inverse=True)[1]  # dense ranks < b*l, any int range
    vocab = b * l + 1
    seq = torch.arange(b, device=device).unsqueeze(1)
    keys = torch.unique(seq * vocab + tokens, return_inverse=True)[1]  # 1-grams, per sequence
    for _ in range(1, n):
        # the (k-1)-gram ending at i-1 extended by token i; position 0 gets a sentinel prefix
        prev = F.pad(keys[:, :-1], (1, 0), value=b * l)
        keys = torch.unique(prev * vocab + tokens, return_inverse=True)[1]
    pos = torch.arange(l, device=device)
    flat = torch.arange(b * l, device=device).view(b, l)
    return torch.where(pos >= n - 1, keys, -(flat + 1))


def ngram_attention(input_ids: torch.Tensor, h: torch.Tensor, n: int) -> torch.Tensor:
    """``(A(n) h)_i``: mean of ``h_{j+1}`` over ``j + 1 < i`` whose n-gram equals position i's.

    input_ids (b, l) int, h (b, l, d) -> (b, l, d); zero rows where nothing matches.
    Sums run in float64 so that differences of long prefix sums stay exact to ~1e-12.
    """
    b, l, d = h.shape
    total = b * l
    keys = ngram_keys(input_ids, n).reshape(total)
    work = torch.promote_types(h.dtype, torch.float64)
    hw = h.to(work)
    # source j contributes the token that followed it, h_{j+1} (App. F: shift_step = 1)
    following = F.pad(hw[:, 1:], (0, 0, 0, 1)).reshape(total, d)

    sorted_keys, order = torch.sort(keys, stable=True)  # stable: within a key, by position
    idx = torch.arange(total, device=h.device)
    is_start = torch.ones(total, dtype=torch.bool, device=h.device)
    is_start[1:] = sorted_keys[1:] != sorted_keys[:-1]
    start = torch.cummax(torch.where(is_start, idx, 0), dim=0).values
    vals = following[order]
    before = vals.cumsum(0) - vals  # exclusive prefix over the whole sorted array
    group_sum = before - before[start]  # ... restricted to the same key: earlier matches only
    group_cnt = idx - start
    inverse = torch.empty_like(order)
    inverse[order] = idx
    sums, cnt = group_sum[inverse], group_cnt[inverse]

    # j = i - 1 would attend to j + 1 = i itself; App. F's causal mask (j + 1 < i) drops it
    adjacent = torch.zeros(total, dtype=torch.bool, device=h.device)
    adjacent[1:] = keys[1:] == keys[:-1]
    sums = sums - adjacent.unsqueeze(1).to(work) * hw.reshape(total, d)
    cnt = cnt - adjacent.long()
    out = torch.where(cnt.unsqueeze(1) > 0, sums / cnt.clamp(min=1).unsqueeze(1).to(work), 0.0)
    return out.view(b, l, d).to(h.dtype)


@SEQUENCE_MIXERS.register("ngram_head")
class NgramHead(SequenceMixer):
    """Static n-gram head ``W1 h_i + W2 (A(n) h)_i`` (paper 004 Eq. 10-11, App. F Fig. 7).

    Shapes: x (b, l, d), input_ids (b, l) -> (b, l, d). Parameters:
      * ``order`` (1): n, the number of tokens matched (App. F's ``ngram``; 1 = induction head).
    ``2 d^2 + 2 d`` parameters. Time O(b l log(b l) n + b l d), memory O(b l (n + d)).
    """

    needs_input_ids = True
    examples = [{}, {"order": 2}, {"order": 3}]

    class Params(SequenceMixer.Params):
        order: int = Field(1, ge=1, description="n: tokens matched before the attended-to token")

    def __init__(self, d_model: int, max_len: int = 2048, **params) -> None:
        super().__init__(d_model, max_len, **params)
        self.self_proj = nn.Linear(d_model, d_model)  # W1 of Eq. 11 (App. F ``t1``)
        self.match_proj = nn.Linear(d_model, d_model)  # W2 of Eq. 11 (App. F ``t0``)

    def forward(self, x, input_ids=None, rope=None):
        """x: (b, l, d), input_ids: (b, l) -> (b, l, d)."""
        if input_ids is None:
            raise ConfigError("mixer[ngram_head] needs input_ids (token ids) to find n-gram matches")
        return self.self_proj(x) + self.match_proj(ngram_attention(input_ids, x, self.p.order))
