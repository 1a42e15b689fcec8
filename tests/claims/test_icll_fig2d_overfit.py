"""ICLL Sec. 4.5's "other models start to overfit to the training set with increasing depth", as
icll-fig2d judges it (the ``overfit`` predicate) on hand-set cells: models that overfit, models that
generalise better with depth, models that never fit their training set (the premise), and runs
recorded before they scored their training split. Nothing trains."""

from __future__ import annotations

import pytest

from mixerzoo.claims import INCONCLUSIVE, NOT_REPRODUCED, NOT_RUN, REPRODUCED, evaluate_claims
from mixerzoo.claims.predicates import Overfit
from mixerzoo.claims.schema import Claim
from mixerzoo.registry import ConfigError
from mixerzoo.studies.sweep.config import load_experiment

AXES = ["variant", "data.n_train", "model.n_layers"]
DEPTHS = [1, 2, 4, 8, 12]
#: (training-set accuracy, test accuracy) at each depth
OVERFITS = [(0.52, 0.51), (0.80, 0.72), (0.90, 0.74), (0.97, 0.70), (0.99, 0.66)]
GENERALISES = [(0.52, 0.51), (0.70, 0.68), (0.80, 0.78), (0.90, 0.88), (0.95, 0.93)]
NEVER_FITS = [(0.50, 0.49), (0.51, 0.50), (0.50, 0.50), (0.52, 0.50), (0.51, 0.49)]
#: a wider gap with depth, but within the noise of 500 test instances
FLAT = [(0.52, 0.51), (0.80, 0.78), (0.81, 0.78), (0.82, 0.78), (0.82, 0.78)]
TRANSFORMER = [(0.52, 0.51), (0.90, 0.88), (0.95, 0.93), (0.98, 0.96), (0.99, 0.98)]


def overfit_claim(preset: str = "paper"):
    exp = load_experiment("icll-fig2d", preset)
    (claim,) = [c for c in exp.claims if isinstance(c.predicate(), Overfit)]
    return exp, claim


def cells(curves: dict[str, list[tuple[float, float]]], n_train: int = 1000, train: bool = True):
    out = []
    for variant, curve in {"transformer": TRANSFORMER, **curves}.items():
        for depth, (on_train, on_test) in zip(DEPTHS, curve):
            cell = {"variant": variant, "data.n_train": n_train, "model.n_layers": depth}
            cell |= {"regbench_accuracy": on_test, "n_test": 500, "seeds": 1}
            cell |= {"runs_finished": 1, "runs_planned": 1}
            if train:
                cell["train_regbench_accuracy"] = on_train
            out.append(cell)
    return out


def judge(table: list[dict]) -> dict:
    exp, claim = overfit_claim()
    (result,) = evaluate_claims([claim], table, exp.aggregate.metric, axes=AXES, directions=exp.metrics)
    return result


def test_the_claim_quotes_the_paper_and_labels_its_reading():
    _, claim = overfit_claim()
    assert claim.claim.startswith("other models start to overfit to the training set with increasing depth [")
    assert (
        "project reading" in claim.claim and claim.premises() and claim.paper_ref.startswith("ICLL Sec. 4.5")
    )
    assert "transformer" not in claim.where["variant"] and len(claim.where["variant"]) == 9


def test_models_that_overfit_with_depth_reproduce_it():
    result = judge(cells({"lstm": OVERFITS, "gla": OVERFITS}))
    assert result["verdict"] == REPRODUCED, result["evidence"]
    assert "2 of 2 groups overfit (all required)" in result["evidence"]
    assert "lstm n_train=1000: train/test 1: 0.5200/0.5100" in result["evidence"]
    assert result["premise"].startswith("[held]")


def test_models_that_generalise_better_with_depth_do_not_reproduce_it():
    """A gap constant with depth while the test accuracy rises at every step: no overfitting."""
    result = judge(cells({"lstm": GENERALISES, "gla": OVERFITS}))
    assert result["verdict"] == NOT_REPRODUCED, result["evidence"]
    assert (
        "lstm n_train=1000" in result["evidence"]
        and "no step overfits (every gap narrower" in result["evidence"]
    )


def test_learning_is_not_overfitting():
    """From one layer at chance to two that learned, the gap widens with the test accuracy: that
    step alone never reads as overfitting."""
    learns = [(0.52, 0.51), (0.80, 0.75), (0.80, 0.75), (0.80, 0.75), (0.80, 0.75)]
    result = judge(cells({"lstm": learns}))
    assert result["verdict"] != REPRODUCED


def test_a_gap_within_noise_is_inconclusive():
    result = judge(cells({"lstm": FLAT, "gla": OVERFITS}))
    assert result["verdict"] == INCONCLUSIVE, result["evidence"]
    assert "no step overfits beyond noise" in result["evidence"]


def test_models_that_never_fit_their_training_set_fail_the_premise():
    result = judge(cells({"lstm": NEVER_FITS, "gla": NEVER_FITS}))
    assert result["verdict"] == INCONCLUSIVE
    assert result["evidence"].startswith("premise not")  # met, or shown beyond noise
    assert "overfitting needs a model that fit its training set" in result["evidence"]


def test_a_model_that_never_fits_its_training_set_is_a_tie_beside_one_that_overfits():
    result = judge(cells({"lstm": NEVER_FITS, "gla": OVERFITS}))
    assert result["verdict"] == INCONCLUSIVE, result["evidence"]
    assert "did not fit its training set (a tie)" in result["evidence"]


def test_runs_without_training_set_numbers_read_not_run_and_ask_for_a_rerun():
    result = judge(cells({"lstm": OVERFITS, "gla": OVERFITS}, train=False))
    assert result["verdict"] == NOT_RUN
    assert "the runs record no training-set numbers" in result["evidence"]
    assert "re-run them" in result["evidence"] and "lstm n_train=1000, gla n_train=1000" in result["evidence"]


def test_every_training_set_size_is_a_group():
    table = cells({"lstm": OVERFITS}, n_train=1000) + cells({"lstm": GENERALISES}, n_train=40000)
    result = judge(table)
    assert result["verdict"] == NOT_REPRODUCED and "1 of 2 groups overfit" in result["evidence"]


def test_the_quick_preset_trains_no_other_model_and_reads_not_run():
    exp, claim = overfit_claim("quick")
    (result,) = evaluate_claims([claim], cells({}), exp.aggregate.metric, axes=AXES)
    assert result["verdict"] == NOT_RUN


def test_a_lower_is_better_metric_reads_the_gap_the_other_way():
    claim = Claim.model_validate(
        {"claim": "x", "paper_ref": "p", "where": {"variant": "lstm"}, "overfit": {"axis": "model.n_layers"}}
    )
    tvd = [(0.5, 0.5), (0.2, 0.3), (0.1, 0.3), (0.05, 0.35)]  # training TVD falls, test TVD rises
    table = [
        {"variant": "lstm", "model.n_layers": d, "regbench_tvd": te, "train_regbench_tvd": tr}
        for d, (tr, te) in zip(DEPTHS, tvd)
    ]
    (result,) = evaluate_claims([claim], table, "regbench_tvd", axes=["variant", "model.n_layers"])
    assert result["verdict"] == REPRODUCED, result["evidence"]


def test_quantifier_mean_is_refused():
    claim = Claim.model_validate(
        {"claim": "x", "paper_ref": "p", "quantifier": "mean", "overfit": {"axis": "model.n_layers"}}
    )
    with pytest.raises(ConfigError, match="quantifier all or any"):
        evaluate_claims([claim], cells({"lstm": OVERFITS}), "regbench_accuracy", axes=AXES)
