"""RegBench scores with their standard errors over the test instances (``score_with_errors``),
against the pooled scorer and a per-instance loop written out here."""

from __future__ import annotations

import numpy as np
import pytest

from mixerzoo.baselines import build_baseline
from mixerzoo.evaluation.regbench_metrics import score_distributions, score_with_errors
from mixerzoo.tasks import build_task
from mixerzoo.tasks.regbench import true_distributions

TASK = {"max_string_len": 6, "min_strings": 3, "max_strings": 4, "seq_len": 40}


def test_the_pooled_scores_are_the_scorer_s_and_the_error_is_the_ratio_estimator_s():
    data = build_task("regbench", **TASK).make(12, 3, "test")
    pred = build_baseline("ngram", n=2).distributions(data)
    got = score_with_errors(pred, data, batch_size=5)  # batches that split the instances unevenly
    pooled = score_distributions(pred, data)
    assert got["n_scored"] == pooled["n_scored"]
    assert got["accuracy"] == pytest.approx(pooled["accuracy"], abs=1e-12)
    assert got["tvd"] == pytest.approx(pooled["tvd"], abs=1e-12)
    true = true_distributions(data)
    hits, dists, counts = [], [], []
    for i in range(len(data)):  # one instance at a time, by hand
        width = data.inputs.shape[1]  # every position with a next token, the separator's included
        rows = [t for t in range(width - 1) if data.inputs[i, t + 1] != 0]
        p, q = pred[i, rows].astype(np.float64), true[i, rows].astype(np.float64)
        hits.append(sum(q[k, p[k].argmax()] > 0 for k in range(len(rows))))
        dists.append(0.5 * np.abs(p - q).sum())
        counts.append(len(rows))
    n, c = len(data), np.array(counts, dtype=np.float64)
    for name, s in (("accuracy", np.array(hits, dtype=np.float64)), ("tvd", np.array(dists))):
        r = s.sum() / c.sum()
        se = np.sqrt(n / (n - 1) * ((s - r * c) ** 2).sum()) / c.sum()
        assert got[name] == pytest.approx(r, abs=1e-12)
        assert got[f"se_{name}"] == pytest.approx(se, rel=1e-9) and got[f"se_{name}"] > 0


def test_one_instance_has_no_spread_and_a_bad_shape_is_refused():
    data = build_task("regbench", **TASK).make(1, 0, "test")
    pred = build_baseline("ngram", n=1).distributions(data)
    got = score_with_errors(pred, data)
    assert got["se_accuracy"] == got["se_tvd"] == 0.0
    with pytest.raises(ValueError, match="do not match inputs"):
        score_with_errors(pred[:, :-1], data)
