"""SSD against its closed form and under strong decay (parity of the forms: test_parity.py)."""

import torch

from mixerzoo.ops.ssd import ssd_chunk, ssd_recurrent


def ssd_inputs(l, h, dtype=torch.float64, seed=0, batch=2, p=3, n=4, rate=3.0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, l, h, p, generator=g, dtype=dtype)
    dt = torch.rand(batch, l, h, generator=g, dtype=dtype)
    a = -torch.rand(h, generator=g, dtype=dtype) * rate - 0.1
    b, c = (torch.randn(batch, l, n, generator=g, dtype=dtype) for _ in range(2))
    return x, dt, a, b, c


def closed_form(x, dt, a, b, c):
    """y_t = sum_{s<=t} exp(a sum_{r=s+1..t} dt_r) (C_t . B_s) dt_s x_s: the SSM as a masked matrix."""
    y = torch.zeros_like(x)
    for t in range(x.shape[1]):
        for s in range(t + 1):
            decay = torch.exp(a * dt[:, s + 1 : t + 1].sum(1))  # (b, h)
            cb = (c[:, t] * b[:, s]).sum(-1)  # (b,)
            y[:, t] += (decay * cb[:, None] * dt[:, s]).unsqueeze(-1) * x[:, s]
    return y


def test_sequential_matches_closed_form():
    args = ssd_inputs(9, 2)
    torch.testing.assert_close(ssd_recurrent(*args)[0], closed_form(*args))


def test_chunked_is_stable_under_strong_decay():
    x, dt, a, b, c = ssd_inputs(
        40, 2, dtype=torch.float32, rate=200.0
    )  # cumulative decays far below exp's range
    y, _ = ssd_chunk(x, dt * 5, a, b, c, chunk_size=16)
    assert torch.isfinite(y).all()
    expected, _ = ssd_recurrent(*(t.double() for t in (x, dt * 5, a, b, c)))
    torch.testing.assert_close(y.double(), expected, atol=1e-5, rtol=1e-5)
