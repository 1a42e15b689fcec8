"""Hyena (paper 002 App. H.2.1, Poli et al. 2023a) against a direct, loop-based forward pass."""

from __future__ import annotations

import math

import pytest
import torch

from mixerzoo.mixers import SEQUENCE_MIXERS


def reference_filter(m, l):
    """Hyena's implicit filter from its definition: window(t) * MLP_sin([t, cos, -sin bands])."""
    f_mod = m.filter
    l_max, bands = m.max_len, (m.p.emb_dim - 1) // 2
    freqs = torch.linspace(1e-4, bands - 1, bands, dtype=torch.float64)
    rows = []
    for i in range(l):
        t = i / (l_max - 1)
        ang = 2 * math.pi * i / l_max
        rows.append([t] + [math.cos(f * ang) for f in freqs] + [-math.sin(f * ang) for f in freqs])
    z = torch.tensor(rows, dtype=torch.float64)
    layers = list(f_mod.mlp)
    for lin, act in zip(layers[0:-1:2], layers[1:-1:2]):
        z = torch.sin(act.freq * (z @ lin.weight.T + lin.bias))
    h = z @ layers[-1].weight.T  # (l, channels)
    c = h.shape[1]
    deltas = torch.linspace(math.log(1e-2) / m.p.fast_decay, math.log(1e-2) / m.p.slow_decay, c).abs()
    t = torch.arange(l, dtype=torch.float64).unsqueeze(1) / (l_max - 1)
    return (h * torch.exp(-t * deltas.double())).T  # (channels, l)


def direct_causal_conv(u, k):
    """u (b, l, c), k (c, w): y_t = sum_{s <= min(t, w - 1)} k[:, s] u_{t-s}, by loops."""
    y = torch.zeros_like(u)
    for t in range(u.shape[1]):
        for s in range(min(t + 1, k.shape[1])):
            y[:, t] += k[:, s] * u[:, t - s]
    return y


def reference_forward(m, x):
    d, order = m.d_model, m.p.order
    z = x @ m.in_proj.weight.T + m.in_proj.bias
    z = direct_causal_conv(z, m.short_weight) + m.short_bias  # short depthwise filter (Alg. 2)
    streams = z.split(d, dim=-1)
    gates, v = streams[:-1], streams[-1]
    k = reference_filter(m, x.shape[1]).split(d, dim=0)
    bias = m.filter_bias.split(d)
    for o in range(order - 1):
        v = v * gates[order - 1 - o]  # x_{N-1} first, x_1 last (safari's reversed order)
        v = direct_causal_conv(v, k[o]) + v * bias[o]
    y = v * gates[0]
    return y @ m.out_proj.weight.T + m.out_proj.bias


@pytest.mark.parametrize("params", [{}, {"order": 3, "emb_dim": 5, "filter_order": 8, "inner_mlps": 1}])
def test_matches_direct_reference(params):
    torch.manual_seed(0)
    m = SEQUENCE_MIXERS.get("hyena")(8, 32, **params).double()
    x = torch.randn(2, 20, 8, dtype=torch.float64)
    torch.testing.assert_close(m(x), reference_forward(m, x), atol=1e-10, rtol=1e-8)


def test_runs_beyond_max_len_and_filters_are_length_consistent():
    torch.manual_seed(0)
    m = SEQUENCE_MIXERS.get("hyena")(8, 16).double()
    x = torch.randn(1, 50, 8, dtype=torch.float64)
    assert m(x).shape == (1, 50, 8)  # no max_len limit
    long, short = m.filter(50, x.device, x.dtype), m.filter(10, x.device, x.dtype)
    torch.testing.assert_close(long[:, :10], short)  # a tap does not depend on the length asked for
    torch.testing.assert_close(m(x)[:, :30], m(x[:, :30]))


def test_decay_window_reaches_target_at_fast_and_slow_spans():
    m = SEQUENCE_MIXERS.get("hyena")(8, 101)
    d = m.filter.deltas
    # Table 11 "Exp. Mod. Decay (Fast, Slow) = 0.3, 1.2": window = 1e-2 at those fractions of max_len
    assert math.isclose(math.exp(-d[0].item() * 0.3), 1e-2, rel_tol=1e-5)
    assert math.isclose(math.exp(-d[-1].item() * 1.2), 1e-2, rel_tol=1e-5)


def test_parameter_shapes_follow_order():
    m = SEQUENCE_MIXERS.get("hyena")(8, order=3)
    assert m.in_proj.out_features == 4 * 8  # N + 1 streams
    assert m.filter_bias.shape == (2 * 8,)  # N - 1 long filters
    assert all(a.freq.detach().eq(14.0).all() for a in m.filter.mlp if hasattr(a, "freq"))
