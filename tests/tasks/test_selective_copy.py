"""Selective copying (CAT-ws Def. 4) checked by filtering each context, independently of the generator."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mixerzoo.registry import ConfigError
from mixerzoo.tasks import IGNORE, build_task


def signal_subsequence(context: np.ndarray, n_noise: int, vocab: int) -> list[int]:
    """X_S of Def. 4: the signal tokens of X in order (noise is [0, N), ⊥ = V-1 never in X)."""
    assert (context != vocab - 1).all()
    return [int(t) for t in context if t >= n_noise]


@settings(max_examples=30, deadline=None)
@given(
    k=st.integers(1, 20),
    extra=st.integers(0, 60),
    n_noise=st.integers(1, 5),
    n_signal=st.integers(1, 30),
    unique=st.booleans(),
    seed=st.integers(0, 2**31),
)
def test_outputs_are_the_signal_subsequence(k, extra, n_noise, n_signal, unique, seed):
    if unique:
        n_signal = max(n_signal, k)
    vocab = n_signal + n_noise + 1
    L = 2 * k + extra
    task = build_task(
        "selective_copy",
        vocab_size=vocab,
        seq_len=L,
        num_tokens_to_copy=k,
        num_noise_tokens=n_noise,
        unique=unique,
    )
    d = task.make(30, seed)
    assert d.inputs.shape == d.labels.shape == (30, L)
    ctx = L - k
    for x, y in zip(d.inputs, d.labels):
        xs = signal_subsequence(x[:ctx], n_noise, vocab)
        assert len(xs) == k
        if unique:
            assert len(set(xs)) == k
        assert x[ctx] == vocab - 1  # ⊥ ends the prompt [X ⊥]
        assert (y[:ctx] == IGNORE).all()
        assert y[ctx:].tolist() == xs  # autoregressive outputs after ⊥
        assert x[ctx + 1 :].tolist() == xs[:-1]  # teacher forcing: previous outputs fed back


def test_defaults_and_chance():
    task = build_task("selective_copy")
    assert (task.vocab_size, task.seq_len, task.p.num_tokens_to_copy) == (16, 256, 16)
    d = task.make(300, 0)
    sup = d.labels[d.labels != IGNORE]
    assert sup.size == 300 * 16
    assert sup.min() >= 1 and sup.max() <= 14  # 14 signal tokens: chance accuracy 1/14
    # signal positions are spread over the whole context, not packed at its start
    pos = np.argwhere(d.inputs[:, :240] >= 1)[:, 1]
    assert pos.max() > 200 and pos.min() < 40


def test_deterministic_and_splits_differ():
    task = build_task("selective_copy", seq_len=64)
    assert np.array_equal(task.make(20, 5).inputs, task.make(20, 5).inputs)
    assert not np.array_equal(task.make(20, 5).inputs, task.make(20, 5, "test").inputs)


@pytest.mark.parametrize(
    "params, match",
    [
        ({"seq_len": 31}, "seq_len"),
        ({"unique": True}, "unique=True needs vocab_size >= .* = 18"),
        ({"vocab_size": 3, "num_noise_tokens": 2}, "no signal token"),
        ({"num_tokens_to_copy": 0}, "num_tokens_to_copy"),
    ],
)
def test_bad_parameters(params, match):
    with pytest.raises(ConfigError, match=match):
        build_task("selective_copy", **params)
