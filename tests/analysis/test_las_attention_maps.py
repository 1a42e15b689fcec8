"""The las-fig4-attention-maps study (LaS App. D, Fig. 4): smoothness and reach of hand-made maps
with known answers, the claims on hand-made cells, and a tiny run of a few training steps."""

from __future__ import annotations

import numpy as np
import pytest

from mixerzoo.analysis.attention_map_measures import (
    far_share,
    mean_and_error,
    mean_distance,
    min_max,
    roughness,
)
from mixerzoo.claims import INCONCLUSIVE, NOT_REPRODUCED, REPRODUCED, evaluate_claims
from mixerzoo.registry import ConfigError
from mixerzoo.studies.computed.files import load_theory, resolve_params
from mixerzoo.studies.lm.common import run_config
from mixerzoo.studies.lm.las import model_specs as las_model_specs
from mixerzoo.studies.lm.las_attention_maps import GAIN, PARAMS, gain_cell, plan_cells, run

L = 40
QUERIES = np.array([1, 5, 20, 39])
QUIET = {"log": lambda _m: None}


def uniform_map(length: int = L) -> np.ndarray:
    """Row i spreads evenly over keys 0..i."""
    return np.tril(np.ones((length, length))) / np.arange(1, length + 1)[:, None]


def banded_map(width: int, length: int = L) -> np.ndarray:
    """Row i spreads evenly over its last ``width`` keys, i - width < j <= i (all of 0..i when fewer)."""
    i, j = np.indices((length, length))
    band = ((i - j) >= 0) & ((i - j) < width)
    return band / band.sum(axis=1, keepdims=True)


def test_an_identity_map_is_rough_and_reaches_nowhere():
    eye = np.eye(L)
    # one jump of 1 among the i neighbouring pairs of row i
    np.testing.assert_allclose(roughness(eye, QUERIES), 1.0 / QUERIES)
    np.testing.assert_allclose(mean_distance(eye, QUERIES), 0.0)
    np.testing.assert_allclose(far_share(eye, QUERIES, far=0), 0.0)


def test_a_uniform_map_is_smooth_and_reaches_half_way():
    u = uniform_map()
    np.testing.assert_allclose(roughness(u, QUERIES), 0.0, atol=1e-15)
    np.testing.assert_allclose(mean_distance(u, QUERIES), QUERIES / 2)
    # keys with i - j > 16: i - 16 of the i + 1 keys (none for i <= 16)
    want = np.maximum(QUERIES - 16, 0) / (QUERIES + 1)
    np.testing.assert_allclose(far_share(u, QUERIES, far=16), want)


def test_a_banded_map_has_one_step_and_a_fixed_reach():
    w = 8
    band = banded_map(w)
    rows = np.array([7, 8, 20, 39])
    # row 7 covers keys 0..7 evenly (no step inside); later rows step up by 1/w once, at key i - w + 1
    np.testing.assert_allclose(roughness(band, rows), [0.0, *(1 / w / rows[1:])])
    np.testing.assert_allclose(mean_distance(band, rows), (w - 1) / 2)
    np.testing.assert_allclose(far_share(band, rows, far=16), 0.0)
    np.testing.assert_allclose(far_share(band, rows, far=5), 2 / w)  # distances 6 and 7


def test_rows_are_read_as_distributions_and_batches_keep_their_shape():
    u = uniform_map()
    stacked = np.stack([0.5 * u, np.eye(L), banded_map(4)])[None]  # [1, 3, l, l]; a row sums to 0.5
    assert roughness(stacked, QUERIES).shape == (1, 3, len(QUERIES))
    np.testing.assert_allclose(mean_distance(stacked, QUERIES)[0, 0], QUERIES / 2)
    with pytest.raises(ValueError, match="query positions >= 1"):
        roughness(u, np.array([0, 3]))


def test_the_error_is_clustered_by_window():
    from mixerzoo.analysis.attention_map_measures import window_mean_and_error

    # [layers, windows, heads, queries]: two windows whose rows agree within each window
    values = np.stack([np.full((1, 2, 3), 1.0), np.full((1, 2, 3), 3.0)], axis=1)
    mean, se = window_mean_and_error(values)
    assert mean == 2.0 and se == 1.0  # sd(1, 3) / sqrt(2), not the rows' sd / sqrt(12)
    assert mean_and_error(values)[1] < se


def test_mean_and_error_and_min_max():
    mean, se = mean_and_error(np.array([1.0, 2.0, 3.0, 4.0]))
    assert mean == 2.5 and se == pytest.approx(np.std([1, 2, 3, 4], ddof=1) / 2)
    assert mean_and_error(np.array([5.0]))[1] is None
    scaled = min_max(uniform_map(4))
    assert scaled.max() == 1.0 and scaled[np.tril_indices(4)].min() == 0.0 and scaled[0, 3] == 0.0


def cells(las: dict, attention: dict, gain: float = 0.1) -> list[dict]:
    """Hand-made cells: ``las`` / ``attention`` give each model's all-layer numbers."""
    out = []
    for name, numbers in (("las", las), ("attention", attention)):
        for group in ("all", "lower", "upper"):
            cell = {"model": name, "layer": group, "seeds": 1, "unigram_gain": 0.5, "se:unigram_gain": 0.01}
            for key, value in numbers.items():
                cell[key] = value + (gain if group == "upper" and name == "las" else 0.0)
                cell[f"se:{key}"] = 0.001
            out.append(cell)
    by = {(c["model"], c["layer"]): c for c in out}
    return out + [gain_cell(by, g) for g in ("all", "lower", "upper")]


def verdicts(table: list[dict]) -> list[str]:
    exp = load_theory("las-fig4-attention-maps")
    judged = evaluate_claims(
        exp.claims, table, "attention_distance", axes=["model", "layer"], directions=exp.metrics
    )
    return [c["verdict"] for c in judged]


def test_claims_on_hand_made_cells():
    paper = cells(
        {"roughness": 0.001, "attention_distance": 20.0, "far_share": 0.4},
        {"roughness": 0.01, "attention_distance": 5.0, "far_share": 0.1},
    )
    assert verdicts(paper) == [REPRODUCED] * 6
    flipped = cells(
        {"roughness": 0.01, "attention_distance": 5.0, "far_share": 0.1},
        {"roughness": 0.001, "attention_distance": 20.0, "far_share": 0.6},
        gain=-0.1,
    )
    assert verdicts(flipped) == [NOT_REPRODUCED] * 6
    untrained = [{**c, "unigram_gain": 0.0} if "unigram_gain" in c else c for c in paper]
    assert verdicts(untrained) == [INCONCLUSIVE] * 6


def test_the_quick_runs_are_those_of_las_lm_text8_enwik8():
    ours = resolve_params(load_theory("las-fig4-attention-maps"), "quick", {})[1]
    theirs = resolve_params(load_theory("las-lm-text8-enwik8"), "quick", {})[1]
    theirs = theirs.model_copy(update={"corpus": "kjv"})
    for name, spec in las_model_specs(ours).items():
        a = run_config(ours, "x", spec, ours.seeds[0])
        b = run_config(theirs, "x", las_model_specs(theirs)[name], theirs.seeds[0])
        assert a == b


@pytest.mark.parametrize(
    "sets,field",
    [
        ({"models": ["attention", "l"]}, "models"),
        ({"min_query": 500}, "min_query"),
        ({"n_layers": 1}, "n_layers"),
    ],
)
def test_bad_parameters_are_one_line(sets, field):
    with pytest.raises(ConfigError, match=field) as err:
        resolve_params(load_theory("las-fig4-attention-maps"), "quick", sets)
    assert "\n" not in str(err.value)


def test_a_tiny_run_produces_every_planned_cell_and_the_figure(tmp_path):
    text = "abishai and asahel went up abishai saw asahel " * 60
    (tmp_path / "text8").write_text(text)
    p = PARAMS(
        corpus="text8",
        data_dir=str(tmp_path),
        corpus_params={"n_train": len(text) - 600, "n_val": 300, "n_test": 300},
        d_model=16,
        n_layers=2,
        num_heads=2,
        block_size=32,
        batch_size=2,
        steps=2,
        warmup=0,
        eval_tokens=128,
        map_windows=2,
        queries=4,
        min_query=8,
        far=4,
        threads=1,
        device="cpu",
        runs_dir=str(tmp_path / "runs"),
    )
    out = run(p, **QUIET)
    assert [{"model": c["model"], "layer": c["layer"]} for c in out.cells] == plan_cells(
        p.model_dump(mode="json")
    )
    models = [c for c in out.cells if c["model"] != GAIN]
    assert all(c["rows"] == (2 if c["layer"] == "all" else 1) * 2 * 2 * 4 for c in models)
    for c in models:
        assert c["roughness"] >= 0 and 0 <= c["far_share"] <= 1 and 0 <= c["attention_distance"] <= 31
        assert c["se:roughness"] > 0 and c["seeds"] == 1
    full = [c for c in models if c["layer"] == "all"]
    assert all("unigram_gain" in c and "se:unigram_gain" in c and c["bpc"] > 0 for c in full)
    gains = [c for c in out.cells if c["model"] == GAIN]
    assert all("se:distance_gain" in c for c in gains)
    (figure,) = out.plot(tmp_path / "fig")
    assert figure.name == "las-fig4-attention-maps.png" and figure.stat().st_size > 0
    assert (tmp_path / "runs" / "las" / "seed-0" / "checkpoint.pt").is_file()
