"""Hyena experts (MAD, Poli et al. 2024, arXiv 2403.17844; mad-lab ``HyenaExpertsOperator``).

A Hyena operator whose inner width is split into ``num_experts`` experts of ``expert_width``
channels; a router on the layer's input picks ``active_experts`` of them per token, and only
their outputs, weighted by the router, reach the output projection::

    x_0, ..., x_{N-1}, v = split(short_conv(in_proj(u)))         # each E * w wide (Alg. 2)
    for o = 1..N-1:  v = h_o * (x_o ⊙ v) + bias_o ⊙ (x_o ⊙ v)      # as in hyena.py, on E * w
    z = x_0 ⊙ v  viewed as (E, w)                                 # expert e: channels e*w .. e*w+w-1
    y = out_proj( sum_{e in top_k(p)} p~_e z_e ),  p = softmax(W_r u)   # (w) -> (d)

With mad-lab's defaults (``configs/layers/hyena-experts.yml``: 8 experts of width 16 at
d = 128, 2 active, filter MLP width 16) the Hyena part has width d, and the output projection
reads only w = d / 8 channels, selected per token. As in mad-lab the convolutions run on every
expert's channels (a long convolution needs every position of a channel, so the experts cannot
be skipped per token); the routing is the selection of the outputs.

Routing departs from mad-lab's code in one point, on purpose: mad-lab zeroes the scores outside
the top k *before* its softmax, so those experts keep weight exp(0) / Z; here the k chosen
experts' probabilities are renormalised and the others weigh exactly 0 (top-k routing, as in
``moe_mlp.py``). mad-lab has no load-balancing loss here; ``balance_coef`` > 0 adds the Switch
loss of ``moe_mlp.py`` to ``self.aux_loss``.
"""

from __future__ import annotations

import math

import torch
from pydantic import Field
from torch import nn

from mixerzoo.mixers import SEQUENCE_MIXERS
from mixerzoo.mixers.base import SequenceMixer
from mixerzoo.mixers.hyena import HyenaFilter
from mixerzoo.mixers.moe_mlp import load_balancing_loss, route_top_k
from mixerzoo.ops.conv import causal_depthwise_conv, fft_causal_conv
from mixerzoo.params import MAX_REPEATS
from mixerzoo.registry import ConfigError


@SEQUENCE_MIXERS.register("hyena_experts")
class HyenaExperts(SequenceMixer):
    """Hyena with routed experts on its inner channels. Shapes: x (b, l, d) -> (b, l, d); any l.

    Parameters (defaults from mad-lab ``hyena-experts.yml``; filter settings as ``hyena``):
      * ``num_experts`` (8), ``active_experts`` (2): E and k.
      * ``expert_width`` (None = d / num_experts): channels w per expert; the Hyena width is E * w.
      * ``order`` (2), ``short_filter`` (3): as ``hyena``.
      * ``filter_order`` (16, mad-lab's ``filter_cfg.order``), ``inner_mlps`` (2), ``emb_dim`` (3),
        ``sine_freq`` (14.0), ``fast_decay`` (0.3), ``slow_decay`` (1.2): the implicit filter.
      * ``renormalize`` (True): the k chosen router weights sum to 1 per token.
      * ``balance_coef`` (0.0): Switch load-balancing loss weight (mad-lab: none).
    """

    examples = [{}, {"num_experts": 4, "active_experts": 1, "expert_width": 2, "balance_coef": 0.01}]

    class Params(SequenceMixer.Params):
        num_experts: int = Field(8, ge=1, description="number of experts E")
        active_experts: int = Field(2, ge=1, description="experts per token k (top-k routing)")
        expert_width: int | None = Field(None, ge=1, description="channels per expert (None: d / E)")
        order: int = Field(2, ge=2, description="Hyena order N: N + 1 streams, N - 1 long filters")
        short_filter: int = Field(3, ge=1, description="taps of the short conv on the projections")
        filter_order: int = Field(16, ge=1, description="hidden width of the implicit filter MLP")
        inner_mlps: int = Field(2, ge=0, le=MAX_REPEATS, description="hidden sine layers in the filter MLP")
        emb_dim: int = Field(3, ge=3, description="positional features: t and (emb_dim-1)/2 bands")
        sine_freq: float = Field(14.0, gt=0, description="initial frequency of the sine activations")
        fast_decay: float = Field(0.3, gt=0, description="decay window: fastest channel's span")
        slow_decay: float = Field(1.2, gt=0, description="decay window: slowest channel's span")
        renormalize: bool = Field(True, description="renormalise the k chosen router weights to sum 1")
        balance_coef: float = Field(0.0, ge=0, description="Switch load-balancing loss weight")

    def __init__(self, d_model: int, max_len: int = 2048, **params) -> None:
        super().__init__(d_model, max_len, **params)
        p = self.p
        if p.active_experts > p.num_experts:
            raise ConfigError(
                f"mixer[hyena_experts].active_experts = {p.active_experts}: "
                f"must be <= num_experts = {p.num_experts}"
            )
        self.width = p.expert_width or self.check_divides("num_experts", p.num_experts)
        inner = p.num_experts * self.width
        self.inner = inner
        streams = (p.order + 1) * inner
        self.in_proj = nn.Linear(d_model, streams)
        bound = 1.0 / math.sqrt(p.short_filter)  # nn.Conv1d's default init for a depthwise conv
        self.short_weight = nn.Parameter(torch.empty(streams, p.short_filter).uniform_(-bound, bound))
        self.short_bias = nn.Parameter(torch.empty(streams).uniform_(-bound, bound))
        self.filter = HyenaFilter(
            (p.order - 1) * inner,
            max_len,
            p.emb_dim,
            p.filter_order,
            p.inner_mlps,
            p.sine_freq,
            p.fast_decay,
            p.slow_decay,
        )
        self.filter_bias = nn.Parameter(torch.randn((p.order - 1) * inner))
        self.router = nn.Linear(d_model, p.num_experts)
        self.out_proj = nn.Linear(self.width, d_model)
        self.aux_loss: torch.Tensor | None = None

    def expert_outputs(self, x: torch.Tensor) -> torch.Tensor:
        """x (b, l, d) -> every expert's Hyena output before routing, (b, l, E, w)."""
        b, l, _ = x.shape
        n = self.inner
        z = causal_depthwise_conv(self.in_proj(x), self.short_weight) + self.short_bias
        *gates, v = z.split(n, dim=-1)
        k = self.filter(l, x.device, x.dtype).split(n, dim=0)
        bias = self.filter_bias.split(n)
        for o, gate in enumerate(reversed(gates[1:])):  # Alg. 3 step 4, as hyena.py
            v = v * gate
            v = fft_causal_conv(v.transpose(1, 2), k[o]).transpose(1, 2) + v * bias[o]
        return (v * gates[0]).reshape(b, l, self.p.num_experts, self.width)

    def forward(self, x, input_ids=None, rope=None):
        """x: (b, l, d) -> (b, l, d); sets ``self.aux_loss`` (None when balance_coef = 0)."""
        b, l, d = x.shape
        z = self.expert_outputs(x)
        probs, experts, weights = route_top_k(
            self.router(x).reshape(b * l, -1), self.p.active_experts, self.p.renormalize
        )
        combine = torch.zeros_like(probs).scatter(1, experts, weights).reshape(b, l, -1, 1)
        self.aux_loss = (
            self.p.balance_coef * load_balancing_loss(probs, experts) if self.p.balance_coef > 0 else None
        )
        return self.out_proj((z * combine).sum(dim=2))
