import math

import pytest
import torch

from mixerzoo.mixers import SEQUENCE_MIXERS
from mixerzoo.registry import ConfigError


def make(d=16, **params):
    torch.manual_seed(0)
    return SEQUENCE_MIXERS.get("mamba2")(d, **params)


@pytest.mark.parametrize(
    "params,message",
    [
        ({"num_heads": 3}, r"mixer\[mamba2\]\.num_heads = 3: must divide inner width expand \* d_model = 32"),
        ({"num_heads": 0}, r"num_heads"),
        ({"d_state": 0}, r"d_state"),
        ({"conv_size": 0}, r"conv_size"),
        ({"scan": "fft"}, r"scan"),
        ({"dt_min": 0.5, "dt_max": 0.1}, r"mixer\[mamba2\]\.dt_min = 0\.5: must be <= dt_max = 0\.1"),
        ({"a_init_min": 20.0}, r"mixer\[mamba2\]\.a_init_min = 20\.0: must be <= a_init_max = 16\.0"),
        ({"headdim": 8}, r"headdim"),
    ],
)
def test_invalid_params_are_one_line_config_errors(params, message):
    with pytest.raises(ConfigError, match=message) as err:
        make(**params)
    assert "\n" not in str(err.value).strip()


def test_state_size_counts_ssm_and_conv_state():
    m = make(d_state=8, num_heads=4, conv_size=3)  # D = 32, p = 8
    expected = 4 * 8 * 8 + (32 + 2 * 8) * (3 - 1)  # h p n + (D + 2n)(w - 1)
    assert m.state_size() == expected
    assert sum(t[0].numel() for t in m.init_state(2)) == expected


def test_initialisation_follows_the_reference():
    m = make(d=32, num_heads=8)
    a = torch.exp(m.A_log)
    assert ((a >= 1) & (a <= 16)).all()
    dt = torch.nn.functional.softplus(m.dt_bias)
    assert ((dt >= 0.001 - 1e-7) & (dt <= 0.1 + 1e-7)).all()
    torch.testing.assert_close(m.D, torch.ones(8))
    assert m.in_proj.weight.shape == (2 * 64 + 2 * 64 + 8, 32)  # [z, x, B, C, dt]
    assert m.conv_weight.shape == (64 + 2 * 64, 4)


def test_scans_agree_in_outputs_and_gradients():
    x = torch.randn(2, 29, 16, dtype=torch.float64)
    outs, grads = [], []
    for scan in ("chunked", "sequential"):
        m = make(scan=scan, chunk_size=8, d_state=8).double()
        y = m(x)
        y.pow(2).sum().backward()
        outs.append(y)
        grads.append(torch.cat([p.grad.flatten() for p in m.parameters()]))
    torch.testing.assert_close(outs[0], outs[1])
    torch.testing.assert_close(grads[0], grads[1])


def test_forward_matches_a_hand_written_mamba2_layer():
    """The layer in plain loops: conv, SiLU, per-head SSM with shared B, C, D skip, gated RMSNorm."""
    m = make(d=8, d_state=3, num_heads=2, conv_size=2).double()
    x = torch.randn(1, 5, 8, dtype=torch.float64)
    inner, n, h = 16, 3, 2
    proj = x[0] @ m.in_proj.weight.T
    z, xbc, dt_raw = proj[:, :inner], proj[:, inner : 2 * inner + 2 * n], proj[:, -h:]
    w = m.conv_weight  # (channels, 2), tap i is lag i
    conv = (
        torch.stack([w[:, 0] * xbc[t] + (w[:, 1] * xbc[t - 1] if t else 0) for t in range(5)]) + m.conv_bias
    )
    act = conv * torch.sigmoid(conv)
    u, bmat, cmat = act[:, :inner], act[:, inner : inner + n], act[:, inner + n :]
    dt = torch.log1p(torch.exp(dt_raw + m.dt_bias))
    a = -torch.exp(m.A_log)
    state = torch.zeros(h, inner // h, n, dtype=torch.float64)
    out = []
    for t in range(5):
        y = []
        for head in range(h):
            ut = u[t, head * 8 : (head + 1) * 8]
            state[head] = math.e ** (dt[t, head] * a[head]) * state[head] + dt[t, head] * torch.outer(
                ut, bmat[t]
            )
            y.append(state[head] @ cmat[t] + m.D[head] * ut)
        y = torch.cat(y) * z[t] * torch.sigmoid(z[t])
        y = y / torch.sqrt(y.pow(2).mean() + 1e-5) * m.norm_weight
        out.append(y @ m.out_proj.weight.T)
    torch.testing.assert_close(m(x)[0], torch.stack(out))
