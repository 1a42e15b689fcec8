"""Multi-head Hyena (Zoology App. F.2 / Fig. 7; MAD's mh-hyena) against a loop-based definition."""

from __future__ import annotations

import pytest
import torch

from mixerzoo.mixers import SEQUENCE_MIXERS
from mixerzoo.registry import ConfigError


def make(d=8, max_len=32, seed=0, **params):
    torch.manual_seed(seed)
    return SEQUENCE_MIXERS.get("hyena")(d, max_len, **params).double()


def loop_reference(m, x):
    """y_t[gH + j] = sum_i q_t[gH+i] (sum_{s<=t} h_g[t-s] k_s[gH+i] v_s[gH+j] + D_g k_t[gH+i] v_t[gH+j])."""
    b, l, d = x.shape
    H = m.p.num_heads
    z = x @ m.in_proj.weight.T + m.in_proj.bias
    w = m.short_weight.shape[1]
    zc = torch.zeros_like(z)
    for t in range(l):  # short causal depthwise conv, lag-indexed taps
        for s in range(min(t + 1, w)):
            zc[:, t] += m.short_weight[:, s] * z[:, t - s]
    zc = zc + m.short_bias
    q, k, v = zc[..., :d], zc[..., d : 2 * d], zc[..., 2 * d :]
    filt = m.filter(l, x.device, x.dtype)  # (d / H, l)
    y = torch.zeros(b, l, d, dtype=x.dtype)
    for g in range(d // H):
        for t in range(l):
            for j in range(H):
                acc = torch.zeros(b, dtype=x.dtype)
                for i in range(H):
                    conv = sum(filt[g, t - s] * k[:, s, g * H + i] * v[:, s, g * H + j] for s in range(t + 1))
                    conv = conv + m.filter_bias[g] * k[:, t, g * H + i] * v[:, t, g * H + j]
                    acc = acc + q[:, t, g * H + i] * conv
                y[:, t, g * H + j] = acc
    return y @ m.out_proj.weight.T + m.out_proj.bias


@pytest.mark.parametrize("heads", [2, 4])
def test_multi_head_matches_loop_definition(heads):
    m = make(num_heads=heads, filter_order=8)
    x = torch.randn(2, 7, 8, dtype=torch.float64)
    torch.testing.assert_close(m(x), loop_reference(m, x), atol=1e-10, rtol=1e-8)


def test_one_head_is_todays_hyena_bit_for_bit():
    default, one = make(), make(num_heads=1)
    assert default.state_dict().keys() == one.state_dict().keys()
    for key, value in default.state_dict().items():
        assert torch.equal(value, one.state_dict()[key]), key
    x = torch.randn(2, 20, 8, dtype=torch.float64)
    assert torch.equal(default(x), one(x))
    # and the loop definition at H = 1 is the elementwise Hyena of Zoology Alg. 3
    torch.testing.assert_close(one(x[:, :6]), loop_reference(one, x[:, :6]), atol=1e-10, rtol=1e-8)


def test_one_filter_per_head_block_and_state_grows_with_heads():
    for heads in (1, 2, 4, 8):
        m = make(num_heads=heads)
        assert m.filter_bias.shape == (8 // heads,)
        assert m.filter(5, None, torch.float64).shape == (8 // heads, 5)


def test_multi_head_runs_beyond_max_len_and_is_prefix_consistent():
    m = make(max_len=16, num_heads=2, filter_order=8)
    x = torch.randn(1, 40, 8, dtype=torch.float64)
    torch.testing.assert_close(m(x)[:, :25], m(x[:, :25]))


def test_bad_head_counts_are_one_line_errors():
    with pytest.raises(ConfigError, match=r"num_heads = 3: must divide d_model = 8"):
        make(num_heads=3)
    with pytest.raises(ConfigError, match=r"num_heads = 2: multi-head Hyena is defined for order 2"):
        make(num_heads=2, order=3)
