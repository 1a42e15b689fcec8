"""Long convolution with squash + smoothing (Fu et al. 2023c) against hand-computed references."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from mixerzoo.mixers import SEQUENCE_MIXERS
from mixerzoo.mixers.long_conv import smooth, squash
from mixerzoo.registry import ConfigError


def test_squash_is_soft_threshold():
    k = torch.tensor([[0.5, -0.5, 0.05, -0.05, 0.1, 0.0]])
    assert torch.allclose(squash(k, 0.1), torch.tensor([[0.4, -0.4, 0.0, 0.0, 0.0, 0.0]]))


def test_smoothing_is_centred_moving_average_with_zero_padding():
    k = torch.tensor([[3.0, 0.0, 0.0, 6.0, 0.0]])
    assert torch.allclose(smooth(k, 3), torch.tensor([[1.0, 1.0, 2.0, 2.0, 2.0]]))
    assert torch.equal(smooth(k, 1), k)


def reference_filter(raw, lam, width):
    c, w = raw.shape
    half = width // 2
    out = torch.zeros_like(raw)
    for i in range(w):
        window = [raw[:, j] for j in range(i - half, i + half + 1) if 0 <= j < w]
        avg = torch.stack(window, 1).sum(1) / width  # padded taps count as zeros
        out[:, i] = torch.where(avg.abs() > lam, avg - lam * avg.sign(), torch.zeros_like(avg))
    return out


@pytest.mark.parametrize(
    "params", [{}, {"lam": 0.0, "smoothing_width": 1}, {"lam": 0.3, "smoothing_width": 5}]
)
def test_matches_direct_causal_convolution(params):
    torch.manual_seed(0)
    m = SEQUENCE_MIXERS.get("long_conv")(4, 16, **params).double().eval()
    with torch.no_grad():
        m.kernel.normal_()  # unit-scale taps so the threshold bites only some of them
    x = torch.randn(2, 12, 4, dtype=torch.float64)
    k = reference_filter(m.kernel.detach(), m.p.lam, m.p.smoothing_width)
    y = torch.zeros_like(x)
    for t in range(12):
        for s in range(t + 1):
            y[:, t] += k[:, s] * x[:, t - s]
    y = F.gelu(y + x * m.D)
    expected = y @ m.out_proj.weight.T + m.out_proj.bias
    torch.testing.assert_close(m(x), expected, atol=1e-10, rtol=1e-8)


def test_squash_makes_filters_sparse():
    m = SEQUENCE_MIXERS.get("long_conv")(8, 64, lam=0.5, smoothing_width=1)
    with torch.no_grad():
        m.kernel.normal_()
    k = m.filters()
    expected_zero = (m.kernel.abs() <= 0.5).float().mean()
    assert (k == 0).float().mean() == expected_zero
    assert 0.2 < expected_zero < 0.6


def test_longer_than_filter_is_config_error():
    m = SEQUENCE_MIXERS.get("long_conv")(4, 8)
    with pytest.raises(ConfigError, match="max_len"):
        m(torch.randn(1, 9, 4))


def test_even_smoothing_width_is_config_error():
    with pytest.raises(ConfigError, match="smoothing_width"):
        SEQUENCE_MIXERS.get("long_conv")(4, 8, smoothing_width=4)
