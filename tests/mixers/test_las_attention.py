"""LaS attention against attention matrices built entry by entry from LaS Eq. (4)."""

from __future__ import annotations

import math

import pytest
import torch

from mixerzoo.mixers.las_attention import LaSAttention, las_alphas

#: ALiBi slopes written out from Press et al. (2022) Sec. 3: 2^(-8c/h) for c = 1..h when h is a
#: power of two; otherwise the slopes of the next lower power of two, then every other slope of
#: the power of two above it (the reference implementation's ``get_slopes``).
ALIBI_SLOPES = {
    2: [2**-4, 2**-8],
    4: [2**-2, 2**-4, 2**-6, 2**-8],
    6: [2**-2, 2**-4, 2**-6, 2**-8, 2**-1, 2**-3],
    8: [2**-1, 2**-2, 2**-3, 2**-4, 2**-5, 2**-6, 2**-7, 2**-8],
}


def reference_matrix(q, k, alpha, pool, order, slope=0.0):
    """One head: q, k (l, e) -> (l, l), loops over entries. Pooling window [j - left, j + right],
    zero outside [0, i] (zero padding, divisor P), and nothing on future columns. ``slope``: the
    head's ALiBi slope m, the logit of (i, j) gets -m (i - j) (Press et al. 2022, Sec. 3)."""
    l, e = q.shape
    left, right = (pool - 1) // 2, pool - 1 - (pool - 1) // 2
    s = torch.zeros(l, l, dtype=q.dtype)
    for i in range(l):
        for j in range(i + 1):
            s[i, j] = math.exp(-alpha * (i - j)) * (q[i] @ k[j]) / math.sqrt(e) - slope * (i - j)

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
@pytest.mark.parametrize(
    "variant,pool,decay",
    [
        ("las", 3, 0.7),
        ("las", 4, 0.7),
        ("las", 5, 0.7),
        ("l", 3, 0.7),
        ("s", 3, 0.7),
        ("s", 2, 0.7),
        ("las", 3, 4.0),
    ],
)
def test_full_variants_match_entrywise_matrix(variant, pool, decay, order):
    """decay 0.7: alpha (l - 1) <= 7, folded into q and k; 4.0: 40 > 30, the explicit decay matrix."""
    torch.manual_seed(0)
    m = LaSAttention(8, num_heads=4, variant=variant, decay_max=decay, pool_size=pool, pool_order=order)
    m = m.double()
    x = torch.randn(2, 11, 8, dtype=torch.float64)
    q, k, v = heads_qk(m, x)
    got = m.attention_weights(q, k)
    alphas = las_alphas(4, 0.0 if variant == "s" else decay)
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


# -- ALiBi (LaS Table 4, "cT+Smooth+ALiBi") ---------------------------------------------------
@pytest.mark.parametrize("heads", [2, 4, 6, 8])
def test_alibi_slopes_are_press_et_al(heads):
    m = LaSAttention(24, num_heads=heads, alibi=True)
    assert m.alibi_slopes.tolist() == ALIBI_SLOPES[heads]


@pytest.mark.parametrize("order", ["after_softmax", "before_softmax"])
@pytest.mark.parametrize("variant,heads", [("las", 4), ("s", 6), ("l", 2)])
def test_alibi_adds_the_distance_bias_to_the_logits(variant, heads, order):
    torch.manual_seed(4)
    d, l = 12, 9
    m = LaSAttention(
        d, num_heads=heads, variant=variant, decay_max=0.4, pool_size=3, pool_order=order, alibi=True
    )
    m = m.double()
    x = torch.randn(1, l, d, dtype=torch.float64)
    q, k, v = heads_qk(m, x)
    got = m.attention_weights(q, k)
    alphas = las_alphas(heads, 0.0 if variant == "s" else 0.4)
    p = 1 if variant == "l" else 3
    for h in range(heads):
        want = reference_matrix(q[0, h], k[0, h], alphas[h].item(), p, order, ALIBI_SLOPES[heads][h])
        torch.testing.assert_close(got[0, h], want)
    y = torch.einsum("bhij,bhje->bhie", got, v).transpose(1, 2).reshape(1, l, d)
    torch.testing.assert_close(m(x), m.out(y))


@pytest.mark.parametrize("order", ["after_softmax", "before_softmax"])
def test_chunk_alibi_counts_distance_inside_each_block(order):
    """Table 4's cT+Smooth+ALiBi: pooling, no decay (B = 0), ALiBi, inside blocks of c tokens."""
    torch.manual_seed(5)
    c, l, heads = 4, 10, 4
    m = LaSAttention(
        8, num_heads=heads, variant="chunk", chunk_size=c, decay_max=0.0, pool_order=order, alibi=True
    )
    m = m.double()
    x = torch.randn(1, l, 8, dtype=torch.float64)
    q, k, v = heads_qk(m, x)
    y = torch.zeros(1, heads, l, 2, dtype=torch.float64)
    for h in range(heads):
        for start in range(0, l, c):
            sl = slice(start, min(start + c, l))
            a = reference_matrix(q[0, h, sl], k[0, h, sl], 0.0, 3, order, ALIBI_SLOPES[heads][h])
            y[0, h, sl] = a @ v[0, h, sl]
    torch.testing.assert_close(m(x), m.out(y.transpose(1, 2).reshape(1, l, 8)))


def test_alibi_off_by_default_and_adds_no_parameters():
    torch.manual_seed(6)
    plain = LaSAttention(8, num_heads=4).double()
    off = LaSAttention(8, num_heads=4, alibi=False).double()
    on = LaSAttention(8, num_heads=4, alibi=True).double()
    off.load_state_dict(plain.state_dict())
    on.load_state_dict(plain.state_dict())  # same keys: the slopes are a non-persistent buffer
    assert plain.alibi_slopes is None
    x = torch.randn(2, 9, 8, dtype=torch.float64)
    torch.testing.assert_close(off(x), plain(x), rtol=0, atol=0)
    assert (on(x) - plain(x)).abs().max() > 1e-3


def matrix_path(m, x):
    """The output through the explicit pooled (l x l) matrix: attention_weights(q, k) @ v."""
    b, l, _ = x.shape
    q, k, v = heads_qk(m, x)
    a = m.attention_weights(q, k)
    if m.p.variant == "chunk":
        y = (a @ m.blocks(v)).reshape(b, m.p.num_heads, -1, v.shape[-1])[:, :, :l]
    else:
        y = a @ v
    return m.out(y.transpose(1, 2).reshape(b, l, -1))


@pytest.mark.parametrize(
    "params",
    [
        {"pool_size": 3},
        {"pool_size": 2},
        {"pool_size": 4, "decay_max": 0.4},
        {"pool_size": 7, "decay_max": 0.4},
        {"variant": "l"},
        {"variant": "chunk", "chunk_size": 5, "pool_size": 5},
        {"pool_size": 5, "alibi": True},
        {"pool_size": 3, "decay_max": 4.0},  # alpha (l - 1) = 48 > 30: the explicit decay matrix
    ],
)
def test_values_pooling_has_the_matrix_paths_output_and_gradients(params):
    """forward() pools the values instead of the (l x l) matrix; output and every gradient agree."""
    torch.manual_seed(3)
    m = LaSAttention(8, num_heads=2, **params).double()
    x = torch.randn(2, 13, 8, dtype=torch.float64, requires_grad=True)
    g = torch.randn(2, 13, 8, dtype=torch.float64)
    fast = torch.autograd.grad((m(x) * g).sum(), [x, *m.parameters()])
    slow = torch.autograd.grad((matrix_path(m, x) * g).sum(), [x, *m.parameters()])
    torch.testing.assert_close(m(x), matrix_path(m, x))
    for a, b in zip(fast, slow, strict=True):
        torch.testing.assert_close(a, b)


def test_float16_keeps_the_explicit_decay_where_folding_it_would_overflow():
    """alpha (l - 1) = 19.5: folded into q and k that is e^19.5 ~ 3e8, past float16's 65,504."""
    torch.manual_seed(4)
    m = LaSAttention(8, num_heads=2, decay_max=0.5).double()
    x = torch.randn(1, 40, 8, dtype=torch.float64)
    want = m(x)
    got = m.half()(x.half())
    assert torch.isfinite(got).all()
    torch.testing.assert_close(got.double(), want, atol=2e-2, rtol=2e-2)
