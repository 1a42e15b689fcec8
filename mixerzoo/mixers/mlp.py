"""State (channel) mixers: MLP and gated linear units, applied at every position."""

from __future__ import annotations

from typing import Literal

import torch.nn.functional as F
from pydantic import Field
from torch import nn

from mixerzoo.mixers import STATE_MIXERS
from mixerzoo.mixers.base import StateMixer

ACTIVATIONS = {"gelu": F.gelu, "relu": F.relu, "silu": F.silu, "sigmoid": F.sigmoid}


@STATE_MIXERS.register("mlp")
class MLP(StateMixer):
    """Two-layer MLP ``W2 act(W1 x)``. Shapes (b, l, d) -> (b, l, d).

    Parameters: ``hidden_mult`` (4) hidden width = hidden_mult * d; ``activation`` ("gelu");
    ``bias`` (True): biases on both linear maps (nanoGPT's ``bias=False`` has none).
    """

    class Params(StateMixer.Params):
        hidden_mult: float = Field(4.0, gt=0, description="hidden width / d_model")
        activation: Literal["gelu", "relu", "silu"] = Field("gelu", description="nonlinearity")
        bias: bool = Field(True, description="biases on both linear maps")

    def __init__(self, d_model: int, **params) -> None:
        super().__init__(d_model, **params)
        hidden = max(1, int(round(self.p.hidden_mult * d_model)))
        self.fc1 = nn.Linear(d_model, hidden, bias=self.p.bias)
        self.fc2 = nn.Linear(hidden, d_model, bias=self.p.bias)

    def forward(self, x):
        return self.fc2(ACTIVATIONS[self.p.activation](self.fc1(x)))


@STATE_MIXERS.register("glu")
class GLU(StateMixer):
    """Gated linear unit ``W3 (act(W1 x) ⊙ W2 x)`` (Dauphin et al. 2017; Shazeer 2020).

    Parameters: ``hidden_mult`` (8/3, parameter-matched to a 4x MLP); ``activation`` ("sigmoid").
    """

    class Params(StateMixer.Params):
        hidden_mult: float = Field(8.0 / 3.0, gt=0, description="hidden width / d_model")
        activation: Literal["sigmoid", "silu", "gelu", "relu"] = Field("sigmoid", description="gate")

    def __init__(self, d_model: int, **params) -> None:
        super().__init__(d_model, **params)
        hidden = max(1, int(round(self.p.hidden_mult * d_model)))
        self.gate = nn.Linear(d_model, hidden, bias=False)
        self.up = nn.Linear(d_model, hidden, bias=False)
        self.down = nn.Linear(hidden, d_model, bias=False)

    def forward(self, x):
        return self.down(ACTIVATIONS[self.p.activation](self.gate(x)) * self.up(x))


@STATE_MIXERS.register("swiglu")
class SwiGLU(GLU):
    """GLU with the SiLU (swish) gate (Shazeer 2020), as in LLaMA-style blocks."""

    class Params(GLU.Params):
        activation: Literal["sigmoid", "silu", "gelu", "relu"] = Field("silu", description="gate")
