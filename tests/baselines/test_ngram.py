"""In-context n-gram with backoff (ICLL App. C.1): hand-computed rows and a loop-by-loop reference."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from mixerzoo.baselines import build_baseline, check_rows
from mixerzoo.baselines.counts import ngram_counts
from mixerzoo.tasks.base import TaskData

A, SEP = 3, 4  # symbols a b c = 1 2 3, separator 4


def _data(tokens: list[int], length: int | None = None) -> TaskData:
    x = np.zeros((1, length or len(tokens)), dtype=np.int64)
    x[0, : len(tokens)] = tokens
    return TaskData(x, np.full_like(x, -100), {"transitions": np.full((1, 2, A), -1, dtype=np.int8)})


def _rows(n: int, tokens: list[int], length: int | None = None) -> np.ndarray:
    return build_baseline("ngram", n=n).distributions(_data(tokens, length))[0][:, 1 : A + 1]


def test_hand_computed_bigram_rows():
    # a b | a | a c | a
    p = _rows(2, [1, 2, 4, 1, 4, 1, 3, 4, 1])
    np.testing.assert_allclose(p[0], [1, 0, 0], atol=1e-6)  # context 'a' unseen: unigram of "a"
    np.testing.assert_allclose(p[1], [0.5, 0.5, 0], atol=1e-6)  # context 'b' unseen: unigram of "ab"
    np.testing.assert_allclose(p[2], [1, 0, 0], atol=1e-6)  # after '|': string starts, only 'a' so far
    # t=5, context 'a': followed by b once and by the end once -> P(b)=1/2, beta=1/2 spread over
    # the unseen {a, c} by the unigram (a: 3/4, c: 0) -> P(a) = 1/2
    np.testing.assert_allclose(p[5], [0.5, 0.5, 0], atol=1e-6)
    # t=8, context 'a': b, end, c once each -> 1/3, 1/3 and beta=1/3 to a (the only unseen)
    np.testing.assert_allclose(p[8], [1 / 3, 1 / 3, 1 / 3], atol=1e-6)


def test_unigram_is_prefix_frequency():
    p = _rows(1, [1, 2, 4, 1, 1])
    np.testing.assert_allclose(p[4], [3 / 4, 1 / 4, 0], atol=1e-6)
    np.testing.assert_allclose(p[2], [1 / 2, 1 / 2, 0], atol=1e-6)  # the separator is not a symbol


def _reference_row(prefix: list[int], n: int) -> np.ndarray:
    """Alg. 1 / Eq. 93-94 by explicit loops over the prefix's padded strings."""
    strings, cur = [], []
    for tok in prefix:
        if tok == SEP:
            strings.append(cur + ["END"])
            cur = []
        else:
            cur.append(tok)
    strings.append(cur)
    counts = [Counter() for _ in range(n + 1)]
    for s in strings:
        padded = ["BOS"] * (n - 1) + s
        for u in range(n - 1, len(padded)):
            for m in range(1, n + 1):
                counts[m][tuple(padded[u - m + 1 : u + 1])] += 1
    hist = (["BOS"] * (n - 1) + cur)[-(n - 1) :] if n > 1 else []
    syms = list(range(1, A + 1))
    uni = np.array([counts[1][(w,)] for w in syms], dtype=float)
    p = uni / uni.sum() if uni.sum() else np.full(A, 1 / A)
    for m in range(2, n + 1):
        h = tuple(hist[len(hist) - (m - 1) :])
        c = np.array([counts[m][h + (w,)] for w in syms], dtype=float)
        total = c.sum() + counts[m][h + ("END",)]
        if total == 0:
            continue
        ml = c / total
        beta = 1 - ml.sum()
        unseen = p[c == 0].sum()
        if unseen > 1e-12:
            p = np.where(c > 0, ml, p * beta / unseen)
        else:
            p = ml / ml.sum()
    return p


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_matches_loop_reference_on_random_strings(n):
    rng = np.random.default_rng(n)
    for _ in range(4):
        toks = []
        for _ in range(rng.integers(2, 6)):
            toks += list(rng.integers(1, A + 1, size=rng.integers(1, 6)))
            toks.append(SEP)
        toks = toks[:-1]
        got = _rows(n, toks, length=len(toks) + 3)
        for t in range(len(toks)):
            np.testing.assert_allclose(got[t], _reference_row(toks[: t + 1], n), atol=1e-6, err_msg=f"t={t}")
        check_rows(build_baseline("ngram", n=n).distributions(_data(toks, len(toks) + 3)))


def test_counts_are_causal_and_exact():
    x = np.array([[1, 2, 1, 2, 1, 0]])
    c = ngram_counts(x, 2, 5, separator=4, string_padding=False).numpy()[0]
    # at t=4 (context 'a'): 'a' was followed by 'b' at u=1 and u=3
    np.testing.assert_array_equal(c[4], [0, 0, 2, 0, 0])
    # at t=1 (context 'b'): nothing followed 'b' yet
    np.testing.assert_array_equal(c[1], [0, 0, 0, 0, 0])


def test_true_distribution_scores_perfectly():
    from mixerzoo.evaluation.regbench_metrics import score_distributions
    from mixerzoo.tasks import build_task

    d = build_task("regbench", preset="reference", seq_len=256).make(8, 0, "test")
    p = build_baseline("true").distributions(d)
    check_rows(p)
    s = score_distributions(p, d)
    assert s["accuracy"] == 1.0 and s["tvd"] < 1e-6
