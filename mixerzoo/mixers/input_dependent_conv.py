"""BaseConv with input-dependent shift filters (Zoology Sec. 4.3 Claim 2, Theorem 4.5, App. H.8).

App. H.8 solves MQAR with BaseConv layers whose kernels are chosen from the input: given the top
t interaction distances s_1..s_t, the kernels are sums of shifts (Eq. 19),
``h^K = Σ_ℓ X^{s_ℓ}`` and ``h^V = Σ_ℓ X^{s_ℓ - 1}``, and two BaseConv layers compute
``y = Q ⊙ (h^K * K)``, ``E = Linear_E(y)`` and ``z = E ⊙ (h^V * V)`` (Eq. 21-23): the value that
followed each matching key is shifted onto the query.

The paper picks the shifts from the whole sequence, which Sec. 4.3 notes "cannot easily be made
to satisfy causality". Here every position i chooses its own shifts from the prefix ``≤ i``
only, so the filter applied at i is a causal kernel of spikes at lags ``s_ℓ(i) - 1``:

  * ``programmatic`` (Fig. 2 bottom, "hard-coded comparisons between token ids"): s_ℓ(i) = i - j_ℓ,
    j_ℓ the ℓ-th most recent earlier position holding the same token id. The match is exact, so
    E = 1 and the layer is Def. 4.1's BaseConv ``(u W_g + b1) ⊙ (h_i * (u W_v) + b2)``.
  * ``autocorrelation`` (App. H.8.2): the shifts maximise the prefix cross-correlation of learned
    query/key projections, ``r_i(s) = Σ_{m ≤ i} <q_m, k_{m-s}>`` (the autocorrelation of
    H.8.1 restricted to the prefix, so fuzzy matches can be learned), and the output is
    Eq. 21-23 with a soft match gate: ``z_i = Σ_ℓ Linear_E(q_i ⊙ k_{i-s_ℓ}) ⊙ v_{i-s_ℓ+1}``.
    ``r_i`` is a running (cumulative) sum over i of each lag's products, so it never sees a token
    after i; it takes O(l^2) time and memory per sequence, computed without gradient (the top-t
    choice is not differentiable; the projections learn through the gate E).

Each variant adds the input back (``inner_residual``), as the BaseConv listings do.
"""

from __future__ import annotations

from typing import Literal

import torch
from pydantic import Field
from torch import nn

from mixerzoo.mixers import SEQUENCE_MIXERS
from mixerzoo.mixers.base import AT_MOST_MAX_LEN, SequenceMixer
from mixerzoo.ops.ngram import dense_rank
from mixerzoo.registry import ConfigError


def previous_occurrences(input_ids: torch.Tensor, t: int) -> torch.Tensor:
    """Positions of the t most recent earlier occurrences of each token. (b, l) -> (b, l, t), -1 = none."""
    b, l = input_ids.shape
    tokens = dense_rank(input_ids)  # < b * l; a sort, no value-dependent shape
    seq = torch.arange(b, device=input_ids.device).unsqueeze(1)
    keys = (seq * (b * l + 1) + tokens).reshape(-1)
    sorted_keys, order = torch.sort(keys, stable=True)  # stable: equal tokens stay in position order
    pos = torch.arange(l, device=input_ids.device).repeat(b)[order]
    out = torch.full((b * l, t), -1, dtype=torch.long, device=input_ids.device)
    for back in range(1, min(t, b * l - 1) + 1):
        same = sorted_keys[back:] == sorted_keys[:-back]
        out[order[back:], back - 1] = torch.where(same, pos[:-back], -1)
    return out.view(b, l, t)


def prefix_autocorrelation_shifts(q: torch.Tensor, k: torch.Tensor, t: int) -> torch.Tensor:
    """Top-t lags of ``r_i(s) = Σ_{m ≤ i} <q_m, k_{m-s}>`` over 1 ≤ s ≤ i. -> (b, l, t), 0 = none."""
    b, l, _ = q.shape
    with torch.no_grad():
        scores = q @ k.transpose(1, 2)  # (b, l, l): <q_m, k_j>
        i = torch.arange(l, device=q.device).unsqueeze(1)
        s = torch.arange(1, l, device=q.device).unsqueeze(0)
        valid = s <= i  # (l, l - 1)
        by_lag = scores.gather(2, (i - s).clamp(min=0).expand(b, l, l - 1))  # [m, s-1] = <q_m, k_{m-s}>
        r = (by_lag * valid).cumsum(dim=1)  # prefix sums over m <= i, lag by lag
        r = r.masked_fill(~valid, float("-inf"))
        top = r.topk(min(t, l - 1), dim=-1)
        lags = torch.where(torch.isfinite(top.values), top.indices + 1, 0)
    if lags.shape[-1] < t:
        lags = torch.nn.functional.pad(lags, (0, t - lags.shape[-1]))
    return lags


def gather_positions(x: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
    """x (b, l, d), pos (b, l, t) valid indices -> x[batch, pos] (b, l, t, d)."""
    b, l, d = x.shape
    flat = pos + torch.arange(b, device=x.device).view(b, 1, 1) * l
    return x.reshape(b * l, d)[flat]


@SEQUENCE_MIXERS.register("input_dependent_conv")
class InputDependentConv(SequenceMixer):
    """BaseConv whose shift kernels come from the input (Zoology Theorem 4.5, App. H.8, Eq. 19-23).

    Shapes: x (b, l, d), input_ids (b, l) -> (b, l, d). Parameters:
      * ``filter`` ("programmatic"): ``programmatic`` (token-id matches, needs input_ids) or
        ``autocorrelation`` (prefix autocorrelation of learned projections).
      * ``top_t`` (1): shifts per position (t of Eq. 19).
      * ``inner_residual`` (True): add the input back, as the BaseConv listings do.
    """

    needs_input_ids = True
    examples = [
        {},
        {"top_t": 3},
        {"filter": "autocorrelation"},
        {"filter": "autocorrelation", "top_t": 2, "inner_residual": False},
    ]

    class Params(SequenceMixer.Params):
        filter: Literal["programmatic", "autocorrelation"] = Field(
            "programmatic", description="how the shifts are chosen"
        )
        top_t: int = Field(
            1, ge=1, json_schema_extra=AT_MOST_MAX_LEN, description="t: shifts per position (Eq. 19)"
        )
        inner_residual: bool = Field(True, description="add the input back, as the listings do")

    def __init__(self, d_model: int, max_len: int = 2048, **params) -> None:
        super().__init__(d_model, max_len, **params)
        self.value = nn.Linear(d_model, d_model)  # V of Eq. 20
        if self.p.filter == "programmatic":
            self.gate = nn.Linear(d_model, d_model)  # u W_g + b1 of Def. 4.1
            self.conv_bias = nn.Parameter(torch.zeros(d_model))  # b2 of Def. 4.1
        else:
            self.query = nn.Linear(d_model, d_model)  # Q of Eq. 20
            self.key = nn.Linear(d_model, d_model)  # K of Eq. 20
            self.match = nn.Linear(d_model, d_model)  # Linear_E of Eq. 23

    def forward(self, x, input_ids=None, rope=None):
        """x: (b, l, d), input_ids: (b, l) (programmatic) -> (b, l, d)."""
        b, l, d = x.shape
        v = self.value(x)
        pos = torch.arange(l, device=x.device).view(1, l, 1)
        if self.p.filter == "programmatic":
            if input_ids is None:
                raise ConfigError("mixer[input_dependent_conv] with filter=programmatic needs input_ids")
            match = previous_occurrences(input_ids, self.p.top_t)  # j_ℓ(i)
            found = match >= 0
            # spike at lag i - j - 1: the token that followed the earlier occurrence (Eq. 19 h^V)
            shifted = gather_positions(v, torch.where(found, match + 1, pos))
            y = self.gate(x) * ((shifted * found.unsqueeze(-1)).sum(2) + self.conv_bias)
        else:
            q, k = self.query(x), self.key(x)
            lags = prefix_autocorrelation_shifts(q, k, self.p.top_t)  # s_ℓ(i), 0 = none
            found = (lags > 0).unsqueeze(-1)
            keys = gather_positions(k, (pos - lags).clamp(min=0))  # k_{i-s}: h^K * K
            values = gather_positions(v, torch.where(lags > 0, pos - lags + 1, pos))  # h^V * V
            gate = self.match(q.unsqueeze(2) * keys)  # E = Linear_E(Q ⊙ (h^K * K)), Eq. 21-23
            y = (gate * values * found).sum(2)
        return y + x if self.p.inner_residual else y
