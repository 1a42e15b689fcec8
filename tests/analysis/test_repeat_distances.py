"""Repeated-bigram distances (Zoology App. D, Figs. 3 and 5): hits and distances recomputed by
brute force, the power-law fit on planted distributions, and a run on a small text file."""

from __future__ import annotations

import numpy as np
import pytest

from mixerzoo.analysis.repeat_distances import (
    RepeatParams,
    excluded_ids,
    hit_distances,
    plan_cells,
    power_law_fit,
    run,
    tokenize,
)


def brute_force(window: np.ndarray, excluded: np.ndarray) -> list[int]:
    """Every counted hit's distance: the bigram ending at i + 1 seen before, most recent first."""
    out = []
    for i in range(len(window) - 1):
        a, b = window[i], window[i + 1]
        if excluded[a] or excluded[b]:
            continue
        for j in range(i - 1, -1, -1):
            if window[j] == a and window[j + 1] == b:
                out.append(i - j)
                break
    return out


def test_hits_and_distances_match_brute_force():
    rng = np.random.default_rng(0)
    ids = rng.integers(0, 6, size=3 * 41)
    excluded = np.zeros(6, dtype=bool)
    excluded[5] = True
    distances, _, hit = hit_distances(ids, excluded, seq_len=40, max_windows=None)
    expected = [d for w in ids.reshape(3, 41) for d in brute_force(w, excluded)]
    assert sorted(distances.tolist()) == sorted(expected) and hit.sum() == len(expected)


def test_stop_words_are_the_most_frequent_words_and_punctuation():
    ids, vocab = tokenize("the cat, the dog. the cat and a dog!")
    excluded = excluded_ids(ids, vocab, stop_words=1)
    assert {vocab[i] for i in np.flatnonzero(excluded)} == {"the", ",", ".", "!"}


def planted(sampler, seq_len=2048, n=200_000, seed=0) -> np.ndarray:
    """Distances seen at uniform target positions t, each drawn by ``sampler`` up to t."""
    rng = np.random.default_rng(seed)
    t = rng.integers(1, seq_len, size=n)
    d = sampler(rng, n)
    return d[d <= t]


def test_the_fit_recovers_a_planted_power_law_and_rejects_an_exponential():
    def power(rng, n):  # P(d) ~ d^-1.2 on 1 .. 2048
        k = np.arange(1, 2049)
        p = k**-1.2
        return rng.choice(k, size=n, p=p / p.sum())

    fit = power_law_fit(planted(power), 2048, 5)
    assert fit["slope"] == pytest.approx(-1.2, abs=0.1) and fit["r2"] > 0.98
    exponential = power_law_fit(planted(lambda rng, n: 1 + rng.geometric(1 / 150, size=n)), 2048, 5)
    assert exponential["r2"] < 0.9  # curved in log-log: not a power law


def test_a_run_on_a_text_file(tmp_path):
    text = " ".join(f"alpha{i % 7} beta{i % 11} gamma{i % 13}" for i in range(3000))
    path = tmp_path / "toy.txt"
    path.write_text(text)
    p = RepeatParams(sources=[str(path)], seq_len=256, stop_words=0)
    out = run(p, log=lambda _m: None)
    (cell,) = out.cells
    assert cell["source"] == "toy.txt" and cell["hits"] > 0 and 0 <= cell["share_within_100"] <= 1
    assert cell["se:share_within_100"] is not None
    assert plan_cells(p.model_dump()) == [{"source": "toy.txt"}]
    assert out.plot is not None and out.plot(tmp_path / "fig")[0].is_file()
