"""MoE MLP (MAD's sparse channel mixer): routing, the load-balancing loss, gradients, training wiring."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from mixerzoo.mixers import STATE_MIXERS
from mixerzoo.registry import ConfigError
from mixerzoo.training.train import auxiliary_loss


def make(d=8, **params):
    torch.manual_seed(0)
    return STATE_MIXERS.get("moe_mlp")(d, **params).double()


def dense_reference(m, x):
    """Every expert on every token, weighted by hand-picked top-k weights (loops, no gathers)."""
    out = torch.zeros_like(x)
    for i in range(x.shape[0]):
        p = torch.softmax(m.router(x[i]), dim=-1).detach()
        order = sorted(range(len(p)), key=lambda e: (-float(p[e]), e))[: m.p.active_experts]
        total = sum(float(p[e]) for e in order)
        for e in order:
            g = x[i] @ m.w_gate[e]
            u = x[i] @ m.w_up[e]
            y = (F.gelu(g, approximate="tanh") * u) @ m.w_down[e]
            out[i] += (p[e] / total) * y
    return out


def test_output_equals_loop_over_tokens_and_chosen_experts():
    m = make(num_experts=4, active_experts=2)
    x = torch.randn(2, 5, 8, dtype=torch.float64)
    y = m(x)
    assert y.shape == x.shape
    torch.testing.assert_close(y.reshape(-1, 8), dense_reference(m, x.reshape(-1, 8)))


def test_routing_picks_top_k_and_only_those_experts_run():
    m = make(num_experts=4, active_experts=1)
    with torch.no_grad():  # router = identity on the first 4 channels: token i picks expert argmax(x_i[:4])
        m.router.weight.zero_()
        m.router.weight[:, :4] = torch.eye(4, dtype=torch.float64)
        m.router.bias.zero_()
    x = torch.zeros(4, 8, dtype=torch.float64)
    for i, e in enumerate([2, 0, 3, 2]):
        x[i, e] = 5.0
        x[i, 4:] = torch.randn(4, dtype=torch.float64)
    y = m(x)
    for i, e in enumerate([2, 0, 3, 2]):  # k = 1 with renormalisation: weight exactly 1 on expert e
        torch.testing.assert_close(y[i], m.expert(e, x[i : i + 1])[0])
    y.sum().backward()
    assert m.w_gate.grad[1].abs().sum() == 0  # expert 1 was chosen by no token: it did not run
    assert m.w_gate.grad[[0, 2, 3]].abs().sum(dim=(1, 2)).gt(0).all()


def test_aux_loss_equals_hand_computation():
    m = make(num_experts=2, active_experts=1, balance_coef=0.5)
    with torch.no_grad():  # logits (l0, l1) = (x0, 0): probabilities by hand
        m.router.weight.zero_()
        m.router.weight[0, 0] = 1.0
        m.router.bias.zero_()
    x = torch.zeros(3, 8, dtype=torch.float64)
    x[:, 0] = torch.tensor([2.0, 1.0, -1.0], dtype=torch.float64)
    m(x)
    p0 = [1 / (1 + math.exp(-v)) for v in (2.0, 1.0, -1.0)]  # sigmoid(x0)
    # tokens 0, 1 go to expert 0, token 2 to expert 1: f = (2/3, 1/3); P = mean probabilities
    P = [sum(p0) / 3, sum(1 - q for q in p0) / 3]
    expected = 0.5 * 2 * (2 / 3 * P[0] + 1 / 3 * P[1])
    assert m.aux_loss.item() == pytest.approx(expected, rel=1e-12)


def test_aux_loss_is_balance_coef_at_uniform_routing_and_reaches_the_router():
    m = make(num_experts=4, active_experts=2, balance_coef=0.01)
    with torch.no_grad():
        m.router.weight.zero_()
        m.router.bias.zero_()
    m(torch.randn(16, 8, dtype=torch.float64))
    assert m.aux_loss.item() == pytest.approx(0.01, rel=1e-12)  # E * sum_e (1/E)(1/E) = 1
    m2 = make(num_experts=4, active_experts=2)
    m2(torch.randn(3, 6, 8, dtype=torch.float64))
    m2.aux_loss.backward()
    assert m2.router.weight.grad.abs().sum() > 0


def test_gradients_reach_router_and_experts_through_the_output():
    m = make(num_experts=4, active_experts=2)
    x = torch.randn(4, 12, 8, dtype=torch.float64, requires_grad=True)
    m(x).pow(2).sum().backward()
    assert x.grad is not None and torch.isfinite(x.grad).all()
    assert m.router.weight.grad.abs().sum() > 0  # through the (renormalised) weights
    assert m.w_down.grad.abs().sum() > 0


def test_training_loop_collects_the_state_mixers_aux_loss():
    from mixerzoo import build_model
    from mixerzoo.model.config import ModelConfig

    model = build_model(
        ModelConfig(vocab_size=7, d_model=8, n_layers=2, mixer="attention", state_mixer="moe_mlp")
    )
    mods = [mod for mod in model.modules() if hasattr(mod, "aux_loss")]
    assert len(mods) == 2
    model(torch.randint(0, 7, (2, 5)))
    total = auxiliary_loss(mods)
    torch.testing.assert_close(total, mods[0].aux_loss + mods[1].aux_loss)


def test_active_experts_above_num_experts_is_one_line_error():
    with pytest.raises(ConfigError, match=r"active_experts = 3: must be <= num_experts = 2"):
        STATE_MIXERS.get("moe_mlp")(8, num_experts=2, active_experts=3)
