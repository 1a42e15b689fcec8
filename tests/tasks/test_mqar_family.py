"""MQAR generators (zoology, CAT, N-gram) checked by brute force, independently of the generators."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mixerzoo.registry import ConfigError
from mixerzoo.tasks import IGNORE, build_task
from mixerzoo.tasks.base import sample_distinct


def brute_force_ngram_answers(row: np.ndarray, n: int) -> dict[int, int]:
    """Position t -> the token after the first earlier occurrence (ending at j < t) of its n-gram."""
    answers = {}
    for t in range(n - 1, len(row)):
        gram = tuple(row[t - n + 1 : t + 1])
        for j in range(n - 1, t):
            if tuple(row[j - n + 1 : j + 1]) == gram:
                answers[t] = int(row[j + 1])
                break
    return answers


# -- zoology MQAR -------------------------------------------------------------------------


@settings(max_examples=25, deadline=None)
@given(
    vocab=st.integers(16, 300),
    kv=st.integers(1, 8),
    extra=st.integers(0, 40),
    a=st.floats(0.01, 2.0),
    noise=st.booleans(),
    seed=st.integers(0, 2**31),
)
def test_zoology_mqar_labels_by_brute_force(vocab, kv, extra, a, noise, seed):
    L = 4 * kv + 2 * (extra // 2)
    if vocab // 2 - 1 < kv:
        vocab = 2 * kv + 2
    d = build_task(
        "mqar", vocab_size=vocab, seq_len=L, num_kv_pairs=kv, power_a=a, random_non_queries=noise
    ).make(20, seed)
    assert d.inputs.shape == d.labels.shape == (20, L)
    assert d.inputs.dtype == np.int64 and d.labels.dtype == np.int64
    assert d.inputs.min() >= 0 and d.inputs.max() < vocab
    for x, y in zip(d.inputs, d.labels):
        keys, values = x[0 : 2 * kv : 2], x[1 : 2 * kv : 2]
        assert len(set(keys)) == kv and len(set(values)) == kv
        assert all(1 <= k < vocab // 2 for k in keys) and all(vocab // 2 <= v < vocab for v in values)
        kv_map = dict(zip(keys.tolist(), values.tolist()))
        supervised = np.flatnonzero(y != IGNORE)
        assert len(supervised) == kv  # every key queried exactly once
        assert all(p >= 2 * kv and (p - 2 * kv) % 2 == 0 for p in supervised)
        assert sorted(x[supervised].tolist()) == sorted(keys.tolist())
        for p in supervised:
            assert y[p] == kv_map[int(x[p])]
        if not noise:
            others = np.setdiff1d(np.arange(2 * kv, L), supervised)
            assert (x[others] == 0).all()


def test_zoology_mqar_gap_distribution_follows_power_law():
    # With one pair, the gap g (query at 2 + 2(g-1)) has p(g) ∝ g^(a-1): check the empirical
    # frequencies of the first gaps against the closed form.
    a, L = 0.5, 2 + 2 * 10
    d = build_task("mqar", vocab_size=64, seq_len=L, num_kv_pairs=1, power_a=a, random_non_queries=False)
    data = d.make(20000, 1)
    pos = np.argmax(data.labels != IGNORE, axis=1)
    g = (pos - 2) // 2 + 1
    expected = np.arange(1, 11) ** (a - 1.0)
    expected /= expected.sum()
    observed = np.bincount(g, minlength=11)[1:] / len(g)
    np.testing.assert_allclose(observed, expected, atol=0.015)


def test_seed_determinism_and_split_disjoint_streams():
    t = build_task("mqar", seq_len=64, num_kv_pairs=8)
    a, b = t.make(50, 3), t.make(50, 3)
    assert np.array_equal(a.inputs, b.inputs) and np.array_equal(a.labels, b.labels)
    test = t.make(50, 3, "test")
    assert not np.array_equal(a.inputs, test.inputs)


@pytest.mark.parametrize(
    "params,match",
    [
        ({"num_kv_pairs": 17, "seq_len": 64}, "num_kv_pairs = 17"),
        ({"vocab_size": 8, "num_kv_pairs": 4, "seq_len": 64}, "vocab_size = 8"),
        ({"power_a": 0}, "power_a"),
        ({"bogus": 1}, "unknown field"),
    ],
)
def test_zoology_mqar_bad_parameters(params, match):
    with pytest.raises(ConfigError, match=match):
        build_task("mqar", **params)


# -- CAT MQAR -----------------------------------------------------------------------------


@settings(max_examples=25, deadline=None)
@given(L=st.sampled_from([8, 16, 64, 128]), vocab=st.integers(40, 9000), seed=st.integers(0, 2**31))
def test_cat_mqar_by_brute_force(L, vocab, seed):
    d = build_task("mqar_cat", vocab_size=vocab, seq_len=L).make(10, seed)
    k = L // 4
    for x, y in zip(d.inputs, d.labels):
        keys, values = x[0 : 2 * k : 2], x[1 : 2 * k : 2]
        assert len(set(keys.tolist())) == k and 0 not in keys and 0 not in values
        assert not set(values.tolist()) & set(keys.tolist())
        answers = brute_force_ngram_answers(x, 1)
        supervised = np.flatnonzero(y != IGNORE)
        assert len(supervised) == k
        assert sorted(x[supervised].tolist()) == sorted(keys.tolist())  # every key queried once
        for p in supervised:
            assert p >= 2 * k and y[p] == answers[p]


def test_cat_mqar_default_k_matches_appendix():
    for L, k in [(64, 16), (128, 32), (256, 64), (512, 128)]:
        d = build_task("mqar_cat", seq_len=L).make(2, 0)
        assert ((d.labels != IGNORE).sum(axis=1) == k).all()


def test_cat_mqar_values_uniform_over_complement():
    # vocab 6 -> tokens 1..5; with k=1 key, each value is uniform over the 4 other tokens
    d = build_task("mqar_cat", vocab_size=6, seq_len=4).make(20000, 0)
    keys, values = d.inputs[:, 0], d.inputs[:, 1]
    assert (keys != values).all() and (values != 0).all()
    for key in range(1, 6):
        v = values[keys == key]
        freq = np.bincount(v, minlength=6)[1:] / len(v)
        freq = np.delete(freq, key - 1)
        np.testing.assert_allclose(freq, 0.25, atol=0.03)


# -- MQNAR --------------------------------------------------------------------------------


@settings(max_examples=25, deadline=None)
@given(
    n=st.integers(1, 3),
    L=st.sampled_from([32, 64, 128]),
    A=st.integers(3, 12),
    seed=st.integers(0, 2**31),
)
def test_mqnar_by_brute_force(n, L, A, seed):
    task = build_task("mqnar", vocab_size=100, seq_len=L, n=n, key_vocab_size=A, num_kv_pairs=min(A**n, 4))
    d = task.make(8, seed)
    for x, y in zip(d.inputs, d.labels):
        answers = brute_force_ngram_answers(x, n)
        supervised = np.flatnonzero(y != IGNORE)
        assert len(supervised) == task.k
        for p in supervised:
            assert y[p] == answers[p]


def test_mqnar_default_k_matches_appendix():
    for L, k in [(64, 10), (128, 20), (256, 40)]:
        d = build_task("mqnar", seq_len=L).make(2, 0)
        assert ((d.labels != IGNORE).sum(axis=1) == k).all()


def test_mqnar_needs_whole_ngram():
    # keys share single tokens (small alphabet), so the last token alone does not identify a key
    d = build_task("mqnar", seq_len=256, key_vocab_size=8).make(50, 0)
    ambiguous = 0
    for x, y in zip(d.inputs, d.labels):
        for p in np.flatnonzero(y != IGNORE):
            ambiguous += len({int(x[j + 1]) for j in range(128) if x[j] == x[p] and j < 120}) > 1
    assert ambiguous > 0


def test_mqnar_bad_parameters():
    with pytest.raises(ConfigError, match="key_vocab_size"):
        build_task("mqnar", key_vocab_size=2, n=2, seq_len=256)
    with pytest.raises(ConfigError, match="num_kv_pairs"):
        build_task("mqnar", num_kv_pairs=20, seq_len=64)


# -- sampling helper ----------------------------------------------------------------------


@pytest.mark.parametrize("k,m", [(3, 4), (5, 100), (50, 60), (10, 10)])
def test_sample_distinct_is_uniform_and_distinct(k, m):
    rng = np.random.default_rng(0)
    s = sample_distinct(rng, 4000, k, 7, 7 + m)
    assert s.min() >= 7 and s.max() < 7 + m
    assert all(len(set(r)) == k for r in s.tolist())
    freq = np.bincount(s.ravel() - 7, minlength=m) / s.size
    np.testing.assert_allclose(freq, 1 / m, atol=0.25 / m + 0.01)
