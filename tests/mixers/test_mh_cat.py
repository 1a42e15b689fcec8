"""MH-CAT against entry-by-entry head-mixed attention maps, and against key convolution for h = 1."""

from __future__ import annotations

import math

import pytest
import torch

from mixerzoo.mixers.mh_cat import MultiHeadMapCAT


def heads(m, x):
    b, l, d = x.shape
    h = m.p.num_heads
    return [t.reshape(b, l, h, d // h).transpose(1, 2) for t in m.qkv(x).chunk(3, dim=-1)]


def reference_weights(q, k, filt, maps):
    """q, k: (h, l, e) one sequence; filt (h, h, w) -> (h, l, l) by loops."""
    h, l, e = q.shape
    w = filt.shape[-1]
    s = torch.einsum("hie,hje->hij", q, k) / math.sqrt(e)
    causal = torch.ones(l, l, dtype=torch.bool).tril()
    if maps == "probabilities":
        s = torch.softmax(s.masked_fill(~causal, float("-inf")), -1)
    out = torch.zeros(h, l, l, dtype=q.dtype)
    for a in range(h):
        for t in range(l):
            for j in range(t + 1):
                out[a, t, j] = sum(
                    filt[a, c, i] * s[c, t, j - i] for c in range(h) for i in range(w) if j - i >= 0
                )
    if maps == "scores":
        return torch.softmax(out.masked_fill(~causal, float("-inf")), -1)
    return out


@pytest.mark.parametrize("maps", ["scores", "probabilities"])
@pytest.mark.parametrize("h,w", [(2, 3), (4, 2), (1, 4)])
def test_weights_and_output_match_loop_reference(maps, h, w):
    torch.manual_seed(0)
    m = MultiHeadMapCAT(8, num_heads=h, conv_width=w, maps=maps).double()
    with torch.no_grad():
        m.filters.copy_(torch.randn_like(m.filters))
    x = torch.randn(2, 9, 8, dtype=torch.float64)
    q, k, v = heads(m, x)
    got = m.attention_weights(q, k)
    for b in range(2):
        torch.testing.assert_close(got[b], reference_weights(q[b], k[b], m.filters, maps))
    assert (got.triu(1) == 0).all()
    y = (got @ v).transpose(1, 2).reshape(2, 9, 8)
    torch.testing.assert_close(m(x), m.out(y))


def test_single_head_equals_attention_on_convolved_keys():
    # Sec. 3.1: a causal key filter is a filter along the key axis of the score map
    torch.manual_seed(1)
    m = MultiHeadMapCAT(6, num_heads=1, conv_width=3).double()
    x = torch.randn(1, 10, 6, dtype=torch.float64)
    q, k, v = (t[0, 0] for t in heads(m, x))
    f = m.filters[0, 0]
    k_conv = torch.stack([sum(f[i] * k[t - i] for i in range(3) if t - i >= 0) for t in range(10)])
    s = q @ k_conv.T / math.sqrt(6)
    s = s.masked_fill(torch.ones(10, 10, dtype=torch.bool).triu(1), float("-inf"))
    want = m.out(torch.softmax(s, -1) @ v)
    torch.testing.assert_close(m(x)[0], want)


def test_identity_filter_is_multi_head_attention():
    torch.manual_seed(2)
    m = MultiHeadMapCAT(8, num_heads=2).double()
    with torch.no_grad():
        m.filters.zero_()
        m.filters[:, :, 0] = torch.eye(2)
    x = torch.randn(1, 7, 8, dtype=torch.float64)
    q, k, v = heads(m, x)
    y = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    torch.testing.assert_close(m(x), m.out(y.transpose(1, 2).reshape(1, 7, 8)))
