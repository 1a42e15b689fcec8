"""The standard error of a held-out loss: from its windows' spread, and from the spread over seeds."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mixerzoo.evaluation.ar_hits import window_error
from mixerzoo.studies.lm.common import combine_seeds, error_cells


def test_window_error_is_the_windows_spread_over_the_root_of_their_number():
    rng = np.random.default_rng(0)
    w = rng.normal(2.0, 0.3, size=400)
    expected = math.sqrt(sum((x - w.mean()) ** 2 for x in w) / 399) / 20
    assert window_error(w) == pytest.approx(expected)
    assert window_error(np.array([1.5])) is None


def test_combine_seeds_takes_the_larger_of_the_seed_spread_and_the_windows_error():
    mean, se, sd = combine_seeds([2.0, 2.2], [0.01, 0.01])
    assert mean == pytest.approx(2.1)
    assert sd == pytest.approx(math.sqrt(0.02))  # ddof 1: sqrt(((0.1)^2 * 2) / 1)
    assert se == pytest.approx(math.sqrt(0.02) / math.sqrt(2))  # the seeds disagree more than windows
    _, se, sd = combine_seeds([2.0, 2.0], [0.3, 0.4])
    assert sd == 0 and se == pytest.approx(0.5 / 2)  # identical seeds: the windows' error remains
    _, se, sd = combine_seeds([2.0], [None])
    assert se is None and sd is None


def test_error_cells_names_the_reserved_keys():
    assert error_cells("loss", 0.1, None, 1) == {"seeds": 1, "se:loss": 0.1}
    assert error_cells("loss", None, 0.2, 3) == {"seeds": 3, "sd:loss": 0.2}
