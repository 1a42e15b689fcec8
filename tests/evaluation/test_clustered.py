"""The error of a mean over samples drawn in groups: the groups, not the samples, are the units."""

import math

import numpy as np
import pytest

from mixerzoo.evaluation.clustered import grouped_error, ratio_error


def test_one_sample_per_group_is_the_usual_error_of_a_mean():
    values = np.random.default_rng(0).normal(size=50)
    expected = values.std(ddof=1) / math.sqrt(len(values))
    assert grouped_error(values, np.arange(50)) == pytest.approx(expected)


def test_copies_of_a_groups_value_add_no_evidence():
    values = np.random.default_rng(1).normal(size=30)
    once = grouped_error(values, np.arange(30))
    copied = np.repeat(values, 7)
    # the naive error over the 210 samples is sqrt(7) times too small; by groups it is unchanged
    assert copied.std(ddof=1) / math.sqrt(len(copied)) < once / 2
    assert grouped_error(copied, np.repeat(np.arange(30), 7)) == pytest.approx(once)


def test_the_error_follows_the_cluster_robust_formula_by_brute_force():
    rng = np.random.default_rng(2)
    groups = rng.integers(0, 9, size=80)
    values = rng.normal(size=80) + groups  # groups differ: the within-group samples are correlated
    mean = values.mean()
    present = sorted(set(groups.tolist()))
    total = sum(((values[groups == g] - mean).sum()) ** 2 for g in present)
    expected = math.sqrt(len(present) / (len(present) - 1) * total) / len(values)
    assert grouped_error(values, groups) == pytest.approx(expected)


def test_fewer_than_two_groups_have_no_error():
    assert grouped_error(np.array([1.0, 2.0, 3.0]), np.array([4, 4, 4])) is None
    assert ratio_error(np.array([3.0, 0.0]), np.array([2, 0])) is None
