import pytest
import torch

from mixerzoo.mixers import SEQUENCE_MIXERS
from mixerzoo.mixers.rwkv import chunked_wkv, sequential_wkv


def naive_wkv(k, v, w, u):
    """004 Eq. 65 summed term by term, without any rescaling (float64, moderate keys)."""
    b, l, d = k.shape
    out = torch.zeros_like(v)
    for t in range(l):
        num = torch.exp(u + k[:, t]) * v[:, t]
        den = torch.exp(u + k[:, t])
        for s in range(t):
            weight = torch.exp((t - 1 - s) * w + k[:, s])
            num, den = num + weight * v[:, s], den + weight
        out[:, t] = num / den
    return out


def inputs(scale=1.0, dtype=torch.float64):
    g = torch.Generator().manual_seed(0)
    k = torch.randn(2, 19, 5, generator=g, dtype=dtype) * scale
    v = torch.randn(2, 19, 5, generator=g, dtype=dtype)
    w = -torch.exp(torch.randn(5, generator=g, dtype=dtype))
    u = torch.randn(5, generator=g, dtype=dtype)
    return k, v, w, u


@pytest.mark.parametrize("chunk_size", [1, 4, 6, 32])
def test_chunked_and_sequential_match_naive_sum(chunk_size):
    args = inputs()
    expected = naive_wkv(*args)
    torch.testing.assert_close(sequential_wkv(*args), expected)
    torch.testing.assert_close(chunked_wkv(*args, chunk_size=chunk_size), expected)


def test_large_keys_do_not_overflow_in_float32():
    k, v, w, u = inputs(scale=60.0, dtype=torch.float32)  # exp(k) alone would overflow float32
    expected = naive_wkv(k.double(), v.double(), w.double(), u.double())
    for wkv in (sequential_wkv(k, v, w, u), chunked_wkv(k, v, w, u, chunk_size=4)):
        assert torch.isfinite(wkv).all()
        torch.testing.assert_close(wkv.double(), expected, atol=1e-5, rtol=1e-5)


def test_module_token_shift_and_receptance_gate():
    torch.manual_seed(0)
    m = SEQUENCE_MIXERS.get("rwkv")(6).double()
    x = torch.randn(2, 9, 6, dtype=torch.float64)
    prev = torch.cat([torch.zeros(2, 1, 6, dtype=torch.float64), x[:, :-1]], dim=1)
    k = m.key(m.mix_k * x + (1 - m.mix_k) * prev)
    v = m.value(m.mix_v * x + (1 - m.mix_v) * prev)
    r = m.receptance(m.mix_r * x + (1 - m.mix_r) * prev)
    expected = m.output(torch.sigmoid(r) * naive_wkv(k, v, -torch.exp(m.time_decay), m.time_first))
    torch.testing.assert_close(m(x), expected)
