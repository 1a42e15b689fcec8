"""RWKV-4's WKV against ICLL Eq. 65 summed term by term (parity of the forms: test_parity.py)."""

import pytest
import torch

from mixerzoo.ops.wkv4 import wkv4_chunk, wkv4_recurrent


def naive_wkv(k, v, w, u):
    """ICLL Eq. 65 summed term by term, without any rescaling (float64, moderate keys)."""
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
    torch.testing.assert_close(wkv4_recurrent(*args)[0], expected)
    torch.testing.assert_close(wkv4_chunk(*args, chunk_size=chunk_size)[0], expected)


def test_large_keys_do_not_overflow_in_float32():
    k, v, w, u = inputs(scale=60.0, dtype=torch.float32)  # exp(k) alone would overflow float32
    expected = naive_wkv(k.double(), v.double(), w.double(), u.double())
    for wkv, _ in (wkv4_recurrent(k, v, w, u), wkv4_chunk(k, v, w, u, chunk_size=4)):
        assert torch.isfinite(wkv).all()
        torch.testing.assert_close(wkv.double(), expected, atol=1e-5, rtol=1e-5)


def test_final_state_holds_the_decayed_sums():
    """(aa, bb) e^pp after l steps = sum_s e^{(l-1-s) w + k_s} (v_s, 1): what step l + 1 reads."""
    k, v, w, u = inputs()
    l = k.shape[1]
    _, (aa, bb, pp) = wkv4_recurrent(k, v, w, u)
    weights = torch.exp((l - 1 - torch.arange(l, dtype=k.dtype))[:, None] * w + k)  # (b, l, d)
    torch.testing.assert_close(aa * torch.exp(pp), (weights * v).sum(1))
    torch.testing.assert_close(bb * torch.exp(pp), weights.sum(1))
