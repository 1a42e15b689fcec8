"""Diagonal state-space kernels (S4D; Gu et al. 2022, "On the parameterization and initialization
of diagonal state space models"), shared by ``s4d`` and ``h3``.

Per channel ``c`` the continuous SSM ``h' = A h + B u, y = Re(C h)`` has a diagonal complex
``A`` of ``n/2`` modes; the conjugate modes are implied, hence the factor 2 on ``Re``.
Zero-order hold with step ``dt`` gives ``dA = exp(dt A)``, ``dB = (dA - 1) / A * B`` (S4D Eq. 4),
and the convolution kernel ``K_l = 2 Re(sum_n C_n dB_n dA_n^l)`` is a Vandermonde product
(ICLL Eq. 75). Shapes: ``c`` channels, ``m = n/2`` complex modes, ``l`` kernel length.
"""

from __future__ import annotations

import math

import torch


def s4d_lin_init(channels: int, modes: int) -> tuple[torch.Tensor, torch.Tensor]:
    """S4D-Lin: ``A_n = -1/2 + i pi n``. Returns (log(-Re A), Im A), each (c, m), real."""
    log_neg_real = torch.full((channels, modes), math.log(0.5))
    imag = math.pi * torch.arange(modes, dtype=torch.float32).expand(channels, modes).clone()
    return log_neg_real, imag


def log_uniform_dt(channels: int, dt_min: float = 1e-3, dt_max: float = 1e-1) -> torch.Tensor:
    """log dt drawn uniformly in [log dt_min, log dt_max] (S4D's initialisation), (c,)."""
    return torch.rand(channels) * (math.log(dt_max) - math.log(dt_min)) + math.log(dt_min)


def complex_from_pair(x: torch.Tensor) -> torch.Tensor:
    """(..., 2) real -> (...) complex (real part first)."""
    return torch.complex(x[..., 0], x[..., 1])


def discretize_zoh(
    log_dt: torch.Tensor, log_neg_real: torch.Tensor, imag: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """ZOH with B = 1: returns ``dt A`` (so ``dA = exp(dt A)``) and ``dB = (dA - 1) / A``, complex (c, m)."""
    a = torch.complex(-torch.exp(log_neg_real), imag)
    dt_a = a * torch.exp(log_dt).unsqueeze(-1)
    return dt_a, (torch.exp(dt_a) - 1.0) / a


def vandermonde_kernel(dt_a: torch.Tensor, c_d_b: torch.Tensor, length: int) -> torch.Tensor:
    """``K_l = 2 Re(sum_m (C dB)_m dA_m^l)`` for l < length. dt_a, c_d_b: (c, m) complex -> (c, length).

    Writing ``l = q s + r`` with ``s ~ sqrt(length)``, ``dA^l = dA^{q s} dA^r``: two small tables of
    powers (``exp`` of ``(c, m, length / s)`` and ``(c, m, s)``) and one batched complex matmul
    replace ``c * m * length`` complex exponentials (the bulk of the cost otherwise).
    """
    s = max(1, math.isqrt(length))
    blocks = -(-length // s)
    real = dt_a.real.dtype
    fine = torch.exp(dt_a.unsqueeze(-1) * torch.arange(s, device=dt_a.device, dtype=real))  # dA^r
    coarse = torch.exp(dt_a.unsqueeze(-1) * (s * torch.arange(blocks, device=dt_a.device, dtype=real)))
    k = torch.einsum("cmq,cmr->cqr", c_d_b.unsqueeze(-1) * coarse, fine)  # (c, blocks, s)
    return 2.0 * k.reshape(k.shape[0], blocks * s)[:, :length].real
