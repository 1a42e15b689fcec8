import torch

from mixerzoo.mixers import SEQUENCE_MIXERS
from mixerzoo.ops.ssm_kernel import discretize_zoh


def loop_reference(m, x):
    """y_t = W_o(sum_a q_a SSM_diag(shift(k)_a v)) with every convolution written as a sum over lags."""
    b, l, d = x.shape
    e = m.p.head_dim
    h = d // e
    q, k, v = m.q(x), m.k(x), m.v(x)
    taps = m.shift_taps.shape[1]
    shifted = torch.zeros_like(k)
    for t in range(l):
        for lag in range(min(taps, t + 1)):
            shifted[:, t] += m.shift_taps[:, lag] * k[:, t - lag]
    dt_a, d_b = discretize_zoh(m.log_dt, m.log_neg_real, m.imag)
    c = torch.complex(m.C[..., 0], m.C[..., 1])
    kernel = [2 * (c * d_b * torch.exp(dt_a * lag)).sum(-1).real for lag in range(l)]  # each (h,)
    kv = shifted.view(b, l, h, e, 1) * v.view(b, l, h, 1, e)
    out = torch.zeros(b, l, h, e, dtype=x.dtype)
    for t in range(l):
        s = m.D[:, None, None] * kv[:, t]
        for lag in range(t + 1):
            s = s + kernel[lag][:, None, None] * kv[:, t - lag]
        out[:, t] = (q[:, t].view(b, h, e, 1) * s).sum(2)
    return m.out(out.reshape(b, l, d))


def test_matches_loop_reference_single_and_multi_head():
    for params in ({"d_state": 4, "shift_state": 3}, {"head_dim": 2, "d_state": 6, "shift_state": 5}):
        torch.manual_seed(0)
        m = SEQUENCE_MIXERS.get("h3")(4, **params).double()
        x = torch.randn(2, 10, 4, dtype=torch.float64)
        torch.testing.assert_close(m(x), loop_reference(m, x))


def test_state_size():
    m = SEQUENCE_MIXERS.get("h3")(8, head_dim=2, d_state=4, shift_state=3)
    assert m.state_size() == 8 * 2 + 4 * 2 * 2 * 4
