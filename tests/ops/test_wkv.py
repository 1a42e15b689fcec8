"""WKV-6 and WKV-7 against closed forms and hand-set cases (parity of the forms: test_parity.py)."""

import torch
import torch.nn.functional as F

from mixerzoo.ops.wkv import token_shift, wkv6_chunk, wkv6_recurrent, wkv7_chunk, wkv7_recurrent

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
    torch.testing.assert_close(wkv6_recurrent(r, k, v, log_w, u)[0], expected)


def test_wkv7_reference_without_the_delta_term_is_decayed_linear_attention():
    """a = b = 0: o_t = sum_{j<=t} (r_t ⊙ prod_{s=j+1}^{t} w_s) . k_j v_j."""
    r, k, v, log_w, a, _ = wkv7_inputs(6, 2)
    zero = torch.zeros_like(a)
    expected = torch.zeros_like(v)
    for t in range(6):
        for j in range(t + 1):
            decay = torch.exp(log_w[:, :, j + 1 : t + 1].sum(2))
            expected[:, :, t] += (r[:, :, t] * decay * k[:, :, j]).sum(-1, keepdim=True) * v[:, :, j]
    torch.testing.assert_close(wkv7_recurrent(r, k, v, log_w, zero, zero)[0], expected)


def test_wkv7_reference_delta_rule_replaces_the_value_under_a_key():
    """w = 1, a = -kappa, b = kappa (learning rate 1), k = kappa: writing v' under a key already
    holding v leaves exactly v' there (the delta rule's replacement), other keys untouched."""
    e = f = 4
    keys = torch.eye(e, dtype=F64)
    seq = [0, 1, 0, 2]  # key 0 is written twice
    vals = torch.randn(len(seq), f, dtype=F64, generator=torch.Generator().manual_seed(3))
    k = keys[seq].reshape(1, 1, len(seq), e)
    v = vals.reshape(1, 1, len(seq), f)
    _, s = wkv7_recurrent(k, k, v, torch.zeros_like(k), -k, k)
    torch.testing.assert_close(s[0, 0] @ keys[0], vals[2])  # replaced, not added
    torch.testing.assert_close(s[0, 0] @ keys[1], vals[1])
    torch.testing.assert_close(s[0, 0] @ keys[2], vals[3])
    torch.testing.assert_close(s[0, 0] @ keys[3], torch.zeros(f, dtype=F64))


def test_wkv6_chunked_is_stable_under_strong_decay():
    r, k, v, log_w, u = wkv6_inputs(40, 2, dtype=torch.float32, rate=60.0)  # RWKV-6 decays can be ~0
    o, _ = wkv6_chunk(r, k, v, log_w, u, chunk_size=16)
    assert torch.isfinite(o).all()
    expected, _ = wkv6_recurrent(*(t.double() for t in (r, k, v, log_w, u)))
    torch.testing.assert_close(o.double(), expected, atol=1e-5, rtol=1e-5)


def test_wkv7_chunked_in_float32_stays_close_to_float64_reference():
    inputs = wkv7_inputs(64, 2, dtype=torch.float32, e=16, f=16)
    o, _ = wkv7_chunk(*inputs, chunk_size=16)
    expected, _ = wkv7_recurrent(*(t.double() for t in inputs))
    torch.testing.assert_close(o.double(), expected, atol=1e-4, rtol=1e-4)
