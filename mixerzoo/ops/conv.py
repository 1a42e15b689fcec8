"""Causal convolutions: short depthwise filters and long filters via FFT.

Shapes: ``x`` (b, l, c); a filter tap ``f[..., i]`` multiplies ``x[t - i]`` (lag i),
matching the papers' ``(F * X)_t = sum_i F_i x_{t-i}`` (CAT Sec. 3.1).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def causal_depthwise_conv(x: torch.Tensor, filt: torch.Tensor) -> torch.Tensor:
    """x: (b, l, c), filt: (c, w) with ``filt[:, i]`` the lag-i tap -> (b, l, c)."""
    c, w = filt.shape
    weight = filt.flip(-1).unsqueeze(1)  # conv1d correlates; flip so tap 0 is lag 0
    y = F.conv1d(F.pad(x.transpose(1, 2), (w - 1, 0)), weight, groups=c)
    return y.transpose(1, 2)


def causal_channel_mixing_conv(x: torch.Tensor, filt: torch.Tensor) -> torch.Tensor:
    """Multi-channel causal conv. x: (b, l, c_in), filt: (c_out, c_in, w) lag-indexed -> (b, l, c_out)."""
    w = filt.shape[-1]
    y = F.conv1d(F.pad(x.transpose(1, 2), (w - 1, 0)), filt.flip(-1))
    return y.transpose(1, 2)


def fft_causal_conv(u: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """Long causal convolution via FFT (Zoology App. B, Listing 1).

    u: (b, c, l), k: (c, l_k) with ``l_k >= l`` or shorter (zero-extended) -> (b, c, l).
    Zero-padding to 2l makes the circular FFT product a linear, hence causal, convolution.
    """
    seqlen = u.shape[-1]
    n = 2 * seqlen
    k = k[..., :seqlen]
    work = torch.promote_types(u.dtype, torch.float32)  # FFT in at least fp32
    k_f = torch.fft.rfft(k.to(work), n=n)
    u_f = torch.fft.rfft(u.to(work), n=n)
    y = torch.fft.irfft(u_f * k_f, n=n)[..., :seqlen]
    return y.to(u.dtype)
