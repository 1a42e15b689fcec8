import torch

from mixerzoo.ops.conv import causal_channel_mixing_conv, causal_depthwise_conv, fft_causal_conv


def direct(x, taps):
    """y[b, t, c] = sum_i taps[c, i] * x[b, t - i, c] (zero before the start)."""
    b, l, c = x.shape
    y = torch.zeros_like(x)
    for t in range(l):
        for i in range(taps.shape[1]):
            if t - i >= 0:
                y[:, t] += taps[:, i] * x[:, t - i]
    return y


def test_depthwise_conv_is_lag_indexed_causal_convolution():
    x = torch.randn(2, 9, 3, dtype=torch.float64)
    f = torch.randn(3, 4, dtype=torch.float64)
    torch.testing.assert_close(causal_depthwise_conv(x, f), direct(x, f))


def test_delay_filter_shifts_by_one():
    x = torch.randn(1, 6, 2)
    f = torch.tensor([[0.0, 1.0], [0.0, 1.0]])  # D_1 of CAT Sec. 3.1
    y = causal_depthwise_conv(x, f)
    torch.testing.assert_close(y[:, 1:], x[:, :-1])
    assert (y[:, 0] == 0).all()


def test_fft_conv_equals_direct_long_convolution():
    x = torch.randn(2, 17, 3, dtype=torch.float64)
    k = torch.randn(3, 17, dtype=torch.float64)
    y = fft_causal_conv(x.transpose(1, 2), k).transpose(1, 2)
    torch.testing.assert_close(y, direct(x, k))


def test_channel_mixing_conv():
    x = torch.randn(2, 7, 3, dtype=torch.float64)
    f = torch.randn(2, 3, 3, dtype=torch.float64)  # (out, in, w)
    y = causal_channel_mixing_conv(x, f)
    ref = torch.zeros(2, 7, 2, dtype=torch.float64)
    for t in range(7):
        for i in range(3):
            if t - i >= 0:
                ref[:, t] += x[:, t - i] @ f[:, :, i].T
    torch.testing.assert_close(y, ref)
