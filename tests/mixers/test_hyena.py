"""Hyena (Zoology App. H.2.1, Poli et al. 2023a) against a direct, loop-based forward pass."""

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


# -- Hyena experts (MAD, mad-lab HyenaExpertsOperator) -------------------------------------
def test_hyena_experts_with_one_expert_is_hyena():
    torch.manual_seed(0)
    hyena = SEQUENCE_MIXERS.get("hyena")(8, 32, filter_order=8).double()
    experts = SEQUENCE_MIXERS.get("hyena_experts")(
        8, 32, num_experts=1, active_experts=1, expert_width=8, filter_order=8
    ).double()
    own = experts.state_dict()
    own.update(hyena.state_dict())  # same names for the Hyena parts; the router is left as is
    experts.load_state_dict(own)
    x = torch.randn(2, 12, 8, dtype=torch.float64)
    torch.testing.assert_close(experts(x), hyena(x))  # one expert: weight 1 on every token


def test_hyena_experts_route_top_k_outputs_per_token():
    torch.manual_seed(0)
    m = SEQUENCE_MIXERS.get("hyena_experts")(8, 32, num_experts=4, active_experts=2).double()
    x = torch.randn(2, 9, 8, dtype=torch.float64)
    z = m.expert_outputs(x)  # (b, l, E, w)
    assert z.shape == (2, 9, 4, 2)
    want = torch.zeros(2, 9, 2, dtype=torch.float64)
    for b in range(2):
        for t in range(9):
            p = torch.softmax(m.router(x[b, t]), dim=-1).detach()
            top = sorted(range(4), key=lambda e: -float(p[e]))[:2]
            for e in top:
                want[b, t] += p[e] / (p[top[0]] + p[top[1]]) * z[b, t, e]
    torch.testing.assert_close(m(x), m.out_proj(want))
    assert m.aux_loss is None  # mad-lab has no balancing loss here; balance_coef = 0 by default


def test_hyena_experts_default_width_and_balancing_loss():
    m = SEQUENCE_MIXERS.get("hyena_experts")(128, 64)
    assert (m.width, m.inner) == (16, 128)  # mad-lab hyena-experts.yml: 8 experts of 16 at d = 128
    m2 = SEQUENCE_MIXERS.get("hyena_experts")(8, 16, num_experts=4, active_experts=1, balance_coef=0.01)
    x = torch.randn(2, 5, 8)
    m2(x)
    p = torch.softmax(m2.router(x).reshape(10, 4), dim=-1).detach()
    f = torch.bincount(p.argmax(-1), minlength=4) / 10  # top-1 dispatch fractions
    assert m2.aux_loss.item() == pytest.approx(0.01 * 4 * float((f * p.mean(0)).sum()), rel=1e-5)
