"""Based against a per-query loop: closed-form Taylor kernel 1 + a + a^2/2 and an explicit window."""

from __future__ import annotations

import math

import pytest
import torch

from mixerzoo.mixers.based import Based, taylor_feature_map


def loop_reference(m: Based, x: torch.Tensor) -> torch.Tensor:
    b, l, d = x.shape
    h, f, w = m.p.num_heads, m.p.feature_dim, m.p.window
    e = d // h
    q, k = (t.reshape(b, l, h, f) for t in m.qk_lin(x).chunk(2, dim=-1))
    v = m.v_lin(x).reshape(b, l, h, e)
    qw, kw, vw = (t.reshape(b, l, h, e) for t in m.qkv_win(x).chunk(3, dim=-1))
    y = torch.zeros(b, l, h, e, dtype=x.dtype)
    for bi in range(b):
        for hi in range(h):
            for t in range(l):
                a = torch.stack([q[bi, t, hi] @ k[bi, s, hi] for s in range(t + 1)]) / math.sqrt(f)
                kern = 1 + a + a**2 / 2  # Taylor expansion of exp(a) to 2nd order
                lin = sum(kern[s] * v[bi, s, hi] for s in range(t + 1)) / (kern.sum() + 1e-6)
                lo = max(0, t - w + 1)
                sc = torch.stack([qw[bi, t, hi] @ kw[bi, s, hi] for s in range(lo, t + 1)]) / math.sqrt(e)
                p = torch.softmax(sc, 0)
                win = sum(p[i] * vw[bi, s, hi] for i, s in enumerate(range(lo, t + 1)))
                y[bi, t, hi] = lin + win
    return m.out(y.reshape(b, l, d))


@pytest.mark.parametrize(
    "params", [{"feature_dim": 4, "window": 3}, {"num_heads": 2, "feature_dim": 3, "window": 7}]
)
def test_forward_matches_loop_reference(params):
    torch.manual_seed(0)
    m = Based(8, **params).double()
    x = torch.randn(2, 21, 8, dtype=torch.float64)
    torch.testing.assert_close(m(x), loop_reference(m, x))


def test_taylor_features_reproduce_the_kernel():
    q, k = torch.randn(2, 5, 16, dtype=torch.float64).unbind(0)
    a = (q * k).sum(-1) / 4.0
    got = (taylor_feature_map(q) * taylor_feature_map(k)).sum(-1)
    torch.testing.assert_close(got, 1 + a + a**2 / 2)
    assert taylor_feature_map(q).shape[-1] == 1 + 16 + 256


@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-5), (torch.float64, 1e-10)])
def test_step_matches_forward_past_the_window(dtype, tol):
    torch.manual_seed(1)
    m = Based(16, num_heads=2, feature_dim=8, window=6).to(dtype).eval()
    x = torch.randn(3, 80, 16, dtype=dtype)
    with torch.no_grad():
        y = m(x)
        state = m.init_state(3, dtype=dtype)
        steps = []
        for t in range(80):
            y_t, state = m.step(x[:, t], state)
            steps.append(y_t)
    torch.testing.assert_close(torch.stack(steps, 1), y, atol=tol, rtol=tol)
    assert state["k"].shape[2] == 6  # the cache holds exactly the window


def test_state_size_counts_linear_state_and_window_cache():
    m = Based(64, num_heads=2, feature_dim=16, window=64)
    assert m.state_size() == 2 * 273 * 32 + 2 * 273 + 2 * 64 * 64
