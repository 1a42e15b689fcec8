"""LaS Thm. B.1: Eq. 7's query weights balance every row, Eq. 12 holds, and the head equals a
channel's output computed by brute force; a broken construction and a signed kernel are caught."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mixerzoo.studies.computed.files import judge_theory, load_theory
from mixerzoo.theory import las_thm_b1
from mixerzoo.theory.las_thm_b1 import (
    ThmB1Params,
    attention_head,
    construction_defined,
    make_channel,
    plan_cells,
    query_weights,
    run,
)


def brute_convolution(k: np.ndarray, u: np.ndarray) -> np.ndarray:
    """y_i = sum_{j <= i} k_{i-j} u_j by two loops (Eq. 6 row by row)."""
    y = np.zeros_like(u)
    for i in range(u.shape[1]):
        for j in range(i + 1):
            y[:, i] += k[i - j] * u[:, j]
    return y


def test_every_row_of_eq7_sums_to_c_and_eq12_holds():
    k = np.random.default_rng(0).uniform(0, 1, 12)
    w = query_weights(k)
    np.testing.assert_allclose(np.exp(w).sum(1), k.sum(), rtol=1e-13)
    z = torch.softmax(torch.from_numpy(w), dim=1).numpy()
    toeplitz = np.array([[k[i - j] if j <= i else 0.0 for j in range(12)] for i in range(12)])
    np.testing.assert_allclose(z[:12, :12] * k.sum(), toeplitz, atol=1e-14)  # Eq. 12
    assert z[12, 12] == pytest.approx(1.0)  # the empty token's row sees only itself


def test_the_head_equals_the_convolution_by_brute_force():
    rng = np.random.default_rng(1)
    k = rng.uniform(0, 2, 30) * 0.9 ** np.arange(30)
    u = rng.standard_normal((4, 30))
    np.testing.assert_allclose(attention_head(k, u), brute_convolution(k, u), atol=1e-12)


@pytest.mark.parametrize("family", ["real-diagonal", "dense-nonnegative", "s4d-lin"])
def test_an_ssm_channel_kernel_is_c_a_power_b_and_its_recurrence_is_the_convolution(family):
    ch = make_channel(family, 4, 24, seed=2)
    u = np.random.default_rng(3).standard_normal((3, 24))
    impulse = np.eye(24)[:1]
    np.testing.assert_allclose(ch.reference(impulse)[0], ch.kernel, atol=1e-13)
    np.testing.assert_allclose(ch.reference(u), brute_convolution(ch.kernel, u), atol=1e-12)


def test_a_diagonal_kernel_matches_matrix_powers():
    rng = np.random.default_rng([9, 20, 6])  # make_channel's draws for seed 9, L = 20, N = 6
    a, b, c = rng.uniform(0.05, 0.999, 6), rng.uniform(0, 1, 6), rng.uniform(0, 1, 6)
    taps = [c @ np.linalg.matrix_power(np.diag(a), t) @ b for t in range(20)]
    np.testing.assert_allclose(make_channel("real-diagonal", 6, 20, seed=9).kernel, taps, rtol=1e-12)


def test_a_signed_kernel_has_no_construction_and_zeros_are_allowed():
    assert not construction_defined(np.array([1.0, -0.5, 0.2]))
    k = np.array([0.0, 1.0, 0.0, 0.5])  # ln 0 taps: exp gives exact zeros
    assert construction_defined(k)
    u = np.random.default_rng(4).standard_normal((2, 4))
    np.testing.assert_allclose(attention_head(k, u), brute_convolution(k, u), atol=1e-14)


def test_a_head_without_the_empty_token_column_is_caught(monkeypatch):
    def unbalanced(k):
        w = query_weights(k)
        w[: len(k), len(k)] = las_thm_b1.LN0  # no c_i: rows no longer sum to c
        return w

    monkeypatch.setattr(las_thm_b1, "query_weights", unbalanced)
    cell = las_thm_b1.setting_cell("real-diagonal", 4, 32, ThmB1Params(seeds=[0], n_inputs=2))
    assert cell["exact_share"] == 0.0 and cell["max_abs_error"] > 1e-3


def test_a_small_run_and_its_verdicts():
    p = ThmB1Params(state_sizes=[2, 8], seq_lens=[16, 32], seeds=[0, 1], n_inputs=2)
    out = run(p, log=lambda _m: None)
    keys = [{a: c[a] for a in out.axes} for c in out.cells]
    assert keys == plan_cells(p.model_dump())
    by = {(c["family"], c["state_size"], c["seq_len"]): c for c in out.cells}
    assert by[("real-diagonal", 8, 32)]["exact_share"] == 1.0
    assert by[("real-diagonal", 8, 32)]["max_abs_error"] < 1e-12
    assert by[("random-signed", None, 32)]["exact_share"] == 0.0
    verdicts = judge_theory(load_theory("las-thmb1-ssm-head"), out.cells, out.metric, out.axes, "quick")
    assert [v["verdict"] for v in verdicts] == ["reproduced", "not reproduced", "not reproduced"]
