"""S4D: diagonal structured state space layer (Gu et al. 2022; ICLL App. A.9, Eq. 73-78).

Each of the d channels is an independent SSM with a complex diagonal A (S4D-Lin:
``A_n = -1/2 + i pi n``), B = 1, learned complex C and step dt, discretised by zero-order hold.
The parallel form convolves with the kernel ``K = (C dB, C dA dB, ...)`` (Eq. 75, a
Vandermonde product, ``ops/ssm_kernel.py``) by FFT (Eq. 76); the recurrent form runs
``h_t = dA h_{t-1} + dB u_t``, ``y_t = 2 Re(C h_t)`` (Eq. 73-74). As in the S4D layer: ``+ D u``,
GELU, then a position-wise ``Linear(d, 2d)`` followed by GLU.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from pydantic import Field
from torch import nn

from mixerzoo.mixers import SEQUENCE_MIXERS
from mixerzoo.mixers.base import SequenceMixer
from mixerzoo.ops.conv import fft_causal_conv
from mixerzoo.ops.ssm_kernel import (
    complex_from_pair,
    discretize_zoh,
    log_uniform_dt,
    s4d_lin_init,
    vandermonde_kernel,
)
from mixerzoo.registry import ConfigError


@SEQUENCE_MIXERS.register("s4d")
class S4D(SequenceMixer):
    """Diagonal S4 with an FFT-convolution parallel form and a complex diagonal recurrence.

    Shapes: x (b, l, d) -> (b, l, d); kernel (d, l); state (b, d, n/2) complex. Parameters:
      * ``d_state`` (64): n, real state size per channel (n/2 complex conjugate-pair modes); even.
      * ``dt_min`` (0.001), ``dt_max`` (0.1): range of the log-uniform initial step dt.
    """

    recurrent = True
    examples = [{}, {"d_state": 8}]

    class Params(SequenceMixer.Params):
        d_state: int = Field(64, ge=2, description="real state size per channel (even)")
        dt_min: float = Field(0.001, gt=0, description="smallest initial dt")
        dt_max: float = Field(0.1, gt=0, description="largest initial dt")

    def __init__(self, d_model: int, max_len: int = 2048, **params) -> None:
        super().__init__(d_model, max_len, **params)
        p = self.p
        if p.d_state % 2:
            raise ConfigError(f"mixer[s4d].d_state = {p.d_state}: must be even (conjugate pairs)")
        modes = p.d_state // 2
        self.log_dt = nn.Parameter(log_uniform_dt(d_model, p.dt_min, p.dt_max))
        log_neg_real, imag = s4d_lin_init(d_model, modes)
        self.log_neg_real = nn.Parameter(log_neg_real)
        self.imag = nn.Parameter(imag)
        # complex C stored as (real, imag) pairs, each N(0, 1/2) so that |C|^2 has mean 1 (S4D code)
        self.C = nn.Parameter(torch.randn(d_model, modes, 2) * 0.5**0.5)
        self.D = nn.Parameter(torch.randn(d_model))
        self.output_linear = nn.Linear(d_model, 2 * d_model)

    def discretized(self):
        """-> dt A (d, m), dB (d, m), C (d, m), all complex."""
        dt_a, d_b = discretize_zoh(self.log_dt, self.log_neg_real, self.imag)
        return dt_a, d_b, complex_from_pair(self.C)

    def finish(self, y, u):
        """y: (..., d) SSM output, u: (..., d) input -> (..., d): + D u, GELU, Linear + GLU."""
        y = F.gelu(y + self.D * u)
        return F.glu(self.output_linear(y), dim=-1)

    def forward(self, x, input_ids=None, rope=None):
        """x: (b, l, d) -> (b, l, d)."""
        dt_a, d_b, c = self.discretized()
        kernel = vandermonde_kernel(dt_a, c * d_b, x.shape[1]).to(x.dtype)  # (d, l)
        y = fft_causal_conv(x.transpose(1, 2), kernel).transpose(1, 2)
        return self.finish(y, x)

    def state_size(self) -> int:
        return self.d_model * self.p.d_state

    def init_state(self, batch, device=None, dtype=None):
        real = torch.zeros(batch, self.d_model, self.p.d_state // 2, device=device, dtype=dtype)
        return torch.complex(real, real)

    def step(self, x_t, state):
        """x_t: (b, d) -> (y_t (b, d), h (b, d, n/2) complex); Eq. 73-74 with conjugate pairs."""
        dt_a, d_b, c = self.discretized()
        state = torch.exp(dt_a) * state + d_b * x_t.unsqueeze(-1)
        y = 2.0 * (state * c).sum(-1).real
        return self.finish(y, x_t), state
