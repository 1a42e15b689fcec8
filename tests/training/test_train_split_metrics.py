"""A run's last evaluation scores a fixed subset of its training split (``train_<metric>``).

The subset holds as many training examples as the test split (all of them when the training split
is smaller), drawn from a seed stream of its own; its numbers are recomputed here from the model's
full logits, apart from the trainer's scorers. Scoring it moves no test or validation number and
no weight. A study's cell takes them from the run it selected on validation.
"""

from __future__ import annotations

import importlib

import numpy as np
import torch

from mixerzoo.config import load_run_config
from mixerzoo.evaluation.train_subset import subset_rows, training_subset
from mixerzoo.runs.task import execute_run
from mixerzoo.store.results import ResultsStore
from mixerzoo.studies.sweep.cells import collect_results
from mixerzoo.studies.sweep.config import load_experiment
from mixerzoo.tasks.base import IGNORE
from mixerzoo.tasks.regbench import true_distributions
from mixerzoo.training.train import TIMING_KEYS, TRAIN_PREFIX, train

train_module = importlib.import_module("mixerzoo.training.train")  # the package's ``train`` is the function


def regbench(n_train=96, n_test=24, **train_fields):
    return load_run_config(
        {
            "data": {
                "task": {
                    "name": "regbench",
                    "max_string_len": 6,
                    "min_strings": 2,
                    "max_strings": 3,
                    "seq_len": 40,
                },
                "n_train": n_train,
                "n_test": n_test,
                "seed": 5,
            },
            "model": {"d_model": 16, "n_layers": 1, "mixer": "attention"},
            "train": {"epochs": 2, "batch_size": 16, "lr": 3e-3, "device": "cpu", **train_fields},
        }
    )


@torch.no_grad()
def recomputed(model, data) -> dict[str, float]:
    """accuracy_per_query and Eq. 8's accuracy from the model's full logits, position by position."""
    model.eval()
    choice = model(torch.from_numpy(data.inputs)).argmax(-1).numpy()
    supervised = data.labels != IGNORE
    scored = np.zeros_like(supervised)  # Eq. 8 scores every position with a next token
    scored[:, :-1] = data.inputs[:, 1:] != 0
    true = true_distributions(data)
    valid = np.take_along_axis(true, choice[..., None], axis=-1)[..., 0] > 0
    return {
        "accuracy_per_query": float((choice == data.labels)[supervised].mean()),
        "regbench_accuracy": float(valid[scored].mean()),
        "n_supervised": int(supervised.sum()),
    }


def test_train_metrics_equal_a_recomputation_on_the_same_training_examples():
    cfg = regbench()
    result = train(cfg, progress=False)
    train_split = cfg.data.build_task().make(cfg.data.n_train, cfg.data.seed, "train")
    rows = subset_rows(cfg.data.n_train, cfg.data.n_test, cfg.data.seed)
    assert len(rows) == cfg.data.n_test == len(set(rows.tolist())) and (np.diff(rows) > 0).all()
    subset = training_subset(train_split, cfg.data.n_test, cfg.data.seed)
    np.testing.assert_array_equal(subset.inputs, train_split.inputs[rows])
    expected = recomputed(result.model, subset)
    for name, value in expected.items():
        assert result.metrics[TRAIN_PREFIX + name] == value, name
    assert {"train_regbench_tvd", "train_accuracy_per_example"} <= set(result.metrics)
    assert result.metrics["train_loss"] == result.history[-1]["train_loss"]  # the loop's loss, as before


def test_a_training_split_no_larger_than_the_test_split_is_scored_whole():
    cfg = regbench(n_train=16, n_test=24, epochs=1)
    result = train(cfg, progress=False)
    train_split = cfg.data.build_task().make(16, cfg.data.seed, "train")
    assert training_subset(train_split, 24, cfg.data.seed) is train_split
    assert result.metrics["train_n_supervised"] == int((train_split.labels != IGNORE).sum())


def test_only_the_last_evaluation_scores_the_training_split():
    result = train(regbench(epochs=3), progress=False)
    assert [any(k.startswith(TRAIN_PREFIX) and k != "train_loss" for k in h) for h in result.history] == [
        False,
        False,
        True,
    ]
    assert {k: v for k, v in result.history[-1].items() if k.startswith(TRAIN_PREFIX)} == {
        k: v for k, v in result.metrics.items() if k.startswith(TRAIN_PREFIX)
    }


def test_the_run_that_early_stopping_ends_scores_the_training_split():
    result = train(regbench(epochs=4, early_stop_accuracy=1e-6), progress=False)
    assert len(result.history) == 1 and "train_regbench_accuracy" in result.history[0]


def test_scoring_the_training_split_moves_no_test_or_validation_number(monkeypatch):
    """The same seeded run with the training pass and without it (the loop before it existed)."""
    scored = train(regbench(epochs=3), progress=False)
    monkeypatch.setattr(train_module, "_train_split_metrics", lambda run: {})
    before = train(regbench(epochs=3), progress=False)

    def others(history):
        return [
            {k: v for k, v in h.items() if k not in TIMING_KEYS and not k.startswith(TRAIN_PREFIX)}
            | {"train_loss": h["train_loss"]}
            for h in history
        ]

    assert others(scored.history) == others(before.history)
    assert not any(k.startswith(TRAIN_PREFIX) and k != "train_loss" for k in before.metrics)
    for p, q in zip(scored.model.parameters(), before.model.parameters()):
        assert torch.equal(p, q)


def test_a_cells_train_metrics_come_from_the_run_selected_on_validation(tmp_path):
    exp = load_experiment(
        {
            "kind": "sweep",
            "name": "train-split",
            "base": {
                "data": {
                    "task": {"name": "mqar_cat", "vocab_size": 30, "seq_len": 8},
                    "n_train": 48,
                    "n_test": 16,
                },
                "model": {"d_model": 8, "n_layers": 1, "mixer": "attention"},
                "train": {"device": "cpu"},
            },
            "grid": {"model.d_model": [8], "train.lr": [1e-3, 3e-3]},
            "aggregate": {"metric": "accuracy_per_query", "reduce": "max", "over": ["train.lr", "seed"]},
            "figure": {"x": "model.d_model", "panels": None, "lines": None},
            "presets": {"quick": {}, "paper": {}},
        }
    )
    # lr 1e-3 is best on test and on the training split, 3e-3 on validation: the cell is 3e-3's
    runs = {1e-3: (0.9, 0.5, 1.0), 3e-3: (0.7, 0.8, 0.75)}
    store = ResultsStore(tmp_path / "r")
    for p in exp.expand():
        test, valid, on_train = runs[p.config.train.lr]
        metrics = {
            "accuracy_per_query": test,
            "valid_accuracy_per_query": valid,
            "train_accuracy_per_query": on_train,
        }
        run_id = store.start_run(p.config.model_dump(mode="json"), p.config_hash, experiment=exp.name)
        store.finish_run(run_id, metrics, wall_s=1.0, params=10, checkpoint=None)
    (cell,) = collect_results(exp, store).cells
    assert (cell.metrics["accuracy_per_query"], cell.metrics["train_accuracy_per_query"]) == (0.7, 0.75)


def test_a_task_run_stores_its_train_metrics_beside_its_test_and_validation_metrics(tmp_path):
    store = ResultsStore(tmp_path / "r")
    rec = execute_run(regbench(epochs=2), store, progress=False)
    assert {"regbench_accuracy", "valid_regbench_accuracy", "train_regbench_accuracy"} <= set(rec.metrics)
    last = store.history(rec.run_id)[-1]
    assert last["train_regbench_accuracy"] == rec.metrics["train_regbench_accuracy"]
    assert not any(k.startswith("train_regbench") for k in store.history(rec.run_id)[0])
