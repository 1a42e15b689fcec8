"""In-context n-gram with backoff (ICLL App. C.1): the authors' script's rows, hand-computed rows
and a loop-by-loop reference of the renormalized form."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from mixerzoo.baselines import build_baseline, check_rows
from mixerzoo.baselines.counts import ngram_counts
from mixerzoo.baselines.regbench_files import read_reference
from mixerzoo.tasks.base import TaskData

A, SEP = 3, 4  # symbols a b c = 1 2 3, separator 4
FIXTURES = Path(__file__).parent / "fixtures"


def _data(tokens: list[int], length: int | None = None) -> TaskData:
    x = np.zeros((1, length or len(tokens)), dtype=np.int64)
    x[0, : len(tokens)] = tokens
    return TaskData(x, np.full_like(x, -100), {"transitions": np.full((1, 2, A), -1, dtype=np.int8)})


def _rows(n: int, tokens: list[int], length: int | None = None, form: str = "renormalized") -> np.ndarray:
    return build_baseline("ngram", n=n, form=form).distributions(_data(tokens, length))[0][:, 1 : A + 1]


@pytest.mark.parametrize("n", [2, 3, 4])
def test_default_matches_the_authors_script_per_position(n):
    """``predict_with_n_gram_back_off`` of berlino/seq_icl ``ngram.py`` on 6 RegBench instances.

    The fixtures were made from the repository root with a checkout of berlino/seq_icl::

        mixerzoo data regbench --set preset=reference --set seq_len=96 --n 6 --seed 7 --split test \
            --out /tmp/rb6.npz
        mixerzoo export-regbench /tmp/rb6.npz --out tests/baselines/fixtures/regbench6.tsv
        python tests/baselines/make_ngram_reference.py SEQ_ICL_CHECKOUT \
            tests/baselines/fixtures/regbench6.tsv tests/baselines/fixtures/ngram_reference.npz
    """
    ref = np.load(FIXTURES / "ngram_reference.npz")
    data = read_reference(FIXTURES / "regbench6.tsv", num_symbols=18)
    got = build_baseline("ngram", n=n).distributions(data)[:, :, 1:19]
    for i, length in enumerate(ref["lengths"]):
        assert int(data.extras["length"][i]) == length + 1  # the file's input stops one symbol short
        np.testing.assert_allclose(got[i, :length], ref[f"p{n}"][i, :length], rtol=0, atol=1e-6)
    assert (ref[f"p{n}"].sum(-1)[:, 1:] < 1 - 1e-3).any()  # the authors' rows do not all sum to 1


def test_authors_form_hand_computed_rows():
    # a b | a, n = 2: strings "_ab", "_a" (padding "_" counted as a unigram)
    p = _rows(2, [1, 2, 4, 1], form="authors")
    # t=0, "_a": context 'a' ends the string (c(a) = 1), nothing follows it: back off to the
    # unigram over the seen {a}, renormalized -> a = 1
    np.testing.assert_allclose(p[0], [1, 0, 0], atol=1e-6)
    # t=2, strings "_ab", "_": context '_' occurs twice, followed by 'a' once -> P(a) = 1/2,
    # beta = 1/2 to b, the only seen symbol unseen after '_' (its unigram 1/4 rescaled) -> P(b) = 1/2
    np.testing.assert_allclose(p[2], [0.5, 0.5, 0], atol=1e-6)
    # t=3, strings "_ab", "_a": context 'a' twice, followed by 'b' once -> 1/2; a unseen gets 1/2
    np.testing.assert_allclose(p[3], [0.5, 0.5, 0], atol=1e-6)
    # n = 1 is the plain unigram of the prefix
    np.testing.assert_allclose(_rows(1, [1, 2, 4, 1], form="authors")[3], [2 / 3, 1 / 3, 0], atol=1e-6)


def test_renormalized_rows_sum_to_one_and_authors_rows_at_most_one():
    data = read_reference(FIXTURES / "regbench6.tsv", num_symbols=18)
    for n in (1, 2, 3, 4):
        check_rows(build_baseline("ngram", n=n, form="renormalized").distributions(data))
        authors = build_baseline("ngram", n=n).distributions(data)
        assert check_rows(authors, deficit_ok=True) < 1e-5
    with pytest.raises(AssertionError, match="sums to 1"):
        check_rows(build_baseline("ngram", n=3).distributions(data))


def test_add_k_needs_the_renormalized_form():
    from mixerzoo.registry import ConfigError

    with pytest.raises(ConfigError, match="form=renormalized"):
        build_baseline("ngram", add_k=1.0)
    build_baseline("ngram", add_k=1.0, form="renormalized")


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
        check_rows(
            build_baseline("ngram", n=n, form="renormalized").distributions(_data(toks, len(toks) + 3))
        )


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
