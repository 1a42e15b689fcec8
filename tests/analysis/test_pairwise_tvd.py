"""Pairwise TVD (ICLL Fig. 5): symmetric, zero diagonal, equal to Eq. 9 recomputed by hand."""

from __future__ import annotations

import numpy as np

from mixerzoo.analysis.pairwise_tvd import pairwise_tvd, plot_pairwise_tvd
from mixerzoo.baselines import build_baseline
from mixerzoo.evaluation.regbench_metrics import score_distributions
from mixerzoo.tasks import build_task


def test_symmetric_zero_diagonal_and_matches_the_scorer(tmp_path):
    d = build_task("regbench", preset="reference", seq_len=200).make(6, 0, "test")
    dists = {
        "true": build_baseline("true").distributions(d),
        "ngram": build_baseline("ngram", n=2).distributions(d),
    }
    dists["uniform"] = np.full_like(dists["true"], 1.0 / dists["true"].shape[2])
    names, m = pairwise_tvd(dists, d, max_tokens=10**6)
    np.testing.assert_allclose(m, m.T)
    np.testing.assert_array_equal(np.diag(m), 0.0)
    # against the true distribution, the pairwise TVD is Eq. 9's score (all positions kept)
    i, j = names.index("true"), names.index("ngram")
    assert abs(m[i, j] - score_distributions(dists["ngram"], d)["tvd"]) < 1e-6
    # by hand on the first 100 tokens: one explicit loop
    names100, m100 = pairwise_tvd(dists, d, max_tokens=100)
    a, b = dists["ngram"], dists["uniform"]
    vals = [
        0.5 * np.abs(a[r, t] - b[r, t]).sum()
        for r in range(len(d))
        for t in range(100)
        if d.inputs[r, t + 1] != 0  # a next token (the separator's included)
    ]
    assert abs(m100[names100.index("ngram"), names100.index("uniform")] - np.mean(vals)) < 1e-6
    assert plot_pairwise_tvd(names, m, tmp_path / "tvd.png").stat().st_size > 0


def test_the_error_is_the_instances_cluster_error_recomputed_by_hand():
    """Positions of one instance share its language: the error of the pooled mean is computed over
    instances (per-instance sums and counts), here with explicit loops."""
    from mixerzoo.analysis.pairwise_tvd import pairwise_tvd_errors

    d = build_task("regbench", preset="reference", seq_len=200).make(7, 3, "test")
    dists = {
        "true": build_baseline("true").distributions(d),
        "ngram": build_baseline("ngram", n=2).distributions(d),
    }
    names, m = pairwise_tvd(dists, d, max_tokens=100)
    e = pairwise_tvd_errors(dists, d, max_tokens=100)
    np.testing.assert_allclose(e, e.T)
    np.testing.assert_array_equal(np.diag(e), 0.0)
    sums, counts = [], []
    for r in range(len(d)):
        vals = [
            0.5 * np.abs(dists["true"][r, t] - dists["ngram"][r, t]).sum()
            for t in range(100)
            if d.inputs[r, t + 1] != 0
        ]
        if vals:
            sums.append(sum(vals))
            counts.append(len(vals))
    mean = sum(sums) / sum(counts)
    assert abs(mean - m[0, 1]) < 1e-6
    k = len(sums)
    by_hand = (k / (k - 1) * sum((s - mean * n) ** 2 for s, n in zip(sums, counts))) ** 0.5 / sum(counts)
    assert e[names.index("true"), names.index("ngram")] > 0
    assert abs(e[0, 1] - by_hand) < 1e-6 * by_hand  # the distributions are float32
