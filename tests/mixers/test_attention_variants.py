"""Windowed and ALiBi attention against an explicit l x l masked softmax written here."""

from __future__ import annotations

import math

import pytest
import torch

from mixerzoo.mixers.attention import Attention
from mixerzoo.ops.alibi import alibi_slopes
from mixerzoo.ops.attention import causal_attention


def dense_reference(q, k, v, allowed, bias=None):
    """q, k, v: (b, h, l, e); allowed (l, l) bool; bias (h, l, l) -> (b, h, l, e)."""
    s = torch.einsum("bhie,bhje->bhij", q, k) / math.sqrt(q.shape[-1])
    if bias is not None:
        s = s + bias
    s = s.masked_fill(~allowed, float("-inf"))
    return torch.einsum("bhij,bhje->bhie", torch.softmax(s, dim=-1), v)


def allowed_matrix(l, pattern, w):
    a = torch.zeros(l, l, dtype=torch.bool)
    for i in range(l):
        for j in range(l):
            if pattern == "full":
                a[i, j] = j <= i
            elif pattern == "sliding":
                a[i, j] = i - w < j <= i
            else:
                a[i, j] = j <= i and i // w == j // w
    return a


def alibi_matrix(slopes, l):
    return torch.stack([torch.tensor([[-m * (i - j) for j in range(l)] for i in range(l)]) for m in slopes])


def qkv(b=2, h=3, l=23, e=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(b, h, l, e, generator=g, dtype=torch.float64) for _ in range(3)]


@pytest.mark.parametrize("pattern", ["full", "sliding", "blocked"])
@pytest.mark.parametrize("w", [1, 4, 5, 23, 40])
@pytest.mark.parametrize("alibi", [False, True])
def test_patterns_match_dense_masked_softmax(pattern, w, alibi):
    q, k, v = qkv()
    l, h = q.shape[2], q.shape[1]
    slopes = alibi_slopes(h).double() if alibi else None
    bias = alibi_matrix(slopes.tolist(), l).double() if alibi else None
    want = dense_reference(q, k, v, allowed_matrix(l, pattern, w), bias)
    got = causal_attention(q, k, v, pattern, w, slopes)
    torch.testing.assert_close(got, want)


def test_windowed_gradients_match_dense():
    q, k, v = (t.requires_grad_(True) for t in qkv(l=17))
    slopes = alibi_slopes(3).double()
    bias = alibi_matrix(slopes.tolist(), 17).double()
    for pattern in ("sliding", "blocked"):
        got = torch.autograd.grad(causal_attention(q, k, v, pattern, 4, slopes).sum(), (q, k, v))
        want = torch.autograd.grad(
            dense_reference(q, k, v, allowed_matrix(17, pattern, 4), bias).sum(), (q, k, v)
        )
        for a, b in zip(got, want):
            torch.testing.assert_close(a, b)


def test_alibi_slopes_are_the_papers_geometric_sequences():
    torch.testing.assert_close(alibi_slopes(8), torch.tensor([2.0 ** -(i + 1) for i in range(8)]))
    torch.testing.assert_close(alibi_slopes(4), torch.tensor([2.0 ** (-2 * (i + 1)) for i in range(4)]))
    # 6 heads: the 4-head slopes, then every other slope of the 8-head sequence
    six = [2.0 ** (-2 * (i + 1)) for i in range(4)] + [2.0**-1, 2.0**-3]
    torch.testing.assert_close(alibi_slopes(6), torch.tensor(six))


def test_default_attention_is_plain_causal_sdpa():
    torch.manual_seed(0)
    m = Attention(8, num_heads=2).double()
    x = torch.randn(2, 11, 8, dtype=torch.float64)
    q, k, v = (t.reshape(2, 11, 2, 4).transpose(1, 2) for t in m.qkv(x).chunk(3, dim=-1))
    y = dense_reference(q, k, v, allowed_matrix(11, "full", 0)).transpose(1, 2).reshape(2, 11, 8)
    torch.testing.assert_close(m(x), m.out(y))


def test_sliding_window_memory_is_linear_in_length():
    # window 8 at length 4096: an l x l score matrix would be 16M entries per head
    q, k, v = (t.float() for t in qkv(b=1, h=1, l=4096, e=4))
    y = causal_attention(q, k, v, "sliding", 8)
    assert y.shape == (1, 1, 4096, 4)
    want = dense_reference(q[:, :, -64:], k[:, :, -64:], v[:, :, -64:], allowed_matrix(64, "sliding", 8))
    torch.testing.assert_close(y[:, :, -56:], want[:, :, -56:], atol=1e-5, rtol=1e-5)
