"""H3: shift SSM on keys, diagonal SSM on key-value products (Fu et al. 2023a, Sec. 3.2; ICLL App. A.10).

``y = W_o (q ⊙ SSM_diag(SSM_shift(k) ⊙ v))`` (Fu et al. Eq. in Sec. 3.2; ICLL Eq. 79-85).
  * The shift SSM (A = shift matrix, B = e_1) keeps the last ``shift_state`` keys in its state,
    so its output is a causal convolution with ``shift_state`` learned taps (``C``); it is
    implemented as exactly that.
  * The diagonal SSM is S4D (``ops/ssm_kernel.py``), one kernel per head plus a D skip, applied
    by FFT to every entry of the head's ``k v^T`` outer product (``head_dim`` x ``head_dim``);
    ``head_dim = 1`` (H3's default) makes the product elementwise.
  * ``q`` then contracts the key index: ``z_i = sum_a q_a SSM(k_a v_i)``.
The recurrent form keeps the last ``shift_state - 1`` keys and the complex diagonal state.
"""

from __future__ import annotations

import torch
from pydantic import Field
from torch import nn

from mixerzoo.mixers import SEQUENCE_MIXERS
from mixerzoo.mixers.base import SequenceMixer
from mixerzoo.ops.conv import causal_depthwise_conv, fft_causal_conv
from mixerzoo.ops.ssm_kernel import (
    complex_from_pair,
    discretize_zoh,
    log_uniform_dt,
    s4d_lin_init,
    vandermonde_kernel,
)
from mixerzoo.registry import ConfigError


@SEQUENCE_MIXERS.register("h3")
class H3(SequenceMixer):
    """Hungry Hungry Hippos: q ⊙ diagonal-SSM(shift-SSM(k) ⊙ v), multi-head outer products.

    Shapes: x (b, l, d) -> (b, l, d); heads h = d / e with e = ``head_dim``; key-value products
    (b, l, h, e, e); diagonal SSM state (b, h, e, e, n/2) complex. Parameters:
      * ``head_dim`` (1): e; 1 is H3's elementwise ``k ⊙ v``, larger values use outer products.
      * ``d_state`` (64): real state size n of the diagonal SSM (n/2 complex modes); even.
      * ``shift_state`` (64): state size of the shift SSM = taps of its causal filter on k.
      * ``dt_min`` (0.001), ``dt_max`` (0.1): range of the diagonal SSM's initial dt.
    """

    recurrent = True
    examples = [{}, {"head_dim": 8}, {"head_dim": 2, "d_state": 4, "shift_state": 3}]

    class Params(SequenceMixer.Params):
        head_dim: int = Field(1, ge=1, description="head width e (outer-product size)")
        d_state: int = Field(64, ge=2, description="diagonal SSM real state size (even)")
        shift_state: int = Field(64, ge=1, description="shift SSM state size (filter taps on k)")
        dt_min: float = Field(0.001, gt=0, description="smallest initial dt")
        dt_max: float = Field(0.1, gt=0, description="largest initial dt")

    def __init__(self, d_model: int, max_len: int = 2048, **params) -> None:
        super().__init__(d_model, max_len, **params)
        p = self.p
        if d_model % p.head_dim:
            raise ConfigError(f"mixer[h3].head_dim = {p.head_dim}: must divide d_model = {d_model}")
        if p.d_state % 2:
            raise ConfigError(f"mixer[h3].d_state = {p.d_state}: must be even (conjugate pairs)")
        self.heads = d_model // p.head_dim
        modes = p.d_state // 2
        self.q = nn.Linear(d_model, d_model)
        self.k = nn.Linear(d_model, d_model)
        self.v = nn.Linear(d_model, d_model)
        self.out = nn.Linear(d_model, d_model)
        # shift SSM: C of (A = shift, B = e_1), i.e. lag-indexed filter taps on each key channel
        self.shift_taps = nn.Parameter(torch.randn(d_model, p.shift_state) / p.shift_state**0.5)
        self.log_dt = nn.Parameter(log_uniform_dt(self.heads, p.dt_min, p.dt_max))
        log_neg_real, imag = s4d_lin_init(self.heads, modes)
        self.log_neg_real = nn.Parameter(log_neg_real)
        self.imag = nn.Parameter(imag)
        self.C = nn.Parameter(torch.randn(self.heads, modes, 2) * 0.5**0.5)
        self.D = nn.Parameter(torch.randn(self.heads))

    def forward(self, x, input_ids=None, rope=None):
        """x: (b, l, d) -> (b, l, d)."""
        b, l, _ = x.shape
        h, e = self.heads, self.p.head_dim
        q, v = self.q(x), self.v(x)
        k = causal_depthwise_conv(self.k(x), self.shift_taps)
        kv = k.view(b, l, h, e, 1) * v.view(b, l, h, 1, e)  # (b, l, h, e, e)
        dt_a, d_b = discretize_zoh(self.log_dt, self.log_neg_real, self.imag)
        kernel = vandermonde_kernel(dt_a, complex_from_pair(self.C) * d_b, l).to(x.dtype)  # (h, l)
        kernel = kernel[:, None, None, :].expand(h, e, e, l).reshape(h * e * e, l)
        conv = fft_causal_conv(kv.reshape(b, l, h * e * e).transpose(1, 2), kernel)
        kv = conv.transpose(1, 2).view(b, l, h, e, e) + self.D[:, None, None] * kv
        y = (q.view(b, l, h, e, 1) * kv).sum(3)  # contract the key index
        return self.out(y.reshape(b, l, -1))

    def state_size(self) -> int:
        e = self.p.head_dim
        return self.d_model * (self.p.shift_state - 1) + self.heads * e * e * self.p.d_state

    def init_state(self, batch, device=None, dtype=None):
        e = self.p.head_dim
        keys = torch.zeros(batch, self.d_model, self.p.shift_state - 1, device=device, dtype=dtype)
        real = torch.zeros(batch, self.heads, e, e, self.p.d_state // 2, device=device, dtype=dtype)
        return keys, torch.complex(real, real)

    def step(self, x_t, state):
        """x_t: (b, d) -> (y_t (b, d), (last keys (b, d, shift_state-1) oldest first, SSM state))."""
        keys, ssm = state
        b = x_t.shape[0]
        h, e = self.heads, self.p.head_dim
        q, v = self.q(x_t), self.v(x_t)
        window = torch.cat([keys, self.k(x_t).unsqueeze(-1)], dim=-1)  # newest last
        k = (window * self.shift_taps.flip(-1)).sum(-1)
        kv = k.view(b, h, e, 1) * v.view(b, h, 1, e)
        dt_a, d_b = discretize_zoh(self.log_dt, self.log_neg_real, self.imag)
        c = complex_from_pair(self.C)
        ssm = torch.exp(dt_a)[:, None, None] * ssm + d_b[:, None, None] * kv.unsqueeze(-1)
        kv = 2.0 * (ssm * c[:, None, None]).sum(-1).real + self.D[:, None, None] * kv
        y = (q.view(b, h, e, 1) * kv).sum(2)
        return self.out(y.reshape(b, -1)), (window[..., 1:], ssm)
