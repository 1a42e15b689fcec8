import pytest
import torch
import torch.nn.functional as F

from mixerzoo.ops import recompute
from mixerzoo.ops.wkv import chunked_wkv6, chunked_wkv7, sequential_wkv6, sequential_wkv7, token_shift

F64 = torch.float64


def wkv6_inputs(l, h, dtype=F64, seed=0, batch=2, e=4, f=3, rate=2.0):
    g = torch.Generator().manual_seed(seed)
    r, k = (torch.randn(batch, h, l, e, generator=g, dtype=dtype) for _ in range(2))
    v = torch.randn(batch, h, l, f, generator=g, dtype=dtype)
    log_w = -torch.rand(batch, h, l, e, generator=g, dtype=dtype) * rate
    u = torch.randn(h, e, generator=g, dtype=dtype)
    return r, k, v, log_w, u


def wkv7_inputs(l, h, dtype=F64, seed=0, batch=2, e=4, f=3):
    """The layer's ranges: decays in (exp(-e^-1/2), 1), a = -kappa, b = kappa * iclr, |kappa| = 1."""
    g = torch.Generator().manual_seed(seed)
    r, k = (torch.randn(batch, h, l, e, generator=g, dtype=dtype) for _ in range(2))
    v = torch.randn(batch, h, l, f, generator=g, dtype=dtype)
    log_w = -torch.rand(batch, h, l, e, generator=g, dtype=dtype) * 0.6065
    kappa = F.normalize(torch.randn(batch, h, l, e, generator=g, dtype=dtype), dim=-1)
    iclr = torch.rand(batch, h, l, e, generator=g, dtype=dtype)
    return r, k, v, log_w, -kappa, kappa * iclr


def test_token_shift_is_previous_step():
    x = torch.arange(6.0).reshape(1, 3, 2)
    torch.testing.assert_close(token_shift(x), torch.tensor([[[0.0, 0.0], [0.0, 1.0], [2.0, 3.0]]]))


def test_wkv6_reference_matches_closed_form():
    """o_t = sum_{j<t} (r_t ⊙ prod_{s=j+1}^{t-1} w_s) . k_j v_j + (r_t ⊙ u) . k_t v_t."""
    r, k, v, log_w, u = wkv6_inputs(7, 2)
    expected = torch.zeros_like(v)
    for t in range(7):
        for j in range(t):
            decay = torch.exp(log_w[:, :, j + 1 : t].sum(2))
            expected[:, :, t] += (r[:, :, t] * decay * k[:, :, j]).sum(-1, keepdim=True) * v[:, :, j]
        expected[:, :, t] += (r[:, :, t] * u * k[:, :, t]).sum(-1, keepdim=True) * v[:, :, t]
    torch.testing.assert_close(sequential_wkv6(r, k, v, log_w, u)[0], expected)


def test_wkv7_reference_without_the_delta_term_is_decayed_linear_attention():
    """a = b = 0: o_t = sum_{j<=t} (r_t ⊙ prod_{s=j+1}^{t} w_s) . k_j v_j."""
    r, k, v, log_w, a, _ = wkv7_inputs(6, 2)
    zero = torch.zeros_like(a)
    expected = torch.zeros_like(v)
    for t in range(6):
        for j in range(t + 1):
            decay = torch.exp(log_w[:, :, j + 1 : t + 1].sum(2))
            expected[:, :, t] += (r[:, :, t] * decay * k[:, :, j]).sum(-1, keepdim=True) * v[:, :, j]
    torch.testing.assert_close(sequential_wkv7(r, k, v, log_w, zero, zero)[0], expected)


def test_wkv7_reference_delta_rule_replaces_the_value_under_a_key():
    """w = 1, a = -kappa, b = kappa (learning rate 1), k = kappa: writing v' under a key already
    holding v leaves exactly v' there (the delta rule's replacement), other keys untouched."""
    e = f = 4
    keys = torch.eye(e, dtype=F64)
    seq = [0, 1, 0, 2]  # key 0 is written twice
    vals = torch.randn(len(seq), f, dtype=F64, generator=torch.Generator().manual_seed(3))
    k = keys[seq].reshape(1, 1, len(seq), e)
    v = vals.reshape(1, 1, len(seq), f)
    _, s = sequential_wkv7(k, k, v, torch.zeros_like(k), -k, k)
    torch.testing.assert_close(s[0, 0] @ keys[0], vals[2])  # replaced, not added
    torch.testing.assert_close(s[0, 0] @ keys[1], vals[1])
    torch.testing.assert_close(s[0, 0] @ keys[2], vals[3])
    torch.testing.assert_close(s[0, 0] @ keys[3], torch.zeros(f, dtype=F64))


GRID = [(1, 1, 4), (7, 3, 4), (23, 2, 8), (23, 3, 5), (16, 1, 16), (20, 2, 64)]  # (l, h, chunk)


def assert_same_outputs_and_gradients(reference, chunked, inputs, names):
    inputs = [t.requires_grad_() for t in inputs]
    results = []
    for fn in (reference, chunked):
        o, final = fn(*inputs)
        grad_out = torch.randn(o.shape, dtype=o.dtype, generator=torch.Generator().manual_seed(5))
        grads = torch.autograd.grad((o * grad_out).sum() + final.pow(2).sum(), inputs)
        results.append((o, final, grads))
    (o0, f0, g0), (o1, f1, g1) = results
    torch.testing.assert_close(o1, o0)
    torch.testing.assert_close(f1, f0)
    for name, a, b in zip(names, g1, g0):
        torch.testing.assert_close(a, b, msg=f"gradient of {name}")


@pytest.mark.parametrize("l,h,chunk", GRID)
def test_wkv6_chunked_matches_recurrence_in_outputs_and_gradients(l, h, chunk):
    assert_same_outputs_and_gradients(
        sequential_wkv6,
        lambda *t: chunked_wkv6(*t, chunk_size=chunk),
        wkv6_inputs(l, h),
        ("r", "k", "v", "log_w", "u"),
    )


@pytest.mark.parametrize("l,h,chunk", GRID)
def test_wkv7_chunked_matches_recurrence_in_outputs_and_gradients(l, h, chunk):
    assert_same_outputs_and_gradients(
        sequential_wkv7,
        lambda *t: chunked_wkv7(*t, chunk_size=chunk),
        wkv7_inputs(l, h),
        ("r", "k", "v", "log_w", "a", "b"),
    )


def test_initial_state_and_many_segments(monkeypatch):
    monkeypatch.setattr(recompute, "SEGMENT_BUDGET", 1)  # one chunk per segment
    g = torch.Generator().manual_seed(9)
    s6 = torch.randn(2, 2, 4, 3, dtype=F64, generator=g)
    s7 = torch.randn(2, 2, 3, 4, dtype=F64, generator=g)
    assert_same_outputs_and_gradients(
        lambda *t: sequential_wkv6(*t[:-1], initial=t[-1]),
        lambda *t: chunked_wkv6(*t[:-1], chunk_size=4, initial=t[-1]),
        [*wkv6_inputs(19, 2), s6],
        ("r", "k", "v", "log_w", "u", "S0"),
    )
    assert_same_outputs_and_gradients(
        lambda *t: sequential_wkv7(*t[:-1], initial=t[-1]),
        lambda *t: chunked_wkv7(*t[:-1], chunk_size=4, initial=t[-1]),
        [*wkv7_inputs(19, 2), s7],
        ("r", "k", "v", "log_w", "a", "b", "S0"),
    )


def test_wkv6_chunked_is_stable_under_strong_decay():
    r, k, v, log_w, u = wkv6_inputs(40, 2, dtype=torch.float32, rate=60.0)  # RWKV-6 decays can be ~0
    o, _ = chunked_wkv6(r, k, v, log_w, u, chunk_size=16)
    assert torch.isfinite(o).all()
    expected, _ = sequential_wkv6(*(t.double() for t in (r, k, v, log_w, u)))
    torch.testing.assert_close(o.double(), expected, atol=1e-5, rtol=1e-5)


def test_wkv7_chunked_in_float32_stays_close_to_float64_reference():
    inputs = wkv7_inputs(64, 2, dtype=torch.float32, e=16, f=16)
    o, _ = chunked_wkv7(*inputs, chunk_size=16)
    expected, _ = sequential_wkv7(*(t.double() for t in inputs))
    torch.testing.assert_close(o.double(), expected, atol=1e-4, rtol=1e-4)
