"""The in-window ceiling of Zoology MQAR (mixerzoo/evaluation/window_ceiling.py), checked by brute
force, by the generator's own layout, and against the numbers zoology-window-attention states."""

from __future__ import annotations

import numpy as np
import pytest

from mixerzoo.evaluation.window_ceiling import in_window_share, value_distances, window_ceilings
from mixerzoo.studies.sweep.config import load_experiment
from mixerzoo.tasks import IGNORE, build_task

MQAR = {"vocab_size": 8192, "power_a": 0.1}


def brute_force_share(inputs: np.ndarray, labels: np.ndarray, window: int) -> float:
    """Every query, every position it can see (t - w + 1 .. t): is its answer there, after its key?"""
    hits = total = 0
    for i in range(inputs.shape[0]):
        for t in range(inputs.shape[1]):
            if labels[i, t] == IGNORE:
                continue
            total += 1
            seen = range(max(1, t - window + 1), t)
            hits += any(inputs[i, p - 1] == inputs[i, t] and inputs[i, p] == labels[i, t] for p in seen)
    return hits / total


def test_the_worked_example_of_the_mqar_docstring():
    inputs = np.array([[3, 12, 5, 9, 0, 0, 5, 0, 0, 0, 3, 0, 0, 0, 0, 0]])
    labels = np.full_like(inputs, IGNORE)
    labels[0, 6], labels[0, 10] = 9, 12
    assert value_distances(inputs, labels).tolist() == [3, 9]  # value 9 at 3, value 12 at 1
    assert [in_window_share(inputs, labels, w) for w in (3, 4, 9, 10)] == [0.0, 0.5, 0.5, 1.0]


@pytest.mark.parametrize("seq_len,pairs", [(64, 4), (128, 8), (128, 16)])
def test_the_share_equals_brute_force(seq_len, pairs):
    data = build_task("mqar", **MQAR, seq_len=seq_len, num_kv_pairs=pairs).make(60, 3, "test")
    for w in (1, 2, 8, 15, 32, 63, seq_len):
        assert in_window_share(data.inputs, data.labels, w) == brute_force_share(data.inputs, data.labels, w)


def test_distances_follow_the_generator_layout():
    """Without random fillers key i sits at 2 i, its value at 2 i + 1: a query at t is t - 2 i - 1 away."""
    task = build_task("mqar", **MQAR, seq_len=128, num_kv_pairs=8, random_non_queries=False)
    data = task.make(40, 0, "test")
    rows, cols = np.nonzero(data.labels != IGNORE)
    keys = data.inputs[rows, cols]
    index = np.array([int(np.nonzero(data.inputs[r, :16:2] == k)[0][0]) for r, k in zip(rows, keys)])
    np.testing.assert_array_equal(value_distances(data.inputs, data.labels), cols - 2 * index - 1)


def test_the_numbers_the_window_study_states():
    """The ceilings in zoology-window-attention's claims, and the thresholds read from them."""
    c256_8 = window_ceilings("mqar", [8, 15, 32], n=2000, **MQAR, seq_len=256, num_kv_pairs=8)
    c256_16 = window_ceilings("mqar", [8, 15, 32], n=2000, **MQAR, seq_len=256, num_kv_pairs=16)
    c128_8 = window_ceilings("mqar", [8, 15, 32], n=2000, **MQAR, seq_len=128, num_kv_pairs=8)
    assert c256_8[32] == pytest.approx(0.46, abs=0.02) and c128_8[32] == pytest.approx(0.56, abs=0.02)
    assert c256_16[32] == pytest.approx(0.30, abs=0.02)
    assert max(c[8] for c in (c256_8, c256_16, c128_8)) <= 0.09  # "at most 8%"
    assert max(c[15] for c in (c256_8, c256_16, c128_8)) <= 0.25  # two stacked windows of 8: "23%"
    claims = load_experiment("zoology-window-attention").claims
    assert claims[0].test.bound == round(0.9 * min(0.46, 0.56), 2)
    assert claims[1].test.bound == round(0.9 * 0.30, 2)
    assert claims[3].test.bound == 0.5 > max(c[15] for c in (c256_8, c256_16, c128_8))


def test_a_window_must_hold_a_token():
    data = build_task("mqar", **MQAR, seq_len=64, num_kv_pairs=4).make(2, 0, "test")
    with pytest.raises(ValueError, match="window = 0"):
        in_window_share(data.inputs, data.labels, 0)
