"""LaS attention against attention matrices built entry by entry from paper 003 Eq. (4)."""

from __future__ import annotations

import math

import pytest
import torch

from mixerzoo.mixers.las_attention import LaSAttention, las_alphas


def reference_matrix(q, k, alpha, pool, order):
    """One head: q, k (l, e) -> (l, l), loops over entries. Pooling window [j - left, j + right],
    zero outside [0, i] (zero padding, divisor P), and nothing on future columns."""
    l, e = q.shape
    left, right = (pool - 1) // 2, pool - 1 - (pool - 1) // 2
    s = torch.zeros(l, l, dtype=q.dtype)
    for i in range(l):
        for j in range(i + 1):
            s[i, j] = math.exp(-alpha * (i - j)) * (q[i] @ k[j]) / math.sqrt(e)

    def pooled(row, i):
        out = torch.zeros(l, dtype=q.dtype)
        for j in range(i + 1):
            out[j] = sum(row[m] for m in range(j - left, j + right + 1) if 0 <= m <= i) / pool
        return out

    m = torch.zeros(l, l, dtype=q.dtype)
    for i in range(l):
        if order == "after_softmax":
            m[i] = pooled(torch.cat([torch.softmax(s[i, : i + 1], 0), torch.zeros(l - i - 1)]), i)
        else:
            m[i, : i + 1] = torch.softmax(pooled(s[i], i)[: i + 1], 0)
    return m


def heads_qk(m, x):
    h = m.p.num_heads
    b, l, d = x.shape
    q, k, v = (t.reshape(b, l, h, d // h).transpose(1, 2) for t in m.qkv(x).chunk(3, dim=-1))
    return q, k, v


@pytest.mark.parametrize("order", ["after_softmax", "before_softmax"])
@pytest.mark.parametrize("variant,pool", [("las", 3), ("las", 4), ("las", 5), ("l", 3), ("s", 3), ("s", 2)])
def test_full_variants_match_entrywise_matrix(variant, pool, order):
    torch.manual_seed(0)
    m = LaSAttention(8, num_heads=4, variant=variant, decay_max=0.7, pool_size=pool, pool_order=order)
    m = m.double()
    x = torch.randn(2, 11, 8, dtype=torch.float64)
    q, k, v = heads_qk(m, x)
    got = m.attention_weights(q, k)
    alphas = las_alphas(4, 0.0 if variant == "s" else 0.7)
    p = 1 if variant == "l" else pool
    for b in range(2):
        for h in range(4):
            want = reference_matrix(q[b, h], k[b, h], alphas[h].item(), p, order)
            torch.testing.assert_close(got[b, h], want)
    y = torch.einsum("bhij,bhje->bhie", got, v).transpose(1, 2).reshape(2, 11, 8)
    torch.testing.assert_close(m(x), m.out(y))


@pytest.mark.parametrize("order", ["after_softmax", "before_softmax"])
def test_chunk_variant_is_las_inside_each_block(order):
    torch.manual_seed(1)
    c, l = 4, 10
    m = LaSAttention(8, num_heads=2, variant="chunk", chunk_size=c, decay_max=0.5, pool_order=order)
    m = m.double()
    x = torch.randn(1, l, 8, dtype=torch.float64)
    q, k, v = heads_qk(m, x)
    alphas = las_alphas(2, 0.5)
    y = torch.zeros(1, 2, l, 4, dtype=torch.float64)
    for h in range(2):
        for start in range(0, l, c):
            sl = slice(start, min(start + c, l))
            a = reference_matrix(q[0, h, sl], k[0, h, sl], alphas[h].item(), 3, order)
            y[0, h, sl] = a @ v[0, h, sl]
    torch.testing.assert_close(m(x), m.out(y.transpose(1, 2).reshape(1, l, 8)))


def test_pooling_puts_no_weight_on_future_columns():
    torch.manual_seed(2)
    for order in ("after_softmax", "before_softmax"):
        m = LaSAttention(8, num_heads=2, pool_size=5, decay_max=0.2, pool_order=order).double()
        q, k, _ = heads_qk(m, torch.randn(1, 9, 8, dtype=torch.float64))
        a = m.attention_weights(q, k)
        assert (a.triu(diagonal=1) == 0).all()
        # and the weights of row i do not change when keys after i change
        k2 = k.clone()
        k2[:, :, 5:] += 10 * torch.randn_like(k2[:, :, 5:])
        torch.testing.assert_close(m.attention_weights(q, k2)[:, :, :5], a[:, :, :5])


def test_alphas_initialisation():
    a = las_alphas(5, 0.001)
    assert a[0] == 0  # alpha_0 = 0: one vanilla head
    assert a[-1].item() == pytest.approx(0.001)
    decays = torch.exp(-a)
    torch.testing.assert_close(decays.diff(), torch.full((4,), decays[1] - decays[0]).double())
    m = LaSAttention(8, num_heads=4)
    assert len(list(m.parameters())) == 4  # only q/k/v/out projections: LaS adds no parameters


def test_head_zero_is_vanilla_attention_when_not_pooled():
    torch.manual_seed(3)
    m = LaSAttention(8, num_heads=2, variant="l", decay_max=1.0).double()
    q, k, _ = heads_qk(m, torch.randn(1, 7, 8, dtype=torch.float64))
    s = (q[0, 0] @ k[0, 0].T / 2.0).masked_fill(torch.ones(7, 7).triu(1).bool(), float("-inf"))
    torch.testing.assert_close(m.attention_weights(q, k)[0, 0], torch.softmax(s, -1))
