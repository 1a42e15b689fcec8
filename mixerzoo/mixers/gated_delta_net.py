"""Gated DeltaNet (Yang, Kautz, Hatamizadeh 2024/25, "Gated Delta Networks: Improving Mamba2 with
Delta Rule", ICLR 2025).

The delta rule of DeltaNet with Mamba-2's scalar decay per head and step (Eq. 10):
``S_t = alpha_t S_{t-1}(I - beta_t k_t k_t^T) + beta_t v_t k_t^T``, ``o_t = S_t q_t``. alpha
forgets the whole state quickly when the context changes, the delta rule edits one key at a
time. As in Mamba-2 and the authors' layer (flash-linear-attention, zoology),
``log alpha_t = -exp(A_log) * softplus(x_t W_a + dt_bias)`` per head, with ``A`` drawn uniform
in (0, 16) and ``dt_bias`` the inverse softplus of a log-uniform step in [0.001, 0.1]. The rest
of the layer is DeltaNet's (``delta_net.py``: short convolutions + SiLU on q, k, v, L2-normalised
q and k, sigmoid beta, per-head RMSNorm) with the paper's defaults: the output gate
``swish(x W_g)`` on (Fig. 1) and value width 2 d (fla's ``expand_v = 2``).

``forward`` runs the chunkwise WY form with the chunk-local cumulative log decay
(``ops/delta_rule.py``); ``step`` runs the recurrence.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from pydantic import Field
from torch import nn

from mixerzoo.mixers import SEQUENCE_MIXERS
from mixerzoo.mixers.delta_net import DeltaNet

DT_MIN, DT_MAX = 0.001, 0.1  # Mamba-2's initial step range, as the authors' layer
A_MAX = 16.0  # A ~ U(0, 16), as the authors' layer


@SEQUENCE_MIXERS.register("gated_delta_net")
class GatedDeltaNet(DeltaNet):
    """DeltaNet with a data-dependent scalar decay alpha per head and step.

    Shapes and parameters as ``delta_net`` (state M (b, h, e, f) and the convolution window),
    with the paper's defaults ``expand_v`` = 2.0 and ``output_gate`` = True; the decay adds
    ``W_a`` (d -> h), ``A_log`` (h) and ``dt_bias`` (h).
    """

    examples = [
        {},
        {"num_heads": 2, "chunk_size": 5},
        {"num_heads": 4, "conv_size": 0, "output_gate": False, "chunk_size": 7},
        {"num_heads": 2, "expand_v": 1.0, "conv_size": 2},
    ]

    class Params(DeltaNet.Params):
        expand_v: float = Field(2.0, gt=0, description="value width / d_model")
        output_gate: bool = Field(True, description="gate the normalised output by swish(x W_g)")

    def __init__(self, d_model: int, max_len: int = 2048, **params) -> None:
        super().__init__(d_model, max_len, **params)
        h = self.p.num_heads
        self.decay = nn.Linear(d_model, h, bias=False)
        self.A_log = nn.Parameter(torch.log(torch.empty(h).uniform_(0, A_MAX).clamp(min=1e-4)))
        dt = torch.exp(torch.rand(h) * (math.log(DT_MAX) - math.log(DT_MIN)) + math.log(DT_MIN))
        self.dt_bias = nn.Parameter(dt + torch.log(-torch.expm1(-dt)))  # inverse softplus

    def log_decay(self, x):
        """x: (..., d) -> log alpha (..., h) = -exp(A_log) softplus(x W_a + dt_bias) <= 0."""
        return -torch.exp(self.A_log) * F.softplus(self.decay(x) + self.dt_bias)
