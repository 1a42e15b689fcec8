"""Atomic tasks Select / CumSum / CumMax (LaS Sec. 5.4) recomputed with plain loops."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mixerzoo.config import load_run_config
from mixerzoo.registry import ConfigError
from mixerzoo.tasks import build_task


def loop_cumsum(x: list[float]) -> list[float]:
    out, total = [], 0.0
    for t, v in enumerate(x):
        total += v
        out.append(total / math.sqrt(t + 1))
    return out


def loop_cummax(x: list[float]) -> list[float]:
    out, best = [], -math.inf
    for v in x:
        best = max(best, v)
        out.append(best)
    return out


@settings(max_examples=20, deadline=None)
@given(
    name=st.sampled_from(["cumsum", "cummax"]),
    L=st.integers(2, 80),
    pos=st.booleans(),
    seed=st.integers(0, 2**31),
)
def test_running_targets_by_loops(name, L, pos, seed):
    d = build_task(name, seq_len=L, position_channels=pos).make(10, seed)
    assert d.inputs.dtype == np.float32 and d.labels.dtype == np.float32
    assert d.inputs.shape == (10, L, 3 if pos else 1) and d.labels.shape == (10, L)
    assert d.mask.all()
    loop = loop_cumsum if name == "cumsum" else loop_cummax
    for x, y in zip(d.inputs[..., 0], d.labels):
        assert math.isclose(float(np.abs(x).max()), 1.0, rel_tol=1e-6)  # inf-norm normalization
        np.testing.assert_allclose(y, loop(x.astype(np.float64).tolist()), rtol=1e-5, atol=1e-6)
    if pos:
        t = np.arange(L)
        np.testing.assert_allclose(d.inputs[0, :, 1], np.cos(2 * np.pi * t / L), atol=1e-6)
        np.testing.assert_allclose(d.inputs[0, :, 2], np.sin(2 * np.pi * t / L), atol=1e-6)


@settings(max_examples=20, deadline=None)
@given(m=st.integers(1, 10), extra=st.integers(0, 40), seed=st.integers(0, 2**31))
def test_select_outputs_marked_values_in_order(m, extra, seed):
    L = 2 * m + extra
    d = build_task("select", seq_len=L, num_selected=m).make(10, seed)
    assert d.inputs.shape == (10, L, 2)
    for x, y, mask in zip(d.inputs, d.labels, d.mask):
        values, markers = x[:, 0], x[:, 1]
        marked = [float(values[t]) for t in range(L) if markers[t] == 1.0]
        assert len(marked) == m and set(np.unique(markers)) <= {0.0, 1.0}
        assert (markers[L - m :] == 0).all() and (values[L - m :] == 0).all()  # output region is blank
        assert mask.tolist() == [False] * (L - m) + [True] * m
        assert y[mask].tolist() == marked
        assert (y[~mask] == 0).all()


def test_task_implies_a_continuous_regression_model():
    cfg = load_run_config(
        {"data": {"task": {"name": "select", "seq_len": 40, "num_selected": 4}}, "model": {}}
    )
    m = cfg.model
    assert (m.input, m.input_dim, m.head, m.output_dim, m.max_len) == ("continuous", 2, "regression", 1, 40)
    assert m.vocab_size is None


def test_deterministic_and_splits_differ():
    task = build_task("cumsum", seq_len=16)
    assert np.array_equal(task.make(5, 1).inputs, task.make(5, 1).inputs)
    assert not np.array_equal(task.make(5, 1).inputs, task.make(5, 1, "test").inputs)


@pytest.mark.parametrize(
    "name, params, match",
    [
        ("select", {"seq_len": 10, "num_selected": 6}, "num_selected"),
        ("cumsum", {"seq_len": 1}, "seq_len"),
        ("cummax", {"vocab_size": 4}, "unknown field"),
    ],
)
def test_bad_parameters(name, params, match):
    with pytest.raises(ConfigError, match=match):
        build_task(name, **params)
