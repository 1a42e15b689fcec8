import pytest
import torch

from mixerzoo.ops import recompute
from mixerzoo.ops.ssd import chunked_ssd, sequential_ssd


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
    torch.testing.assert_close(sequential_ssd(*args)[0], closed_form(*args))


GRID = [(1, 1, 4), (7, 3, 4), (23, 2, 8), (23, 3, 5), (16, 1, 16), (20, 2, 64)]  # (l, h, chunk)


@pytest.mark.parametrize("l,h,chunk", GRID)
def test_chunked_matches_recurrence_in_outputs_and_gradients(l, h, chunk):
    inputs = [t.requires_grad_() for t in ssd_inputs(l, h)]
    grad_out = torch.randn(2, l, h, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(5))
    results = []
    for fn in (sequential_ssd, lambda *t: chunked_ssd(*t, chunk_size=chunk)):
        y, final = fn(*inputs)
        grads = torch.autograd.grad((y * grad_out).sum() + final.sum(), inputs)
        results.append((y, final, grads))
    (y0, f0, g0), (y1, f1, g1) = results
    torch.testing.assert_close(y1, y0)
    torch.testing.assert_close(f1, f0)
    for name, a, b in zip(("x", "dt", "a", "B", "C"), g1, g0):
        torch.testing.assert_close(a, b, msg=f"gradient of {name}")


def test_initial_state_and_many_segments(monkeypatch):
    monkeypatch.setattr(recompute, "SEGMENT_BUDGET", 1)  # one chunk per segment
    x, dt, a, b, c = (t.requires_grad_() for t in ssd_inputs(19, 2))
    h0 = torch.randn(2, 2, 3, 4, dtype=torch.float64, requires_grad=True)
    y0, f0 = sequential_ssd(x, dt, a, b, c, initial=h0)
    y1, f1 = chunked_ssd(x, dt, a, b, c, chunk_size=4, initial=h0)
    torch.testing.assert_close(y1, y0)
    torch.testing.assert_close(f1, f0)
    g0 = torch.autograd.grad(y0.pow(2).sum(), (x, dt, a, h0))
    g1 = torch.autograd.grad(y1.pow(2).sum(), (x, dt, a, h0))
    for u, w in zip(g1, g0):
        torch.testing.assert_close(u, w)


def test_chunked_is_stable_under_strong_decay():
    x, dt, a, b, c = ssd_inputs(
        40, 2, dtype=torch.float32, rate=200.0
    )  # cumulative decays far below exp's range
    y, _ = chunked_ssd(x, dt * 5, a, b, c, chunk_size=16)
    assert torch.isfinite(y).all()
    expected, _ = sequential_ssd(*(t.double() for t in (x, dt * 5, a, b, c)))
    torch.testing.assert_close(y.double(), expected, atol=1e-5, rtol=1e-5)
