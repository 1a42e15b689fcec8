"""Single-query AR (ICLL Sec. 3.3) checked by scanning each sequence, independently of the generator."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mixerzoo.registry import ConfigError
from mixerzoo.tasks import IGNORE, build_task


def scan_answer(row: np.ndarray, vocab: int, query_present: bool) -> int:
    """Walk the pairs left to right, remember each key's value, answer the final query."""
    n_keys = (vocab - 2) // 2
    memory: dict[int, int] = {}
    for i in range(0, len(row) - 2, 2):
        key, value = int(row[i]), int(row[i + 1])
        assert 0 <= key < n_keys <= value < vocab - 2
        assert memory.setdefault(key, value) == value  # one map per sequence
    assert row[-2] == vocab - 2  # the query marker
    query = int(row[-1])
    assert 0 <= query < n_keys
    if query_present:
        assert query in memory
    return memory.get(query, vocab - 1)


@settings(max_examples=30, deadline=None)
@given(
    vocab=st.integers(6, 80),
    half_len=st.integers(2, 60),
    present=st.booleans(),
    seed=st.integers(0, 2**31),
)
def test_labels_by_scanning(vocab, half_len, present, seed):
    L = 2 * half_len
    d = build_task("ar", vocab_size=vocab, seq_len=L, query_present=present).make(40, seed)
    assert d.inputs.shape == d.labels.shape == (40, L)
    assert d.inputs.dtype == d.labels.dtype == np.int64
    for x, y in zip(d.inputs, d.labels):
        assert (y[:-1] == IGNORE).all()  # scored on the final answer only
        assert y[-1] == scan_answer(x, vocab, present)


@settings(max_examples=15, deadline=None)
@given(vocab=st.integers(6, 60), half_len=st.integers(2, 40), seed=st.integers(0, 2**31))
def test_all_training_labels_are_every_next_token_and_the_scored_splits_keep_the_answer(
    vocab, half_len, seed
):
    L = 2 * half_len
    answer_only = build_task("ar", vocab_size=vocab, seq_len=L)
    every = build_task("ar", vocab_size=vocab, seq_len=L, train_labels="all")
    d, ref = every.make(30, seed, "train"), answer_only.make(30, seed, "train")
    assert np.array_equal(d.inputs, ref.inputs)  # the same sequences, only the labels differ
    for x, y in zip(d.inputs, d.labels):
        for t in range(L - 1):  # position t is trained to predict the token at t + 1
            assert y[t] == x[t + 1]
        assert y[-1] == scan_answer(x, vocab, True)
    for split in ("valid", "test"):  # scored on the answer only, as with train_labels="answer"
        got, want = every.make(30, seed, split), answer_only.make(30, seed, split)
        assert np.array_equal(got.inputs, want.inputs) and np.array_equal(got.labels, want.labels)
        assert (got.labels[:, :-1] == IGNORE).all()


def test_default_is_paper_004_setting():
    task = build_task("ar")
    d = task.make(200, 0)
    assert task.vocab_size == 40 and task.seq_len == 382
    assert d.inputs.shape == (200, 382)
    assert d.inputs.max() < 40
    assert ((d.labels[:, -1] >= 19) & (d.labels[:, -1] < 38)).all()  # values: the second half of 38


def test_query_uniform_over_distinct_present_keys():
    # With vocab 6 there are 2 keys; with L = 4 the context holds one pair, so the query is
    # always that key. With L = 6, two pairs: if both keys appear, each is queried ~half the time.
    d = build_task("ar", vocab_size=6, seq_len=4).make(200, 1)
    assert (d.inputs[:, 0] == d.inputs[:, -1]).all()
    d = build_task("ar", vocab_size=6, seq_len=6).make(4000, 2)
    both = d.inputs[:, 0] != d.inputs[:, 2]
    frac_first = (d.inputs[both, -1] == d.inputs[both, 0]).mean()
    assert abs(frac_first - 0.5) < 0.05


def test_absent_queries_get_the_no_answer_symbol():
    d = build_task("ar", vocab_size=40, seq_len=8, query_present=False).make(500, 0)
    absent = d.labels[:, -1] == 39
    assert 0 < absent.mean() < 1  # 3 pairs over 19 keys: absent queries are common


def test_deterministic_and_splits_differ():
    task = build_task("ar", seq_len=64)
    a, b = task.make(50, 3), task.make(50, 3)
    assert np.array_equal(a.inputs, b.inputs) and np.array_equal(a.labels, b.labels)
    assert not np.array_equal(task.make(50, 3, "test").inputs, a.inputs)


@pytest.mark.parametrize(
    "params, match",
    [({"seq_len": 11}, "even"), ({"vocab_size": 5}, "vocab_size"), ({"seq_len": 2}, "seq_len")],
)
def test_bad_parameters(params, match):
    with pytest.raises(ConfigError, match=match):
        build_task("ar", **params)
