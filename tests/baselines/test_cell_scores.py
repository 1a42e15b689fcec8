"""The in-context baselines scored on a sweep cell's own test split (``baselines/cell_scores.py``),
and the cells of a RegBench sweep carrying them where a claim compares models with them."""

from __future__ import annotations

import json

import pytest
import yaml

from mixerzoo.baselines import build_baseline, cell_scores
from mixerzoo.claims.predicates.versus_baselines import baseline_key
from mixerzoo.evaluation.chance import cell_chance_levels
from mixerzoo.evaluation.regbench_metrics import score_distributions, score_with_errors
from mixerzoo.studies.sweep.cells import CellResult, ExperimentResults
from mixerzoo.studies.sweep.config import load_experiment
from mixerzoo.studies.sweep.report import claim_cells
from mixerzoo.tasks import build_task

TASK = {"name": "regbench", "max_string_len": 6, "min_strings": 3, "max_strings": 4, "seq_len": 40}
DATA = {"task": TASK, "n_train": 20, "n_test": 10, "seed": 2}
BASELINES = {"2-gram": {"name": "ngram", "n": 2}, "3-gram": {"name": "ngram", "n": 3}}


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    """A fresh cache folder and an empty in-process cache for every test."""
    monkeypatch.setenv("MIXERZOO_CACHE", str(tmp_path / "cache"))
    cell_scores._scores.cache_clear()
    yield
    cell_scores._scores.cache_clear()


def test_scores_are_the_baseline_s_on_the_runs_test_split_whatever_n_train():
    params = {k: v for k, v in TASK.items() if k != "name"}
    test = build_task("regbench", **params).make(10, 2, "test")  # what training/train.py scores a run on
    got = cell_scores.split_scores(DATA, BASELINES)
    assert got == cell_scores.split_scores({**DATA, "n_train": 5000}, BASELINES)
    for label, spec in BASELINES.items():
        params = dict(spec)
        dist = build_baseline(params.pop("name"), **params).distributions(test)
        pooled, errors = score_distributions(dist, test), score_with_errors(dist, test)
        assert got[label]["regbench_tvd"] == pytest.approx(pooled["tvd"], abs=1e-12)
        assert got[label]["regbench_accuracy"] == pytest.approx(pooled["accuracy"], abs=1e-12)
        assert got[label]["se:regbench_tvd"] == pytest.approx(errors["se_tvd"], abs=1e-12)
    assert cell_scores.split_scores({**DATA, "seed": 3}, BASELINES) != got  # another split


def test_a_task_without_eq_8_9_scores_has_no_baselines():
    mqar = {"task": {"name": "mqar_cat", "vocab_size": 30, "seq_len": 8}, "n_test": 4}
    assert cell_scores.split_scores(mqar, BASELINES) == {}
    assert cell_scores.split_scores(DATA, {}) == {}


def test_a_second_process_reads_the_scores_from_the_disk_cache(tmp_path, monkeypatch):
    first = cell_scores.split_scores(DATA, BASELINES)
    assert (tmp_path / "cache" / cell_scores.CACHE_FILE).is_file()
    cell_scores._scores.cache_clear()  # as a new process

    def no_compute(*_):
        raise AssertionError("computed again")

    monkeypatch.setattr(cell_scores, "_compute", no_compute)
    assert cell_scores.split_scores(DATA, BASELINES) == first


def sweep(tmp_path, claim: dict | None):
    raw = {
        "kind": "sweep",
        "name": "rb-tiny",
        "base": {"data": DATA, "model": {"d_model": 8, "n_layers": 1, "mixer": "attention"}},
        "variants": {"attention": {}, "gla": {"model": {"mixer": {"name": "gla", "num_heads": 2}}}},
        "aggregate": {"metric": "regbench_tvd", "reduce": "min", "over": []},
        "claims": [claim] if claim else [],
        "presets": {"quick": {}, "paper": {}},
    }
    path = tmp_path / "rb-tiny.yaml"
    path.write_text(yaml.safe_dump(raw))
    exp = load_experiment(str(path), "quick")
    cells = []
    for p in exp.expand():
        cells.append(
            CellResult(cell=p.cell, planned=[p], metrics={"regbench_tvd": 0.5, "regbench_accuracy": 0.6})
        )
    cells.append(CellResult(cell={"variant": "none"}))  # a cell with no result carries nothing
    return claim_cells(ExperimentResults(exp, cells))[0]


def test_a_sweep_s_cells_carry_the_baselines_a_claim_compares_with(tmp_path):
    claim = {
        "claim": "c",
        "paper_ref": "p",
        "versus_baselines": {
            "models": {"variant": "gla"},
            "baselines": BASELINES,
            "worse": {"op": ">", "value": 0.5},
        },
    }
    cells = sweep(tmp_path, claim)
    scores = cell_scores.split_scores(DATA, BASELINES)
    chance = cell_chance_levels(json.dumps(DATA, sort_keys=True))
    for cell in cells[:2]:
        for label in BASELINES:
            key = baseline_key(label, "regbench_tvd")
            assert cell[key] == scores[label]["regbench_tvd"]
            assert cell[f"se:{key}"] == scores[label]["se:regbench_tvd"]
            assert cell[f"chance:{key}"] == pytest.approx(chance["regbench_tvd"])
    assert not any(k.startswith("baseline:") for k in cells[2])
    assert not any(k.startswith("baseline:") for c in sweep(tmp_path, None) for k in c)
