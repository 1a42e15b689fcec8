"""Based against its definition: a per-query loop (short conv, closed-form Taylor kernel
1 + a + a^2/2, explicit window), and the structure itself (identity conv and window 1 give a
hand-computed Taylor linear attention; the window is honoured; the short conv is causal)."""

from __future__ import annotations

import math

import pytest
import torch

from mixerzoo.mixers.based import Based, taylor_feature_map


def loop_reference(m: Based, x: torch.Tensor) -> torch.Tensor:
    b, l, d = x.shape
    h, f, w, cw = m.p.num_heads, m.p.feature_dim, m.p.window, m.p.conv_width
    e = d // h
    c = m.conv_weight  # (d, cw), tap i multiplies x[t - i]
    u = torch.stack([sum(c[:, i] * x[:, t - i] for i in range(min(cw, t + 1))) for t in range(l)], dim=1)
    q, k = (t.reshape(b, l, h, f) for t in m.qk_lin(u).chunk(2, dim=-1))
    v = m.v_lin(u).reshape(b, l, h, e)
    if w:
        qw, kw, vw = (t.reshape(b, l, h, e) for t in m.qkv_win(u).chunk(3, dim=-1))
    y = torch.zeros(b, l, h, e, dtype=x.dtype)
    for bi in range(b):
        for hi in range(h):
            for t in range(l):
                a = torch.stack([q[bi, t, hi] @ k[bi, s, hi] for s in range(t + 1)]) / math.sqrt(f)
                kern = 1 + a + a**2 / 2  # Taylor expansion of exp(a) to 2nd order
                y[bi, t, hi] = sum(kern[s] * v[bi, s, hi] for s in range(t + 1)) / (kern.sum() + 1e-6)
                if w:
                    lo = max(0, t - w + 1)
                    sc = torch.stack([qw[bi, t, hi] @ kw[bi, s, hi] for s in range(lo, t + 1)]) / math.sqrt(e)
                    p = torch.softmax(sc, 0)
                    y[bi, t, hi] += sum(p[i] * vw[bi, s, hi] for i, s in enumerate(range(lo, t + 1)))
    return m.out(y.reshape(b, l, d))


@pytest.mark.parametrize(
    "params",
    [
        {"feature_dim": 4, "window": 3},
        {"num_heads": 2, "feature_dim": 3, "window": 7, "conv_width": 4},
        {"feature_dim": 2, "window": 0, "conv_width": 1},
    ],
)
def test_forward_matches_loop_reference(params):
    torch.manual_seed(0)
    m = Based(8, **params).double()
    x = torch.randn(2, 21, 8, dtype=torch.float64)
    torch.testing.assert_close(m(x), loop_reference(m, x))


def test_defaults_are_zoologys_synthetic_based():
    m = Based(64)
    assert (m.p.feature_dim, m.p.conv_width, m.p.num_heads) == (8, 3, 1)
    assert m.p.window < 64  # not full softmax attention at the MQAR length L = 64


def test_identity_conv_and_window_one_is_taylor_linear_attention_plus_the_own_value():
    """With the conv the identity and w = 1 the softmax branch returns v_t, so
    y_t = W_o (sum_s K(q_t, k_s) v_s / sum_s K(q_t, k_s) + v^win_t), K = 1 + a + a^2 / 2."""
    torch.manual_seed(2)
    d, f, l = 4, 2, 6
    m = Based(d, feature_dim=f, window=1, conv_width=3).double()
    with torch.no_grad():
        m.conv_weight.zero_()
        m.conv_weight[:, 0] = 1.0  # lag-0 tap only: u = x
    x = torch.randn(1, l, d, dtype=torch.float64)
    wq, wk = m.qk_lin.weight.detach().chunk(2, dim=0)
    wv, (_, _, wv_win) = m.v_lin.weight.detach(), m.qkv_win.weight.detach().chunk(3, dim=0)
    expected = []
    for t in range(l):
        num, den = torch.zeros(d, dtype=torch.float64), 0.0
        for s in range(t + 1):
            a = float((wq @ x[0, t]) @ (wk @ x[0, s])) / math.sqrt(f)
            kern = 1 + a + a * a / 2
            num, den = num + kern * (wv @ x[0, s]), den + kern
        expected.append(m.out.weight.detach() @ (num / (den + 1e-6) + wv_win @ x[0, t]))
    torch.testing.assert_close(m(x)[0], torch.stack(expected))


def test_tokens_beyond_the_window_reach_the_output_only_through_the_linear_branch():
    torch.manual_seed(3)
    d, w, cw, l = 8, 4, 3, 20
    m = Based(d, window=w, conv_width=cw).double()
    x = torch.randn(2, l, d, dtype=torch.float64)
    t = l - 1
    far = t - w - (cw - 1)  # x[far] reaches u only at positions far .. far + cw - 1 < t - w + 1
    x2 = x.clone()
    x2[:, far] += 5.0
    assert not torch.allclose(m(x2)[:, t], m(x)[:, t])  # the linear branch sees it
    with torch.no_grad():
        m.v_lin.weight.zero_()  # silence the linear branch: its output is 0
    torch.testing.assert_close(m(x2)[:, t], m(x)[:, t])
    near = far + 1  # inside the window (through the conv): the window branch sees it
    x3 = x.clone()
    x3[:, near] += 5.0
    assert not torch.allclose(m(x3)[:, t], m(x)[:, t])


def test_short_conv_is_causal_and_exactly_conv_width_long():
    torch.manual_seed(4)
    m = Based(6, conv_width=3).double()
    x = torch.randn(2, 10, 6, dtype=torch.float64)
    u = m.short_conv(x)
    t = 6
    for s, changes in ((t + 1, False), (t, True), (t - 2, True), (t - 3, False)):
        x2 = x.clone()
        x2[:, s] += 1.0
        assert torch.allclose(m.short_conv(x2)[:, t], u[:, t]) is not changes, s
    torch.testing.assert_close(u[:, t], sum(m.conv_weight[:, i] * x[:, t - i] for i in range(3)))


def test_taylor_features_reproduce_the_kernel():
    q, k = torch.randn(2, 5, 16, dtype=torch.float64).unbind(0)
    a = (q * k).sum(-1) / 4.0
    got = (taylor_feature_map(q) * taylor_feature_map(k)).sum(-1)
    torch.testing.assert_close(got, 1 + a + a**2 / 2)
    assert taylor_feature_map(q).shape[-1] == 1 + 16 + 256


@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-5), (torch.float64, 1e-10)])
def test_step_matches_forward_past_the_window(dtype, tol):
    torch.manual_seed(1)
    m = Based(16, num_heads=2, feature_dim=8, window=6, conv_width=4).to(dtype).eval()
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
    assert state["conv"].shape[2] == 3  # and the conv its last conv_width - 1 inputs


def test_state_size_counts_linear_state_window_cache_and_conv():
    m = Based(64, num_heads=2, feature_dim=16, window=64, conv_width=3)
    assert m.state_size() == 2 * 273 * 32 + 2 * 273 + 2 * 64 * 64 + 2 * 64
    assert Based(64, window=0, conv_width=1).state_size() == 73 * 64 + 73
