"""Sparse attention against full causal attention with rows multiplied by f (Zoology Eq. 2-3)."""

from __future__ import annotations

import math

import pytest
import torch

from mixerzoo.mixers.sparse_attention import SparseAttention, position_hash_uniform, repeated_ngram


def dense_rows(m, x, f):
    """Eq. 2 with a full l x l causal softmax: y[i] = out(softmax(q_i k^T) v) * f[i] (f = 0 -> 0)."""
    b, l, d = x.shape
    h = m.p.num_heads
    e = d // h
    q, k, v = (t.reshape(b, l, h, e).transpose(1, 2) for t in m.qkv(x).chunk(3, dim=-1))
    s = q @ k.transpose(-1, -2) / math.sqrt(e)
    s = s.masked_fill(torch.ones(l, l, dtype=torch.bool).triu(1), float("-inf"))
    y = m.out((torch.softmax(s, -1) @ v).transpose(1, 2).reshape(b, l, d))
    return y * f.unsqueeze(-1)


def seen_before_loop(ids, n):
    b, l = ids.shape
    out = torch.zeros(b, l, dtype=torch.bool)
    for bi in range(b):
        for i in range(n - 1, l):
            gram = ids[bi, i - n + 1 : i + 1].tolist()
            out[bi, i] = any(ids[bi, j - n + 1 : j + 1].tolist() == gram for j in range(n - 1, i))
    return out


@pytest.mark.parametrize("n", [1, 2, 3])
def test_repeated_ngram_matches_loop(n):
    g = torch.Generator().manual_seed(n)
    ids = torch.randint(0, 4, (3, 30), generator=g)
    assert torch.equal(repeated_ngram(ids, n), seen_before_loop(ids, n))


@pytest.mark.parametrize("n,heads", [(1, 1), (2, 2)])
def test_programmatic_selection_matches_dense_rows(n, heads):
    torch.manual_seed(0)
    m = SparseAttention(8, selection="programmatic", ngram=n, num_heads=heads).double().eval()
    x = torch.randn(2, 19, 8, dtype=torch.float64)
    ids = torch.randint(0, 5, (2, 19))
    f = seen_before_loop(ids, n).double()
    torch.testing.assert_close(m(x, input_ids=ids), dense_rows(m, x, f))


def test_random_selection_eval_is_a_fixed_hash_of_position():
    torch.manual_seed(0)
    m = SparseAttention(8, selection="random", p=0.3, seed=5).double().eval()
    x = torch.randn(2, 40, 8, dtype=torch.float64)
    f = (position_hash_uniform(torch.arange(40), 5) < 0.3).double().expand(2, 40)
    torch.testing.assert_close(m(x), dense_rows(m, x, f))
    # a prefix sees the same selection as the whole sequence, and the rate is about p
    torch.testing.assert_close(m(x[:, :17]), m(x)[:, :17])
    u = position_hash_uniform(torch.arange(20000), 0)
    assert abs((u < 0.3).double().mean().item() - 0.3) < 0.02
    assert 0.0 <= u.min() and u.max() < 1.0


def test_random_selection_training_draws_bernoulli():
    m = SparseAttention(8, selection="random", p=0.25).train()
    torch.manual_seed(1)
    mask, _ = m.select(torch.zeros(64, 64, 8), None)
    assert abs(mask.float().mean().item() - 0.25) < 0.03


def test_learned_selection_threshold_budget_gate_and_aux_loss():
    torch.manual_seed(0)
    k = 3
    m = SparseAttention(8, selection="learned", top_k=k).double().eval()
    x = torch.randn(2, 15, 8, dtype=torch.float64)
    s = torch.sigmoid(m.score(x).squeeze(-1))
    f = torch.zeros(2, 15, dtype=torch.float64)
    for b in range(2):
        taken = 0
        for i in range(15):
            if s[b, i] > 0.5 and taken < k:
                f[b, i] = s[b, i]
                taken += 1
    assert (f > 0).sum() > 0 and (f[0] == 0).sum() > 0
    torch.testing.assert_close(m(x), dense_rows(m, x, f))
    want_aux = sum(max(0.0, s[b].sum().item() - k) / 15 for b in range(2)) / 2
    assert m.aux_loss.item() == pytest.approx(want_aux)
    m.aux_loss.backward()
    assert m.score.weight.grad.abs().sum() > 0


def test_learned_selection_never_exceeds_budget_in_training():
    torch.manual_seed(1)
    m = SparseAttention(8, selection="learned", top_k=4, noise=0.5).train()
    mask, _ = m.select(torch.randn(8, 50, 8), None)
    assert (mask.sum(-1) <= 4).all()


def test_empty_selection_outputs_zero():
    m = SparseAttention(8).eval()
    ids = torch.arange(10).unsqueeze(0)  # all distinct: nothing was seen before
    assert torch.equal(m(torch.randn(1, 10, 8), input_ids=ids), torch.zeros(1, 10, 8))
