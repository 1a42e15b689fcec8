"""Mixture-of-experts MLP: top-k routing over GLU experts with a load-balancing loss.

MAD (Poli et al. 2024, arXiv 2403.17844; mad-lab ``MoeMlp`` and ``configs/layers/moe-mlp.yml``)
uses a sparsely activated channel mixer: ``num_experts`` = 8 small gated experts of inner width
16 at d = 128, ``active_experts`` = 2 per token, chosen by a linear router. Per token x::

    p = softmax(W_r x)                                   # router probabilities (E,)
    S = top_k(p)                                         # the k chosen experts
    y = sum_{e in S} (p_e / sum_{e' in S} p_e') * E_e(x)  # renormalised over S (Mixtral-style)
    E_e(x) = W_down_e (act(W_gate_e x) ⊙ W_up_e x)       # a GLU expert

and the Switch Transformer load-balancing loss (Fedus et al. 2021, Eq. 4, extended to top-k as
in GShard / Mixtral)::

    aux = balance_coef * E * sum_e f_e * P_e
    f_e = (tokens routed to e) / (k * tokens)             # dispatch fraction, not differentiable
    P_e = mean over tokens of p_e                         # mean router probability

which is 1 * balance_coef at a perfectly uniform routing. It is stored in ``self.aux_loss`` after
every forward; the training loop adds it to the loss (``training/train.py``).

Two departures from mad-lab's code, both on purpose: mad-lab sets the scores of the experts
outside the top k to 0 *before* its softmax, so every expert keeps a non-zero weight
(exp(0) / Z) and all experts run on every token; and its expert down-projection is one dense
matrix over all experts' hidden units. Here the experts are separate and only the k chosen ones
run on a token (a gather per expert, no loop over tokens), as a mixture of experts is defined.
"""

from __future__ import annotations

from typing import Literal

import torch
import torch.nn.functional as F
from pydantic import Field
from torch import nn

from mixerzoo.mixers import STATE_MIXERS
from mixerzoo.mixers.base import StateMixer
from mixerzoo.registry import ConfigError

ACTIVATIONS = {
    "gelu": lambda x: F.gelu(x, approximate="tanh"),  # mad-lab's MoeMlp default
    "silu": F.silu,
    "relu": F.relu,
    "sigmoid": torch.sigmoid,
}


def route_top_k(
    logits: torch.Tensor, k: int, renormalize: bool = True
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Router logits (n, E) -> (probs (n, E), chosen experts (n, k), their weights (n, k)).

    ``probs`` is the softmax over all experts; the weights are the chosen probabilities, divided
    by their sum when ``renormalize`` (so a token's weights sum to 1). Ties go to the lower index.
    """
    probs = torch.softmax(logits, dim=-1)
    weights, experts = probs.topk(k, dim=-1)
    if renormalize:
        weights = weights / weights.sum(dim=-1, keepdim=True)
    return probs, experts, weights


def load_balancing_loss(probs: torch.Tensor, experts: torch.Tensor) -> torch.Tensor:
    """Switch Transformer Eq. 4 over top-k routing: ``E * sum_e f_e * P_e``.

    probs (n, E): router probabilities; experts (n, k): chosen experts. ``f_e`` counts each
    (token, slot) dispatch, so sum_e f_e = 1; only ``P_e`` carries the gradient.
    """
    n, n_experts = probs.shape
    counts = torch.zeros(n_experts, dtype=probs.dtype, device=probs.device)
    counts.index_add_(
        0, experts.reshape(-1), torch.ones(experts.numel(), dtype=probs.dtype, device=probs.device)
    )
    f = counts / max(experts.numel(), 1)
    p_mean = probs.mean(dim=0)
    return n_experts * (f * p_mean).sum()


@STATE_MIXERS.register("moe_mlp")
class MoEMLP(StateMixer):
    """Top-k mixture of GLU experts with a load-balancing loss. Shapes (..., d) -> (..., d).

    Parameters (defaults: mad-lab ``configs/layers/moe-mlp.yml``, d = 128 -> hidden 16):
      * ``num_experts`` (8), ``active_experts`` (2): E and k.
      * ``hidden_mult`` (0.125): each expert's hidden width / d_model.
      * ``activation`` ("gelu", tanh approximation as mad-lab): the gate's nonlinearity.
      * ``bias`` (False): biases on the expert projections.
      * ``balance_coef`` (0.01): weight of the load-balancing loss (Switch Transformer's alpha).
      * ``renormalize`` (True): the k chosen weights sum to 1 per token.
    """

    class Params(StateMixer.Params):
        num_experts: int = Field(8, ge=1, description="number of experts E")
        active_experts: int = Field(2, ge=1, description="experts per token k (top-k routing)")
        hidden_mult: float = Field(0.125, gt=0, description="each expert's hidden width / d_model")
        activation: Literal["gelu", "silu", "relu", "sigmoid"] = Field("gelu", description="GLU gate")
        bias: bool = Field(False, description="biases on the expert projections")
        balance_coef: float = Field(0.01, ge=0, description="load-balancing loss weight (Switch alpha)")
        renormalize: bool = Field(True, description="renormalise the k chosen router weights to sum 1")

    def __init__(self, d_model: int, **params) -> None:
        super().__init__(d_model, **params)
        p = self.p
        if p.active_experts > p.num_experts:
            raise ConfigError(
                f"state_mixer[moe_mlp].active_experts = {p.active_experts}: "
                f"must be <= num_experts = {p.num_experts}"
            )
        hidden = max(1, int(round(p.hidden_mult * d_model)))
        e, d = p.num_experts, d_model
        self.hidden = hidden
        self.router = nn.Linear(d, e)
        # expert weights stacked (E, in, out): one batched matmul per expert's gathered tokens
        self.w_gate = nn.Parameter(torch.empty(e, d, hidden).uniform_(-(d**-0.5), d**-0.5))
        self.w_up = nn.Parameter(torch.empty(e, d, hidden).uniform_(-(d**-0.5), d**-0.5))
        self.w_down = nn.Parameter(torch.empty(e, hidden, d).uniform_(-(hidden**-0.5), hidden**-0.5))
        if p.bias:
            self.b_gate = nn.Parameter(torch.zeros(e, hidden))
            self.b_up = nn.Parameter(torch.zeros(e, hidden))
            self.b_down = nn.Parameter(torch.zeros(e, d))
        else:
            self.b_gate = self.b_up = self.b_down = None
        self.aux_loss: torch.Tensor | None = None

    def expert(self, e: int, x: torch.Tensor) -> torch.Tensor:
        """Expert e on tokens x (m, d) -> (m, d): ``W_down (act(W_gate x) ⊙ W_up x)``."""
        g, u = x @ self.w_gate[e], x @ self.w_up[e]
        if self.b_gate is not None:
            g, u = g + self.b_gate[e], u + self.b_up[e]
        y = (ACTIVATIONS[self.p.activation](g) * u) @ self.w_down[e]
        return y + self.b_down[e] if self.b_down is not None else y

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x (..., d) -> (..., d); sets ``self.aux_loss``."""
        shape = x.shape
        tokens = x.reshape(-1, shape[-1])  # (n, d)
        probs, experts, weights = route_top_k(self.router(tokens), self.p.active_experts, self.p.renormalize)
        self.aux_loss = self.p.balance_coef * load_balancing_loss(probs, experts)
        out = torch.zeros_like(tokens)
        picks = experts.reshape(-1)  # (n k): a token picks an expert at most once
        order = torch.argsort(picks, stable=True)  # by expert, then by token
        rows, chosen = order // experts.shape[1], weights.reshape(-1)[order]
        # the one value read on the host: each expert's token count sets its GEMM's shape (one
        # sync per forward, and the one graph break under torch.compile)
        counts = torch.bincount(picks, minlength=self.p.num_experts).tolist()
        for e, (r, w) in enumerate(zip(rows.split(counts), chosen.split(counts))):
            if counts[e]:
                y = self.expert(e, tokens[r]) * w.unsqueeze(-1)
                out = out.index_add(0, r, y.to(out.dtype))  # sums in x's dtype (bf16 terms under autocast)
        return out.reshape(shape)
