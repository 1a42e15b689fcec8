"""N-gram attention A(n) (ICLL Eq. 10-11, App. F) against App. F's dense code and a brute-force loop."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from mixerzoo.ops import ngram
from mixerzoo.ops.ngram import ngram_attention, ngram_attention_parallel, ngram_keys


def app_f_ngram_head(x, hidden_state, ngram=1, shift_step=1):
    """ICLL App. F Fig. 7 ``ngram_head``, transcribed: the dense l x l reference."""
    bsz, seq_len = x.shape
    mask_0 = x[:, None, :] == x[:, :, None]
    causal_mask = torch.tril(torch.ones(seq_len, seq_len, dtype=torch.bool), diagonal=-1)
    mask_0 = torch.logical_and(mask_0, causal_mask)
    masks = [mask_0.long()]
    for _ in range(1, ngram):
        mask_0 = F.pad(mask_0, (1, -1, 1, -1), "constant", False)
        masks.append(mask_0.long())
    ngram_mask = torch.stack(masks, dim=-1).sum(dim=-1) >= ngram
    if shift_step > 0:
        ngram_mask = F.pad(ngram_mask, (shift_step, -shift_step), "constant", False)
    ngram_mask = torch.logical_and(ngram_mask, causal_mask)
    # App. F divides in the default float dtype; divide in hidden_state's dtype so fp64 tests are exact
    mask = ngram_mask.to(hidden_state.dtype)
    norm = torch.nan_to_num(mask / mask.sum(dim=2, keepdim=True), 0)
    return torch.einsum("bmn,bnz->bmz", norm, hidden_state)


def brute_force(ids, h, n):
    """Position i averages h[j+1] over j+1 < i with ids[j-n+1..j] == ids[i-n+1..i]."""
    b, l, d = h.shape
    out = torch.zeros_like(h)
    for s in range(b):
        seq = ids[s].tolist()
        for i in range(n - 1, l):
            hits = [j + 1 for j in range(n - 1, i - 1) if seq[j - n + 1 : j + 1] == seq[i - n + 1 : i + 1]]
            if hits:
                out[s, i] = h[s, hits].mean(0)
    return out


@pytest.mark.parametrize("n", [1, 2, 3, 4])
@pytest.mark.parametrize("vocab", [2, 3, 6])
def test_matches_app_f_dense_reference(n, vocab):
    g = torch.Generator().manual_seed(10 * n + vocab)
    ids = torch.randint(0, vocab, (3, 60), generator=g)
    h = torch.randn(3, 60, 5, generator=g, dtype=torch.float64)
    expected = app_f_ngram_head(ids, h, ngram=n)
    assert expected.abs().sum() > 0  # matches do occur
    torch.testing.assert_close(ngram_attention(ids, h, n), expected, atol=1e-12, rtol=1e-12)


@pytest.mark.parametrize("n", [1, 2, 3])
def test_parallel_reference_matches_app_f(n):
    g = torch.Generator().manual_seed(n)
    ids = torch.randint(0, 3, (3, 40), generator=g)
    h = torch.randn(3, 40, 4, generator=g, dtype=torch.float64)
    expected = app_f_ngram_head(ids, h, ngram=n)
    torch.testing.assert_close(ngram_attention_parallel(ids, h, n), expected, atol=1e-12, rtol=1e-12)


@pytest.mark.parametrize("n", [1, 2, 3])
def test_matches_brute_force_loop(n):
    g = torch.Generator().manual_seed(n)
    ids = torch.randint(0, 3, (2, 30), generator=g)
    h = torch.randn(2, 30, 4, generator=g, dtype=torch.float64)
    torch.testing.assert_close(ngram_attention(ids, h, n), brute_force(ids, h, n), atol=1e-12, rtol=0)


def test_gradient_matches_dense_reference():
    g = torch.Generator().manual_seed(7)
    ids = torch.randint(0, 3, (2, 40), generator=g)
    h1 = torch.randn(2, 40, 6, generator=g, dtype=torch.float64, requires_grad=True)
    h2 = h1.detach().clone().requires_grad_(True)
    w = torch.randn(2, 40, 6, generator=g, dtype=torch.float64)
    (ngram_attention(ids, h1, 2) * w).sum().backward()
    (app_f_ngram_head(ids, h2, ngram=2) * w).sum().backward()
    torch.testing.assert_close(h1.grad, h2.grad, atol=1e-12, rtol=1e-12)


@pytest.mark.parametrize("tile", [1, 7, 40, 130])
@pytest.mark.parametrize("n", [1, 3])
def test_tiled_values_and_gradients_match_dense_reference(monkeypatch, tile, n):
    """Tiles that split the features (and, at 130, hold two sequences) compute the same A h and A^T g."""
    monkeypatch.setattr(ngram, "TILE_ELEMENTS", tile)
    g = torch.Generator().manual_seed(tile + n)
    ids = torch.randint(0, 3, (5, 25), generator=g)
    h1 = torch.randn(5, 25, 6, generator=g, dtype=torch.float64, requires_grad=True)
    h2 = h1.detach().clone().requires_grad_(True)
    w = torch.randn(5, 25, 6, generator=g, dtype=torch.float64)
    out = ngram_attention(ids, h1, n)
    expected = app_f_ngram_head(ids, h2, ngram=n)
    torch.testing.assert_close(out, expected, atol=1e-12, rtol=1e-12)
    (out * w).sum().backward()
    (expected * w).sum().backward()
    torch.testing.assert_close(h1.grad, h2.grad, atol=1e-12, rtol=1e-12)


def test_second_derivative_matches_dense_reference():
    """The backward pass (A^T) is itself differentiable: gradient of a gradient norm."""
    g = torch.Generator().manual_seed(11)
    ids = torch.randint(0, 3, (2, 20), generator=g)
    w = torch.randn(2, 20, 4, generator=g, dtype=torch.float64)
    grads = []
    for fn in (lambda h: ngram_attention(ids, h, 2), lambda h: app_f_ngram_head(ids, h, ngram=2)):
        h = torch.randn(2, 20, 4, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
        h.requires_grad_(True)
        (first,) = torch.autograd.grad((fn(h).pow(2) * w).sum(), h, create_graph=True)
        (second,) = torch.autograd.grad(first.pow(2).sum(), h)
        grads.append(second)
    torch.testing.assert_close(grads[0], grads[1], atol=1e-10, rtol=1e-10)


def test_float32_sums_stay_exact_over_long_offset_prefixes():
    """Float32 inputs with a large common offset: prefix sums over ~10^5 rows must not cancel."""
    g = torch.Generator().manual_seed(5)
    ids = torch.randint(0, 50, (4, 30000), generator=g)
    h = 100.0 + torch.randn(4, 30000, 2, generator=g)
    out = ngram_attention(ids, h, 1)
    # position i's mean of h_{j+1} over earlier j with ids[j] == ids[i] (j + 1 < i), in float64
    s, i = 3, 29999
    seq = ids[s].tolist()
    hits = [j + 1 for j in range(i - 1) if seq[j] == seq[i]]
    torch.testing.assert_close(out[s, i], h[s, hits].double().mean(0).float(), atol=2e-5, rtol=0)


def test_float32_matches_reference():
    g = torch.Generator().manual_seed(3)
    ids = torch.randint(0, 4, (2, 500), generator=g)
    h = torch.randn(2, 500, 8, generator=g)
    out = ngram_attention(ids, h, 1)
    assert out.dtype == torch.float32
    torch.testing.assert_close(out, app_f_ngram_head(ids, h.double(), ngram=1).float(), atol=1e-6, rtol=1e-6)


def test_hand_worked_example():
    ids = torch.tensor([[0, 1, 0, 1, 0]])  # a b a b a
    h = torch.arange(5, dtype=torch.float64).view(1, 5, 1)
    # bigrams: i=3 ("a b") matches j=1 -> h[2]; i=4 ("b a") matches j=2 -> h[3]
    assert ngram_attention(ids, h, 2)[0, :, 0].tolist() == [0.0, 0.0, 0.0, 2.0, 3.0]
    # unigrams: i=2 (a) <- j=0 -> h[1]; i=3 (b) <- j=1 -> h[2]; i=4 (a) <- j=0, 2 -> mean(h[1], h[3])
    assert ngram_attention(ids, h, 1)[0, :, 0].tolist() == [0.0, 0.0, 1.0, 2.0, 2.0]


def test_adjacent_match_is_excluded():
    # "a a": the earlier occurrence j = i - 1 would attend to i itself (j + 1 = i): excluded
    ids = torch.tensor([[5, 5, 5]])
    h = torch.tensor([[[1.0], [10.0], [100.0]]], dtype=torch.float64)
    assert ngram_attention(ids, h, 1)[0, :, 0].tolist() == [0.0, 0.0, 10.0]


def test_keys_are_exact_under_adversarial_ids():
    """Ids that collide under a naive polynomial hash (a*B + b with B = 1000) and huge ids."""
    big = 2**62
    rows = [
        [1, 0, 0, 1000, 1, 0, 0, 1000, 1, 0],  # (1, 0) and (0, 1000) hash equal with B = 1000
        [big, big - 1, big, big - 1, 3, big, 3, big - 1, big, 3],
        [-5, 7, -5, 7, 7, -5, 7, -5, -5, 7],
    ]
    ids = torch.tensor(rows)
    for n in (1, 2, 3):
        keys = ngram_keys(ids, n)
        for s in range(3):
            for i in range(10):
                for i2 in range(10):
                    full = i >= n - 1 and i2 >= n - 1
                    same = i == i2 or (full and rows[s][i - n + 1 : i + 1] == rows[s][i2 - n + 1 : i2 + 1])
                    assert bool(keys[s, i] == keys[s, i2]) == same, (n, s, i, i2)
        assert len(set(keys[0].tolist()) & set(keys[1].tolist())) == 0  # sequences never share keys
        h = torch.randn(3, 10, 3, dtype=torch.float64)
        torch.testing.assert_close(ngram_attention(ids, h, n), brute_force(ids, h, n), atol=1e-12, rtol=0)


def test_sequences_do_not_attend_to_each_other():
    ids = torch.tensor([[1, 2, 3, 4], [4, 3, 1, 2]])  # no repeats inside either sequence
    h = torch.randn(2, 4, 3)
    assert torch.equal(ngram_attention(ids, h, 1), torch.zeros(2, 4, 3))
