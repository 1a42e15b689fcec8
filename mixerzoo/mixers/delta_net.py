"""DeltaNet (Yang, Wang, Zhang, Shen, Kim 2024, "Parallelizing Linear Transformers with the Delta
Rule over Sequence Length"; the delta rule of Schlag et al. 2021).

Per head the state follows the delta rule (Eq. 1-2), ``S_t = S_{t-1}(I - beta_t k_t k_t^T) +
beta_t v_t k_t^T`` and ``o_t = S_t q_t``: each step overwrites the value stored under k_t
instead of adding to it as linear attention does. The layer is the paper's (Sec. 3.4), as
flash-linear-attention / zoology build it: q, k, v projections, each through a short causal
depthwise convolution and SiLU (``conv_size`` taps; 0 drops the convolution, keeping the SiLU),
q and k L2-normalised per head (so ``I - beta k k^T`` has eigenvalues in [0, 1] and the state
stays bounded), q scaled by ``e^{-1/2}``, ``beta_t = sigmoid(x_t W_beta)`` one per head, the
output RMS-normalised per head and, with ``output_gate``, gated by ``swish(x W_g)`` before
``W_o``.

``forward`` runs the chunkwise WY form of ``ops/delta_rule.py`` (linear in l); ``step`` runs the
recurrence one position at a time with the same parameters.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from pydantic import Field
from torch import nn

from mixerzoo.mixers import SEQUENCE_MIXERS
from mixerzoo.mixers.base import SequenceMixer
from mixerzoo.ops.conv import causal_depthwise_conv
from mixerzoo.ops.delta_rule import delta_rule_chunk, delta_rule_step
from mixerzoo.registry import ConfigError

NORM_EPS = 1e-5  # fla's RMSNorm eps
L2_EPS = 1e-6


@SEQUENCE_MIXERS.register("delta_net")
class DeltaNet(SequenceMixer):
    """Multi-head delta-rule linear attention with short convolutions, O(l * c * d + l * d^2 / h) time.

    Shapes: x (b, l, d) -> (b, l, d); q, k (b, h, l, e) with e = expand_k * d / h; v (b, h, l, f)
    with f = expand_v * d / h; state ``M = S^T`` (b, h, e, f) plus the convolution window
    (b, 2 h e + h f, conv_size - 1). Parameters:
      * ``num_heads`` (1): heads h (fla's default is 4; one head gives the largest state).
      * ``expand_k`` (1.0), ``expand_v`` (1.0): key and value widths as multiples of d.
      * ``conv_size`` (4): taps of the short causal convolutions on q, k, v; 0 disables them.
      * ``output_gate`` (False): gate the normalised output by swish(x W_g) (fla's ``use_gate``).
      * ``chunk_size`` (64): chunk length of the chunkwise form (speed only).
    """

    recurrent = True
    examples = [
        {},
        {"num_heads": 2, "chunk_size": 5},
        {"num_heads": 4, "conv_size": 0, "output_gate": True, "chunk_size": 7},
        {"num_heads": 2, "expand_v": 2.0, "conv_size": 2},
    ]

    class Params(SequenceMixer.Params):
        num_heads: int = Field(1, ge=1, description="heads")
        expand_k: float = Field(1.0, gt=0, description="key width / d_model")
        expand_v: float = Field(1.0, gt=0, description="value width / d_model")
        conv_size: int = Field(4, ge=0, description="short causal conv taps on q, k, v (0: none)")
        output_gate: bool = Field(False, description="gate the normalised output by swish(x W_g)")
        chunk_size: int = Field(64, ge=1, description="chunk length of the chunkwise form")

    def __init__(self, d_model: int, max_len: int = 2048, **params) -> None:
        super().__init__(d_model, max_len, **params)
        p = self.p
        h = p.num_heads
        self.dk, self.dv = int(round(p.expand_k * d_model)), int(round(p.expand_v * d_model))
        for field, width in (("expand_k", self.dk), ("expand_v", self.dv)):
            if width == 0:
                raise ConfigError(
                    f"mixer[{self.name}].{field} = {getattr(p, field)}: "
                    f"round({field} * d_model = {d_model}) is 0; must give a width >= 1"
                )
        if self.dk % h or self.dv % h:
            raise ConfigError(
                f"mixer[{self.name}].num_heads = {h}: must divide key width {self.dk} "
                f"(expand_k * d_model) and value width {self.dv} (expand_v * d_model)"
            )
        channels = 2 * self.dk + self.dv
        self.qkv = nn.Linear(d_model, channels, bias=False)  # q, k, v projections side by side
        if p.conv_size:
            bound = 1.0 / math.sqrt(p.conv_size)  # nn.Conv1d's default initialisation, as fla's
            self.conv_weight = nn.Parameter(torch.empty(channels, p.conv_size).uniform_(-bound, bound))
        self.beta = nn.Linear(d_model, h, bias=False)
        if p.output_gate:
            self.gate = nn.Linear(d_model, self.dv, bias=False)
        self.norm_weight = nn.Parameter(torch.ones(self.dv // h))
        self.out = nn.Linear(self.dv, d_model, bias=False)

    # -- pieces shared by forward and step -------------------------------------------------------
    def heads(self, u, x):
        """u: (..., 2 dk + dv) after conv, x: (..., d) -> q, k (..., h, e), v (..., h, f), beta,
        log_alpha (..., h) (log_alpha None: no decay)."""
        h = self.p.num_heads
        q, k, v = F.silu(u).split([self.dk, self.dk, self.dv], dim=-1)
        q = F.normalize(q.unflatten(-1, (h, -1)), dim=-1, eps=L2_EPS) / math.sqrt(self.dk // h)
        k = F.normalize(k.unflatten(-1, (h, -1)), dim=-1, eps=L2_EPS)
        return q, k, v.unflatten(-1, (h, -1)), torch.sigmoid(self.beta(x)), self.log_decay(x)

    def log_decay(self, x):
        """x: (..., d) -> log alpha (..., h); DeltaNet has none (alpha = 1)."""
        return None

    def finish(self, o, x):
        """o: (..., h, f) -> (..., d): per-head RMSNorm, optional swish(x W_g) gate, W_o."""
        o = o * torch.rsqrt(o.pow(2).mean(-1, keepdim=True) + NORM_EPS) * self.norm_weight
        o = o.flatten(-2)
        if self.p.output_gate:
            o = o * F.silu(self.gate(x))
        return self.out(o)

    def forward(self, x, input_ids=None, rope=None):
        """x: (b, l, d) -> (b, l, d)."""
        u = self.qkv(x)
        if self.p.conv_size:
            u = causal_depthwise_conv(u, self.conv_weight)
        q, k, v, beta, log_alpha = (None if t is None else t.transpose(1, 2) for t in self.heads(u, x))
        o, _ = delta_rule_chunk(q, k, v, beta, log_alpha, self.p.chunk_size)
        return self.finish(o.transpose(1, 2), x)

    def state_size(self) -> int:
        h = self.p.num_heads
        conv = (2 * self.dk + self.dv) * max(self.p.conv_size - 1, 0)
        return self.dk * self.dv // h + conv

    def init_state(self, batch, device=None, dtype=None):
        h = self.p.num_heads
        window = torch.zeros(
            batch, 2 * self.dk + self.dv, max(self.p.conv_size - 1, 0), device=device, dtype=dtype
        )
        memory = torch.zeros(batch, h, self.dk // h, self.dv // h, device=device, dtype=dtype)
        return window, memory

    def step(self, x_t, state):
        """x_t: (b, d) -> (y_t (b, d), (conv window (b, 2 dk + dv, conv_size - 1) oldest first,
        M (b, h, e, f)))."""
        window, memory = state
        u = self.qkv(x_t)
        if self.p.conv_size:
            window = torch.cat([window, u.unsqueeze(-1)], dim=-1)  # newest last
            u = (window * self.conv_weight.flip(-1)).sum(-1)
            window = window[..., 1:]
        q, k, v, beta, log_alpha = self.heads(u, x_t)
        o, memory = delta_rule_step(q, k, v, beta, memory, log_alpha)
        return self.finish(o, x_t), (window, memory)
