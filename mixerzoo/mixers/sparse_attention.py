"""Sparse attention: softmax attention computed only at selected positions (Zoology Sec. 5, Eq. 2).

``y[i] = softmax(q[i] k^T / sqrt(d)) v * f(u)[i]`` with a selection function ``f``; positions with
f = 0 output zero (the residual stream passes them through unchanged). Only the selected queries
are gathered, so the cost is O(k l d) for k selected positions, never an l x l matrix. Selections:

  * ``random``: f[i] ~ Bernoulli(p) (Sec. 5 (2)). Training draws afresh from the global RNG each
    forward; in eval f[i] comes from an integer hash of (seed, i), so eval outputs are
    deterministic and a prefix's selection does not depend on the rest of the sequence.
  * ``programmatic``: Eq. 3, f[i] = 1 iff token x_i occurred before (some j < i has x_j = x_i),
    from raw token ids; ``ngram`` = 2 selects repeated bigrams instead (App. C.2: "a bigram of raw
    token ids is repeated"). Exact (sorted integer n-gram keys, no hashing), O(l log l).
  * ``learned``: score ``s_i = sigmoid(u_i . W)`` (Sec. 5 (4)); training adds N(0, noise^2) to the
    scores for exploration. The paper keeps the top-k scores of the whole sequence, but a later
    token could then displace an earlier one, which is not causal; we keep the causal
    equivalent of a top-k budget: position i is selected when its (noisy) score exceeds 1/2 and
    fewer than k earlier positions were selected. Selected outputs are multiplied by s_i (Eq. 2
    with f = s_i), which is how the task loss reaches W; the auxiliary sparsity loss
    ``l_f = (1/N) max(0, sum_i s_i - k)`` (averaged over the batch) is stored in ``aux_loss``
    after every forward, for the training loop to add.
"""

from __future__ import annotations

from typing import Literal

import torch
import torch.nn.functional as F
from pydantic import Field
from torch import nn

from mixerzoo.mixers import SEQUENCE_MIXERS
from mixerzoo.mixers.base import SequenceMixer
from mixerzoo.ops.heads import split_heads
from mixerzoo.ops.ngram import ngram_keys
from mixerzoo.registry import ConfigError


def position_hash_uniform(positions: torch.Tensor, seed: int) -> torch.Tensor:
    """A deterministic uniform(0, 1) number per position (32-bit integer mixing, int64 arithmetic)."""
    mask = (1 << 32) - 1
    h = (positions.long() * 2654435761 + seed * 40503 + 1) & mask
    for _ in range(3):  # xorshift-multiply rounds (the murmur3 finaliser constants)
        h = ((h ^ (h >> 16)) * 0x45D9F3B) & mask
    h = h ^ (h >> 16)
    return (h >> 8).float() / float(1 << 24)  # the top 24 bits: exact in float32, below 1


def repeated_ngram(input_ids: torch.Tensor, n: int = 1) -> torch.Tensor:
    """(b, l) ids -> (b, l) bool: the n-gram ending at i occurred ending at some j < i (Eq. 3 for n=1)."""
    keys = ngram_keys(input_ids, n)  # equal iff the same n-gram in the same sequence; i < n-1 unique
    sorted_keys, order = torch.sort(keys, dim=1, stable=True)  # stable: within a key, by position
    seen = torch.zeros_like(sorted_keys, dtype=torch.bool)
    seen[:, 1:] = sorted_keys[:, 1:] == sorted_keys[:, :-1]  # not the first of its key
    return torch.empty_like(seen).scatter_(1, order, seen)


@SEQUENCE_MIXERS.register("sparse_attention")
class SparseAttention(SequenceMixer):
    """Attention at selected positions only (Zoology Sec. 5, Eq. 2-3).

    Shapes: x (b, l, d) -> (b, l, d), zero rows where not selected; ``input_ids`` (b, l) for the
    programmatic selection. Parameters:
      * ``selection`` ("programmatic"): ``random``, ``programmatic`` or ``learned``.
      * ``num_heads`` (1): heads h.
      * ``p`` (0.1): Bernoulli rate of ``random``.
      * ``seed`` (0): seed of the eval-time hash of ``random``.
      * ``ngram`` (1): n of ``programmatic`` (1 = Eq. 3; 2 = repeated bigrams, App. C.2).
      * ``top_k`` (64): budget k of ``learned`` (selected positions per sequence, and the k in l_f).
      * ``noise`` (0.1): std of the exploration noise of ``learned`` (training only).
      * ``bias`` (True): biases on the projections.
    """

    uses_positions = True
    needs_input_ids = True  # used by the programmatic selection only; the others ignore the ids

    examples = [
        {},
        {"selection": "programmatic", "ngram": 2, "num_heads": 2},
        {"selection": "random", "p": 0.5},
        {"selection": "learned", "top_k": 6, "num_heads": 2},
    ]

    class Params(SequenceMixer.Params):
        selection: Literal["random", "programmatic", "learned"] = Field(
            "programmatic", description="selection function f"
        )
        num_heads: int = Field(1, ge=1, description="attention heads")
        p: float = Field(0.1, ge=0.0, le=1.0, description="Bernoulli rate of random selection")
        seed: int = Field(0, ge=0, description="seed of the eval-time random selection")
        ngram: int = Field(1, ge=1, description="n of programmatic selection (repeated n-grams)")
        top_k: int = Field(64, ge=1, description="learned selection budget k")
        noise: float = Field(0.1, ge=0.0, description="exploration noise std (learned, training)")
        bias: bool = Field(True, description="bias on projections")

    def __init__(self, d_model: int, max_len: int = 2048, **params) -> None:
        super().__init__(d_model, max_len, **params)
        h = self.p.num_heads
        self.check_divides("num_heads", h)
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=self.p.bias)
        self.out = nn.Linear(d_model, d_model, bias=self.p.bias)
        self.score = nn.Linear(d_model, 1) if self.p.selection == "learned" else None
        self.aux_loss: torch.Tensor | None = None

    def select(
        self, x: torch.Tensor, input_ids: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(b, l) bool selection and, for ``learned``, the scores s (b, l) that gate the outputs."""
        b, l, _ = x.shape
        sel = self.p.selection
        if sel == "programmatic":
            if input_ids is None:
                raise ConfigError("mixer[sparse_attention].selection = 'programmatic' needs input_ids")
            return repeated_ngram(input_ids, self.p.ngram), None
        if sel == "random":
            if self.training:
                return torch.rand(b, l, device=x.device) < self.p.p, None
            u = position_hash_uniform(torch.arange(l, device=x.device), self.p.seed)
            return (u < self.p.p).expand(b, l), None
        s = torch.sigmoid(self.score(x).squeeze(-1))  # (b, l)
        self.aux_loss = F.relu(s.sum(-1) - self.p.top_k).mean() / l  # l_f (Sec. 5 (4))
        noisy = s + self.p.noise * torch.randn_like(s) if self.training and self.p.noise > 0 else s
        over = noisy.detach() > 0.5
        # causal budget: selected when over threshold and fewer than k earlier selections
        earlier = torch.cumsum(over.long(), dim=-1) - over.long()
        return over & (earlier < self.p.top_k), s

    def fixed_budget(self, l: int) -> int | None:
        """Query rows to gather when no value sets it: ``learned`` selects at most ``top_k`` per
        sequence. None for the others, whose budget is the largest count, read on the host."""
        return max(1, min(l, self.p.top_k)) if self.p.selection == "learned" else None

    def forward(self, x, input_ids=None, rope=None):
        """x: (b, l, d) -> (b, l, d)."""
        b, l, d = x.shape
        h = self.p.num_heads
        if self.p.selection != "learned":
            self.aux_loss = None
        mask, gate = self.select(x, input_ids)
        counts = mask.sum(-1)
        kmax = self.fixed_budget(l)
        if kmax is None:  # one host sync per forward, the one graph break under torch.compile:
            # padding every sequence to l queries would make the attention O(l^2 d) again
            kmax = max(1, int(counts.max())) if b else 1  # >= 1: an empty selection still builds the graph
        # positions of the selected queries, padded per sequence to kmax (padding points at 0, output 0)
        order = torch.argsort((~mask).to(torch.int8), dim=-1, stable=True)[:, :kmax]  # selected first
        valid = torch.arange(kmax, device=x.device).unsqueeze(0) < counts.unsqueeze(1)  # (b, kmax)
        pos = torch.where(valid, order, torch.zeros_like(order))
        # projections are O(l d^2) anyway; the attention below is O(k l d)
        q, k, v = (split_heads(t, h) for t in self.qkv(x).chunk(3, dim=-1))  # (b, h, l, e)
        if rope is not None:
            q, k = rope(q, k)
        q = q.gather(2, pos.view(b, 1, kmax, 1).expand(b, h, kmax, q.shape[-1]))  # (b, h, kmax, e)
        allowed = torch.arange(l, device=x.device).view(1, 1, l) <= pos.unsqueeze(-1)  # (b, kmax, l)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed.unsqueeze(1))  # (b, h, kmax, e)
        y = self.out(y.transpose(1, 2).reshape(b, kmax, d))
        if gate is not None:
            y = y * gate.gather(1, pos).unsqueeze(-1)
        y = y * valid.unsqueeze(-1).to(y.dtype)
        out = x.new_zeros(b, l, d, dtype=y.dtype)  # y's dtype: bf16 under autocast, x's otherwise
        return out.scatter_add(1, pos.unsqueeze(-1).expand(b, kmax, d), y)

    @torch.no_grad()
    def attention_map(self, x, input_ids=None, rope=None) -> torch.Tensor:
        """The weights (b, h, l, l) of ``forward`` on x: a causal softmax row at each selected
        position, times the gate s_i for ``learned`` (rows sum to s_i), zero at the others."""
        l = x.shape[1]
        mask, gate = self.select(x, input_ids)
        q, k, _ = (split_heads(t, self.p.num_heads) for t in self.qkv(x).chunk(3, dim=-1))
        if rope is not None:
            q, k = rope(q, k)
        future = torch.ones(l, l, dtype=torch.bool, device=x.device).triu(1)
        scores = (q @ k.transpose(-1, -2)) / q.shape[-1] ** 0.5
        w = torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1)
        row = mask.to(w.dtype) if gate is None else mask.to(w.dtype) * gate
        return w * row.view(row.shape[0], 1, l, 1)
