"""Single-layer LSTM over the model width (Hochreiter & Schmidhuber 1997; ICLL App. A.7, Eq. 56-61).

``f, i, o = sigmoid(W x_t + U h_{t-1} + b)``, ``c~ = tanh(W_c x_t + U_c h_{t-1} + b_c)``,
``c_t = f ⊙ c_{t-1} + i ⊙ c~``, ``h_t = o ⊙ tanh(c_t)``; the output is ``h_t``. The parallel form
is ``torch.nn.LSTM``; ``step`` applies the same weights in the cell equations above.
ICLL stacks LSTM layers without feed-forward blocks; that is a model-level choice
(``state_mixer: null``), not part of this mixer.
"""

from __future__ import annotations

import torch
from torch import nn

from mixerzoo.mixers import SEQUENCE_MIXERS
from mixerzoo.mixers.base import SequenceMixer


@SEQUENCE_MIXERS.register("lstm")
class LSTM(SequenceMixer):
    """One LSTM layer with hidden size d. Shapes: x (b, l, d) -> (b, l, d); state (h, c) each (b, d).

    No parameters beyond ``d_model``.
    """

    recurrent = True
    examples = [{}]

    def __init__(self, d_model: int, max_len: int = 2048, **params) -> None:
        super().__init__(d_model, max_len, **params)
        self.lstm = nn.LSTM(d_model, d_model, batch_first=True)

    def forward(self, x, input_ids=None, rope=None):
        """x: (b, l, d) -> (b, l, d).

        Under CPU autocast the recurrence runs in float32: oneDNN has no bfloat16 LSTM primitive
        on CPUs without native bfloat16 ("could not create a primitive descriptor"), and a cell
        state carried across the sequence in bfloat16 loses the precision its gates need."""
        if x.device.type == "cpu" and torch.is_autocast_enabled("cpu"):
            with torch.autocast("cpu", enabled=False):
                return self.lstm(x.float())[0]
        return self.lstm(x)[0]

    def state_size(self) -> int:
        return 2 * self.d_model

    def init_state(self, batch, device=None, dtype=None):
        zeros = torch.zeros(batch, self.d_model, device=device, dtype=dtype)
        return zeros, zeros.clone()

    def step(self, x_t, state):
        """x_t: (b, d) -> (h_t (b, d), (h_t, c_t)); Eq. 56-61 with nn.LSTM's gate order (i, f, c~, o)."""
        h, c = state
        m = self.lstm
        gates = x_t @ m.weight_ih_l0.T + m.bias_ih_l0 + h @ m.weight_hh_l0.T + m.bias_hh_l0
        i, f, g, o = gates.chunk(4, dim=-1)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        h = torch.sigmoid(o) * torch.tanh(c)
        return h, (h, c)
