import pytest
import torch

from mixerzoo.mixers import SEQUENCE_MIXERS
from mixerzoo.ops.scan import selective_scan_chunk, selective_scan_recurrent


def closed_form_scan(u, delta, a, b, c):
    """y_t = sum_{s<=t} sum_n c_t[n] exp(a[:, n] sum_{r=s+1..t} delta_r) delta_s u_s b_s[n]."""
    y = torch.zeros_like(u)
    for t in range(u.shape[1]):
        for s in range(t + 1):
            decay = torch.exp(delta[:, s + 1 : t + 1].sum(1).unsqueeze(-1) * a)  # (bt, D, n)
            y[:, t] += (decay * (delta[:, s] * u[:, s]).unsqueeze(-1) * b[:, s, None] * c[:, t, None]).sum(-1)
    return y


def random_scan_inputs(dtype, l=17):
    g = torch.Generator().manual_seed(0)
    u = torch.randn(2, l, 3, generator=g, dtype=dtype)
    delta = torch.rand(2, l, 3, generator=g, dtype=dtype) * 2
    a = -torch.rand(3, 4, generator=g, dtype=dtype) * 5
    b, c = (torch.randn(2, l, 4, generator=g, dtype=dtype) for _ in range(2))
    return u, delta, a, b, c


def test_sequential_scan_matches_closed_form():
    args = random_scan_inputs(torch.float64)
    torch.testing.assert_close(selective_scan_recurrent(*args)[0], closed_form_scan(*args))


@pytest.mark.parametrize("chunk_size", [1, 4, 5, 64])
def test_chunked_scan_equals_sequential_scan(chunk_size):
    args = random_scan_inputs(torch.float32)
    torch.testing.assert_close(
        selective_scan_chunk(*args, chunk_size=chunk_size)[0],
        selective_scan_recurrent(*args)[0],
        atol=1e-5,
        rtol=1e-5,
    )


def test_module_scans_agree_in_outputs_and_gradients():
    x = torch.randn(2, 30, 16)
    outs, grads = [], []
    for scan in ("chunked", "sequential"):
        torch.manual_seed(0)
        m = SEQUENCE_MIXERS.get("mamba")(16, scan=scan, chunk_size=8)
        y = m(x)
        y.pow(2).sum().backward()
        outs.append(y)
        grads.append(torch.cat([p.grad.flatten() for p in m.parameters()]))
    torch.testing.assert_close(outs[0], outs[1], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(grads[0], grads[1], atol=1e-4, rtol=1e-4)


def test_initialisation_s4d_real_and_dt_range():
    m = SEQUENCE_MIXERS.get("mamba")(32)
    torch.testing.assert_close(-torch.exp(m.A_log[0]), -torch.arange(1.0, 17.0))
    dt = torch.nn.functional.softplus(m.dt_proj.bias)
    assert (dt >= 1e-3 - 1e-7).all() and (dt <= 0.1 + 1e-6).all()
    assert m.dt_rank == 2 and m.state_size() == 64 * 16 + 64 * 3
