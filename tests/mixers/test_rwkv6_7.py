import math

import pytest
import torch
import torch.nn.functional as F

from mixerzoo.mixers import SEQUENCE_MIXERS
from mixerzoo.mixers.rwkv7 import reference_rank
from mixerzoo.registry import ConfigError


def make(name, d=16, **params):
    torch.manual_seed(0)
    return SEQUENCE_MIXERS.get(name)(d, **params)


@pytest.mark.parametrize(
    "name,params,message",
    [
        ("rwkv6", {"num_heads": 5}, r"mixer\[rwkv6\]\.num_heads = 5: must divide d_model = 16"),
        ("rwkv6", {"mix_rank": 0}, r"mix_rank"),
        ("rwkv6", {"decay_rank": -1}, r"decay_rank"),
        ("rwkv6", {"scan": "parallel"}, r"scan"),
        ("rwkv6", {"chunk_size": 0}, r"chunk_size"),
        ("rwkv7", {"num_heads": 5}, r"mixer\[rwkv7\]\.num_heads = 5: must divide d_model = 16"),
        ("rwkv7", {"iclr_rank": 0}, r"iclr_rank"),
        ("rwkv7", {"scan": "parallel"}, r"scan"),
        ("rwkv7", {"value_residual": True}, r"value_residual"),
    ],
)
def test_invalid_params_are_one_line_config_errors(name, params, message):
    with pytest.raises(ConfigError, match=message) as err:
        make(name, **params)
    assert "\n" not in str(err.value).strip()


@pytest.mark.parametrize("name", ["rwkv6", "rwkv7"])
def test_state_size_is_heads_times_head_size_squared_plus_the_shifted_token(name):
    m = make(name, num_heads=4)  # e = 4
    assert m.state_size() == 4 * 4 * 4 + 16
    assert sum(t[0].numel() for t in m.init_state(2)) == m.state_size()


@pytest.mark.parametrize("name", ["rwkv6", "rwkv7"])
def test_scans_agree_in_outputs_and_gradients(name):
    x = torch.randn(2, 27, 16, dtype=torch.float64)
    outs, grads = [], []
    for scan in ("chunked", "sequential"):
        m = make(name, scan=scan, chunk_size=6, num_heads=2).double()
        y = m(x)
        y.pow(2).sum().backward()
        outs.append(y)
        grads.append(torch.cat([p.grad.flatten() for p in m.parameters()]))
    torch.testing.assert_close(outs[0], outs[1])
    torch.testing.assert_close(grads[0], grads[1])


def test_rwkv6_ddlerp_and_decay_follow_finch():
    """Recompute r and log w from the parameters: x + xx ⊙ (mu + tanh((x + xx ⊙ mu_x) A) B_s)."""
    m = make("rwkv6", num_heads=2, mix_rank=3, decay_rank=5).double()
    with torch.no_grad():  # LoRA away from its ~0 init, so the test sees it
        for p in (m.mix_a, m.mix_b, m.decay_a, m.decay_b):
            p.normal_()
    x, x_prev = torch.randn(4, 16, dtype=torch.float64), torch.randn(4, 16, dtype=torch.float64)
    r, _, _, log_w, _ = m.project(x, x_prev)
    xx = x_prev - x
    hidden = torch.tanh((x + xx * m.mu_x) @ m.mix_a)  # (4, 5 * 3), blocks w, k, v, r, g
    m_r = hidden[:, 9:12] @ m.mix_b[3]
    m_w = hidden[:, 0:3] @ m.mix_b[0]
    xr, xw = x + xx * (m.mu_r + m_r), x + xx * (m.mu_w + m_w)
    torch.testing.assert_close(r.flatten(-2), xr @ m.receptance.weight.T)
    expected_w = torch.exp(-torch.exp(m.decay + torch.tanh(xw @ m.decay_a) @ m.decay_b))
    torch.testing.assert_close(torch.exp(log_w).flatten(-2), expected_w)


def test_rwkv6_initial_decays_span_the_reference_range():
    m = make("rwkv6", d=64)
    torch.testing.assert_close(m.decay[[0, -1]], torch.tensor([-6.0, -1.0]))
    torch.testing.assert_close(m.bonus.flatten()[:3], torch.tensor([0.0, 0.1, -0.1]))


def test_rwkv7_decay_iclr_and_keys_lie_in_their_ranges():
    m = make("rwkv7", num_heads=2).double()
    with torch.no_grad():
        for p in (m.w1, m.a1, m.g1):
            p.normal_()
    x, x_prev = torch.randn(50, 16, dtype=torch.float64) * 3, torch.randn(50, 16, dtype=torch.float64) * 3
    r, k, v, log_w, a, b, g = m.project(x, x_prev)
    w = torch.exp(log_w)
    assert ((w > math.exp(-math.exp(-0.5))) & (w < 1)).all()
    torch.testing.assert_close(a.norm(dim=-1), torch.ones(50, 2, dtype=torch.float64))  # -kappa_hat, unit
    iclr = b / -a  # b = kappa_hat ⊙ iclr
    assert ((iclr > 0) & (iclr < 1)).all()
    kappa = F.normalize((m.key(x + (x_prev - x) * m.mu_k) * m.k_k).unflatten(-1, (2, 8)), dim=-1)
    torch.testing.assert_close(-a, kappa)


def test_rwkv7_lora_ranks_follow_the_reference_formula():
    assert reference_rank(64, 2.5) == 32
    assert reference_rank(4096, 5.0) == 320  # 5 * 64 / 32 = 10
    assert reference_rank(2048, 2.5) == 128  # 2.5 * 45.25 / 32 = 3.54 -> 4 * 32
    m = make("rwkv7", d=16, decay_rank=4)
    assert m.w1.shape == (16, 4) and m.a1.shape == (16, 32) and m.g1.shape == (16, 32)
