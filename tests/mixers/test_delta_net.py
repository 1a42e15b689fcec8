"""DeltaNet and Gated DeltaNet layers: the whole layer recomputed by hand, parameters, errors.

Step-by-step decoding equal to ``forward`` is checked by the shared contract test.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from mixerzoo import build_model
from mixerzoo.mixers import SEQUENCE_MIXERS
from mixerzoo.registry import ConfigError


def layer_by_hand(m, x):
    """The layer from its parameters with explicit loops (no ops/ code): conv taps, L2 norms,
    the matrix recurrence S_t = alpha_t S_{t-1}(I - beta_t k k^T) + beta_t v k^T, RMSNorm, gate."""
    b, l, d = x.shape
    h, dk, dv = m.p.num_heads, m.dk, m.dv
    e, f = dk // h, dv // h
    u = x @ m.qkv.weight.T
    if m.p.conv_size:
        conv = torch.zeros_like(u)
        for t in range(l):
            for lag in range(min(m.p.conv_size, t + 1)):
                conv[:, t] += m.conv_weight[:, lag] * u[:, t - lag]
        u = conv
    u = u * torch.sigmoid(u)
    q, k, v = u[..., :dk], u[..., dk : 2 * dk], u[..., 2 * dk :]
    beta = torch.sigmoid(x @ m.beta.weight.T)  # (b, l, h)
    if hasattr(m, "A_log"):
        dt = F.softplus(x @ m.decay.weight.T + m.dt_bias)
        alpha = torch.exp(-torch.exp(m.A_log) * dt)
    else:
        alpha = torch.ones_like(beta)
    out = torch.zeros(b, l, dv, dtype=x.dtype)
    for i in range(b):
        for j in range(h):
            s = torch.zeros(f, e, dtype=x.dtype)
            for t in range(l):
                qt, kt = q[i, t, j * e : (j + 1) * e], k[i, t, j * e : (j + 1) * e]
                qt = qt / qt.norm() / math.sqrt(e)
                kt = kt / kt.norm()
                vt = v[i, t, j * f : (j + 1) * f]
                bt = beta[i, t, j]
                s = alpha[i, t, j] * s @ (torch.eye(e, dtype=x.dtype) - bt * torch.outer(kt, kt))
                s = s + bt * torch.outer(vt, kt)
                o = s @ qt
                o = o / torch.sqrt(o.pow(2).mean() + 1e-5) * m.norm_weight
                out[i, t, j * f : (j + 1) * f] = o
    if m.p.output_gate:
        g = x @ m.gate.weight.T
        out = out * g * torch.sigmoid(g)
    return out @ m.out.weight.T


CASES = [
    ("delta_net", {"num_heads": 2, "chunk_size": 3}),
    ("delta_net", {"conv_size": 0, "output_gate": True, "expand_v": 2.0}),
    ("gated_delta_net", {"num_heads": 2, "chunk_size": 4, "conv_size": 3}),
    ("gated_delta_net", {"conv_size": 0, "expand_k": 0.5, "output_gate": False}),
]


@pytest.mark.parametrize("name,params", CASES)
def test_layer_matches_hand_computation(name, params):
    torch.manual_seed(0)
    m = SEQUENCE_MIXERS.get(name)(8, 64, **params).double()
    x = torch.randn(2, 7, 8, dtype=torch.float64)
    torch.testing.assert_close(m(x), layer_by_hand(m, x), atol=1e-10, rtol=1e-8)


def test_paper_defaults():
    d = SEQUENCE_MIXERS.get("delta_net")(16)
    g = SEQUENCE_MIXERS.get("gated_delta_net")(16)
    assert (d.dk, d.dv, d.p.output_gate, d.p.conv_size) == (16, 16, False, 4)
    assert (g.dk, g.dv, g.p.output_gate, g.p.conv_size) == (16, 32, True, 4)
    assert not hasattr(d, "gate") and hasattr(g, "gate")
    assert not hasattr(SEQUENCE_MIXERS.get("delta_net")(16, conv_size=0), "conv_weight")


def test_state_size_counts_memory_and_conv_window():
    m = SEQUENCE_MIXERS.get("delta_net")(16, num_heads=2)  # 2 heads of 8 x 8, window 48 x 3
    assert m.state_size() == 2 * 8 * 8 + 48 * 3
    state = m.init_state(1)
    assert sum(t.numel() for t in state) == m.state_size()
    g = SEQUENCE_MIXERS.get("gated_delta_net")(16, num_heads=4, conv_size=0)  # 4 heads of 4 x 8
    assert g.state_size() == 4 * 4 * 8 == sum(t.numel() for t in g.init_state(1))


def test_decay_init_survives_the_backbone():
    # A in (0, 16) and softplus(dt_bias) in [0.001, 0.1] (the authors' init); the backbone's GPT-2
    # init only touches Linear and Embedding weights, so these must come through unchanged
    model = build_model(
        {"vocab_size": 20, "d_model": 16, "n_layers": 1, "mixer": {"name": "gated_delta_net"}}
    )
    mixer = next(mod for mod in model.modules() if type(mod).__name__ == "GatedDeltaNet")
    a = torch.exp(mixer.A_log.detach())
    dt = F.softplus(mixer.dt_bias.detach())
    assert ((a > 0) & (a < 16)).all()
    assert ((dt >= 0.001 - 1e-7) & (dt <= 0.1 + 1e-7)).all()
    x = torch.randn(3, 16)
    assert (mixer.log_decay(x) <= 0).all()


@pytest.mark.parametrize("name", ["delta_net", "gated_delta_net"])
def test_bad_parameters_are_one_line_config_errors(name):
    cls = SEQUENCE_MIXERS.get(name)
    with pytest.raises(ConfigError, match=rf"^mixer\[{name}\]\.num_heads = 4: must divide key width 2 "):
        cls(8, expand_k=0.25, num_heads=4)
    with pytest.raises(
        ConfigError, match=rf"^mixer\[{name}\]\.expand_v = 0.01: round\(expand_v \* d_model = 8\) is 0"
    ):
        cls(8, expand_v=0.01)
    with pytest.raises(ConfigError, match=rf"^mixer\[{name}\]\.conv_size = -1: "):
        cls(8, conv_size=-1)
    with pytest.raises(ConfigError, match=rf"^mixer\[{name}\]\.chunk_size = 0: "):
        cls(8, chunk_size=0)
    with pytest.raises(ConfigError, match=rf"unknown field 'mixer\[{name}\]\.chunk'"):
        cls(8, chunk=4)
