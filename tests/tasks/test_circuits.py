"""Parity and majority (zoology circuits), labels recomputed by counting bits one by one."""

from __future__ import annotations

import numpy as np
import pytest

from mixerzoo.registry import ConfigError
from mixerzoo.tasks import IGNORE, build_task


def parity(bits: list[int]) -> int:
    odd = 0
    for b in bits:
        if b == 1:
            odd = 1 - odd
    return odd


def majority_end(bits: list[int]) -> int:
    ones = sum(1 for b in bits if b == 1)
    return 1 if ones > len(bits) - ones else 0  # zoology: ratio > 1/2, a tie is 0


def majority_prefix(bits: list[int]) -> int:
    ones = sum(1 for b in bits if b == 1)
    return 1 if ones >= len(bits) - ones else 0  # zoology cumulative: a tie is 1


@pytest.mark.parametrize("name,rule", [("parity", parity), ("majority", majority_end)])
@pytest.mark.parametrize("L", [2, 7, 16])
def test_end_label_by_brute_force(name, rule, L):
    d = build_task(name, seq_len=L).make(200, L)
    for x, y in zip(d.inputs.tolist(), d.labels.tolist()):
        assert x[-1] == 2 and all(b in (0, 1) for b in x[:-1])
        assert y[:-1] == [IGNORE] * (L - 1) and y[-1] == rule(x[:-1])


@pytest.mark.parametrize("name,rule", [("parity", parity), ("majority", majority_prefix)])
def test_cumulative_labels_by_brute_force(name, rule):
    d = build_task(name, seq_len=12, cumulative=True).make(100, 0)
    for x, y in zip(d.inputs.tolist(), d.labels.tolist()):
        assert all(b in (0, 1) for b in x)
        assert y == [rule(x[: t + 1]) for t in range(len(x))]


def test_both_classes_occur_and_ties_follow_zoology():
    d = build_task("majority", seq_len=5).make(500, 0)  # 4 bits: ties (2 ones) are labelled 0
    ones = d.inputs[:, :-1].sum(axis=1)
    assert set(d.labels[ones == 2, -1].tolist()) == {0}
    for name in ("parity", "majority"):
        labels = build_task(name, seq_len=9).make(400, 1).labels[:, -1]
        assert 0.3 < labels.mean() < 0.7


@pytest.mark.parametrize("name", ["parity", "majority"])
def test_seeded_and_validated(name):
    t = build_task(name)
    a, b = t.make(20, 3), t.make(20, 3)
    assert np.array_equal(a.inputs, b.inputs) and np.array_equal(a.labels, b.labels)
    assert not np.array_equal(a.inputs, t.make(20, 3, "test").inputs)
    with pytest.raises(ConfigError, match="seq_len") as err:
        build_task(name, seq_len=1)
    assert "\n" not in str(err.value)
    with pytest.raises(ConfigError, match="vocab_size"):
        build_task(name, vocab_size=2)
