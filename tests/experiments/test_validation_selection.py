"""Early stopping and a study's choice of run read a validation split, never the test split.

The trainer scores a validation split (``data.n_valid``, its own seed stream) beside the test
split and records it with the prefix ``valid_``; early stopping reads it alone. A study's cell
keeps the run best on the validation value of ``aggregate.metric`` and reports that run's test
numbers, every metric from the same run (ICLL App. B).
"""

from __future__ import annotations

import hashlib
import importlib
import statistics

import pytest
import torch

from mixerzoo.config import load_run_config
from mixerzoo.registry import ConfigError
from mixerzoo.store.results import ResultsStore
from mixerzoo.studies.sweep.cells import collect_results, results_rows, series
from mixerzoo.studies.sweep.config import load_experiment
from mixerzoo.studies.sweep.report import claim_cells
from mixerzoo.training.train import TIMING_KEYS, _make_split, rows_held, train, validation_size

train_module = importlib.import_module("mixerzoo.training.train")  # the package's ``train`` is the function


def tiny(n_valid=None, **train_fields):
    data = {"task": {"name": "mqar_cat", "vocab_size": 40, "seq_len": 16}, "n_train": 256, "n_test": 64}
    if n_valid is not None:
        data["n_valid"] = n_valid
    return load_run_config(
        {
            "data": data,
            "model": {"d_model": 16, "n_layers": 1, "mixer": "attention"},
            "train": {"epochs": 3, "batch_size": 32, "lr": 3e-3, "device": "cpu", **train_fields},
        }
    )


# -- the trainer ------------------------------------------------------------------------------
def stub_evaluate(monkeypatch, test_value: float, valid_values: list[float], n_valid: int):
    """Replace the scorer: the test split (64 rows) always scores ``test_value``; the validation
    split (``n_valid`` rows) scores the next of ``valid_values`` at each evaluation."""
    calls = {"test": 0, "valid": 0}

    def fake(model, kind, inputs, labels, mask=None, batch_size=256, device=None):
        split = "valid" if inputs.shape[0] == n_valid else "test"
        value = test_value if split == "test" else valid_values[min(calls["valid"], len(valid_values) - 1)]
        calls[split] += 1
        return {"loss": 1.0, "accuracy_per_query": value, "accuracy_per_example": value, "n_supervised": 1}

    monkeypatch.setattr(train_module, "evaluate", fake)
    return calls


def test_early_stopping_follows_the_validation_split_not_the_test_split(monkeypatch):
    # the test split is perfect from the first evaluation: the old rule would stop at once
    calls = stub_evaluate(monkeypatch, 1.0, [0.1, 0.2, 0.95], n_valid=48)
    r = train(tiny(n_valid=48, epochs=10, eval_every_steps=2, early_stop_accuracy=0.9), progress=False)
    assert [h["valid_accuracy_per_query"] for h in r.history] == [0.1, 0.2, 0.95]
    # the stopping evaluation also scores 64 training examples, counted here with the test split
    assert r.steps == 6 and calls == {"test": 4, "valid": 3}
    assert r.metrics["accuracy_per_query"] == 1.0 and r.metrics["valid_accuracy_per_query"] == 0.95


def test_a_perfect_test_split_never_stops_a_run(monkeypatch):
    stub_evaluate(monkeypatch, 1.0, [0.0], n_valid=48)
    r = train(tiny(n_valid=48, epochs=2, early_stop_accuracy=0.5), progress=False)
    assert r.metrics["epochs"] == 2 and r.steps == 16  # every step taken


def test_early_stopping_without_a_validation_split_is_refused():
    with pytest.raises(ConfigError, match="early_stop_accuracy reads the validation split"):
        tiny(n_valid=0, early_stop_accuracy=0.9)


def test_every_metric_is_recorded_on_validation_too_and_test_numbers_do_not_move():
    """``valid_`` metrics in the history and the final metrics (the task's own too: RegBench's);
    scoring a validation split changes no test number and no weight of a seeded run."""
    with_valid = train(tiny(eval_every_steps=4), progress=False)
    without = train(tiny(n_valid=0, eval_every_steps=4), progress=False)
    for h in with_valid.history:
        assert {"valid_accuracy_per_query", "valid_accuracy_per_example", "valid_loss"} <= set(h)
    assert "valid_" + train_module.EVAL_TIME_METRIC not in with_valid.metrics  # a timing, not a metric

    def test_only(history):
        return [
            {k: v for k, v in h.items() if not k.startswith("valid_") and k not in TIMING_KEYS}
            for h in history
        ]

    assert test_only(with_valid.history) == test_only(without.history)
    assert not any(k.startswith("valid_") for k in without.metrics)
    for p, q in zip(with_valid.model.parameters(), without.model.parameters()):
        assert torch.equal(p, q)


def test_regbench_records_its_own_metrics_on_validation():
    cfg = load_run_config(
        {
            "data": {
                "task": {
                    "name": "regbench",
                    "max_string_len": 6,
                    "min_strings": 2,
                    "max_strings": 3,
                    "seq_len": 40,
                },
                "n_train": 32,
                "n_test": 8,
                "n_valid": 6,
            },
            "model": {"d_model": 16, "n_layers": 1, "mixer": "attention"},
            "train": {"epochs": 1, "batch_size": 16, "device": "cpu"},
        }
    )
    m = train(cfg, progress=False).metrics
    assert {"regbench_tvd", "valid_regbench_tvd", "valid_regbench_accuracy"} <= set(m)
    assert m["se:regbench_tvd"] > 0 and m["se:regbench_accuracy"] >= 0  # the error over its 8 instances


# -- the data ---------------------------------------------------------------------------------
def digest(data) -> str:
    h = hashlib.sha256()
    for key, arr in sorted(data.arrays().items()):
        h.update(key.encode())
        h.update(arr.tobytes())
    return h.hexdigest()


#: sha256 of the train / test arrays and the config hash, as made before validation splits existed
BEFORE = {
    "mqar": (
        {"name": "mqar", "vocab_size": 64, "seq_len": 32},
        "19d01958beaef5fc13f2192093dbf49e35f49ff899f2cffd9dabce799d5fa720",
        "7ae96dc40705ceb93899664d49c1abe04b385cb29369a237e7abfe65e9d52c30",
        "74233c8503a4b1b46905361a77272848f4e26f5f2634e0f5b412044f871b8fcc",
    ),
    "listops": (
        {"name": "listops", "seq_len": 64, "min_length": 16, "max_length": 64, "max_depth": 3},
        "6e53e47ec0192ec0dc0cb6aece6d6e5c6ca1916197b810c6f3fe08f7beb97710",
        "ddbb6aba62f10c5e12aa54c3d9f52d22eb208a46f04e92fcc98e9fb4cab152e4",
        "63bd4b522e33524309e19632e29fa6476384da172a218b01f3260c91337cee79",
    ),
}


@pytest.mark.parametrize("name", BEFORE)
def test_train_and_test_data_and_the_config_hash_are_byte_identical(name):
    task, train_sha, test_sha, config_sha = BEFORE[name]
    base = {
        "data": {"task": task, "n_train": 40, "n_test": 20, "seed": 3},
        "model": {"d_model": 8, "mixer": "attention"},
    }
    cfg = load_run_config({**base, "train": {"device": "cpu"}})
    built = cfg.data.build_task()
    assert digest(_make_split(cfg, built, "train")) == train_sha
    assert digest(_make_split(cfg, built, "test")) == test_sha
    assert cfg.config_hash() == config_sha  # n_valid left at its default: the old hash
    valid = _make_split(cfg, built, "valid")
    assert len(valid) == 20 and digest(valid) not in (train_sha, test_sha)  # default: as many as n_test
    explicit = load_run_config({**base, "data": {**base["data"], "n_valid": 7}, "train": {"device": "cpu"}})
    assert explicit.config_hash() != config_sha and len(_make_split(explicit, built, "valid")) == 7


def test_a_file_task_holding_fewer_validation_rows_gives_all_of_them():
    """8x8 digits: 180 validation images (70-80 % of a fixed order), 359 test images (80-100 %)."""
    pytest.importorskip("sklearn")
    cfg = load_run_config(
        {
            "data": {"task": {"name": "digits8x8"}, "n_train": 100, "n_test": 359},
            "model": {"d_model": 8, "mixer": "attention"},
        }
    )
    task = cfg.data.build_task()
    assert rows_held(task, "valid") == 180 and validation_size(cfg, task) == 180
    assert len(_make_split(cfg, task, "valid")) == 180 and len(_make_split(cfg, task, "test")) == 359
    assert rows_held(tiny().data.build_task(), "valid") is None  # a generated task draws what is asked


# -- selection in a study ---------------------------------------------------------------------
LRS = [1e-3, 3e-3, 1e-2]


def study(reduce="max", seeds=(0,), metric="accuracy_per_query"):
    return load_experiment(
        {
            "kind": "sweep",
            "name": "selection",
            "base": {
                "data": {
                    "task": {"name": "mqar_cat", "vocab_size": 30, "seq_len": 8},
                    "n_train": 48,
                    "n_test": 16,
                },
                "model": {"d_model": 8, "n_layers": 1, "mixer": "attention"},
                "train": {"device": "cpu"},
            },
            "grid": {"model.d_model": [8], "train.lr": LRS},
            "seeds": list(seeds),
            "aggregate": {"metric": metric, "reduce": reduce, "over": ["train.lr", "seed"]},
            "figure": {"x": "model.d_model", "panels": None, "lines": None},
            "presets": {"quick": {}, "paper": {}},
        }
    )


def record(store, exp, metrics_of) -> None:
    """Finish every planned run with ``metrics_of(lr, seed)`` (no training)."""
    for p in exp.expand():
        run_id = store.start_run(
            p.config.model_dump(mode="json"), p.config_hash, name=p.config.name, experiment=exp.name
        )
        metrics = metrics_of(p.config.train.lr, p.config.train.seed)
        store.finish_run(run_id, metrics, wall_s=1.0, params=10, checkpoint=None)


#: lr -> (test accuracy, test TVD, validation accuracy): best on test is 1e-2, best on validation 3e-3
RUNS = {1e-3: (0.50, 0.40, 0.60), 3e-3: (0.70, 0.30, 0.90), 1e-2: (0.95, 0.10, 0.80)}


def with_valid(lr, seed):
    acc, tvd, valid = RUNS[lr]
    return {"accuracy_per_query": acc, "regbench_tvd": tvd, "valid_accuracy_per_query": valid, "loss": lr}


def test_the_cell_takes_the_run_best_on_validation_and_its_test_numbers(tmp_path):
    exp = study()
    store = ResultsStore(tmp_path / "r")
    record(store, exp, with_valid)
    (c,) = collect_results(exp, store).cells
    assert c.selected_on == "validation" and c.selection_value == 0.90
    assert c.metrics["accuracy_per_query"] == 0.70  # the validation-best run's test accuracy, not 0.95
    assert (c.selected[0].config["train"]["lr"], c.evidence) == (3e-3, {"n_test": 16, "seeds": 1})
    assert not any(k.startswith("valid_") for k in c.metrics)  # a cell's numbers are test numbers


def test_a_cells_accuracy_and_tvd_come_from_one_run(tmp_path):
    """Before, ``per_metric: {regbench_tvd: min}`` took the best TVD (0.10, lr 1e-2) beside the
    best accuracy of another run; now both are the selected run's (lr 3e-3)."""
    exp = study()
    store = ResultsStore(tmp_path / "r")
    record(store, exp, with_valid)
    (c,) = collect_results(exp, store).cells
    (run,) = c.selected
    assert (c.metrics["accuracy_per_query"], c.metrics["regbench_tvd"], c.metrics["loss"]) == (
        0.70,
        0.30,
        3e-3,
    )
    assert {k: run.metrics[k] for k in c.metrics} == c.metrics
    (cell,), _ = claim_cells(collect_results(exp, store))
    assert cell["selected_on"] == "validation" and cell["regbench_tvd"] == 0.30 and cell["n_test"] == 16


def test_a_lower_is_better_metric_selects_the_lowest_validation_value(tmp_path):
    exp = study(reduce="min", metric="regbench_tvd")
    store = ResultsStore(tmp_path / "r")
    valid_tvd = {1e-3: 0.2, 3e-3: 0.35, 1e-2: 0.25}
    record(store, exp, lambda lr, seed: {**with_valid(lr, seed), "valid_regbench_tvd": valid_tvd[lr]})
    (c,) = collect_results(exp, store).cells
    assert (c.selection_value, c.metrics["regbench_tvd"], c.metrics["accuracy_per_query"]) == (
        0.2,
        0.40,
        0.50,
    )


def test_runs_recorded_without_validation_metrics_are_selected_on_test_and_say_so(tmp_path):
    exp = study()
    store = ResultsStore(tmp_path / "r")
    record(
        store,
        exp,
        lambda lr, seed: {k: v for k, v in with_valid(lr, seed).items() if not k.startswith("valid_")},
    )
    res = collect_results(exp, store)
    (c,) = res.cells
    assert (
        c.selected_on == "test"
        and c.metrics["accuracy_per_query"] == 0.95
        and c.metrics["regbench_tvd"] == 0.10
    )
    header, rows = results_rows(res)
    assert rows[0][header.index("selected on")] == "test"
    assert claim_cells(res)[0][0]["selected_on"] == "test"


def test_one_old_run_among_new_ones_makes_the_cell_select_on_test(tmp_path):
    exp = study()
    store = ResultsStore(tmp_path / "r")

    def mixed(lr, seed):
        m = with_valid(lr, seed)
        return {k: v for k, v in m.items() if not k.startswith("valid_")} if lr == 1e-3 else m

    record(store, exp, mixed)
    (c,) = collect_results(exp, store).cells
    assert c.selected_on == "test" and c.metrics["accuracy_per_query"] == 0.95  # no mixing valid with test


def test_max_selects_over_seeds_too_one_run_per_cell(tmp_path):
    exp = study(seeds=(0, 1))
    store = ResultsStore(tmp_path / "r")

    def metrics(lr, seed):  # seed 1 of lr 1e-3 is the best on validation (0.95) and the worst on test
        return {
            **with_valid(lr, seed),
            "valid_accuracy_per_query": 0.95 if (lr, seed) == (1e-3, 1) else RUNS[lr][2],
        }

    record(store, exp, metrics)
    (c,) = collect_results(exp, store).cells
    assert len(c.selected) == 1 and c.metrics["accuracy_per_query"] == 0.50
    assert c.evidence == {"n_test": 16, "seeds": 1}


def test_mean_over_seeds_reduces_each_seeds_selected_run(tmp_path):
    exp = study(reduce="mean", seeds=(0, 1))
    store = ResultsStore(tmp_path / "r")

    # seed 0 picks lr 3e-3 (test 0.70); seed 1's validation favours lr 1e-2 (test 0.95 + 0.01)
    def metrics(lr, seed):
        m = with_valid(lr, seed)
        if seed == 1:
            m["accuracy_per_query"] += 0.01
            m["valid_accuracy_per_query"] = {1e-3: 0.1, 3e-3: 0.2, 1e-2: 0.3}[lr]
        return m

    record(store, exp, metrics)
    res = collect_results(exp, store)
    (c,) = res.cells
    assert [r.config["train"]["lr"] for r in c.selected] == [3e-3, 1e-2]
    assert c.metrics["accuracy_per_query"] == pytest.approx(statistics.fmean([0.70, 0.96]))
    assert c.metrics["regbench_tvd"] == pytest.approx(statistics.fmean([0.30, 0.10]))
    assert c.evidence["seeds"] == 2 and c.evidence["n_test"] == 16
    assert c.evidence["sd:accuracy_per_query"] == pytest.approx(statistics.stdev([0.70, 0.96]))
    assert c.selection_value == pytest.approx(statistics.fmean([0.90, 0.3]))


def test_a_runs_own_error_is_the_cells_evidence_and_over_seeds_that_of_their_mean(tmp_path):
    from mixerzoo.claims.noise import standard_error

    exp = study()
    store = ResultsStore(tmp_path / "r")
    record(store, exp, lambda lr, seed: {**with_valid(lr, seed), "se:regbench_tvd": lr * 10})
    (c,) = collect_results(exp, store).cells
    assert "se:regbench_tvd" not in c.metrics and c.evidence["se:regbench_tvd"] == pytest.approx(0.03)
    (cell,), _ = claim_cells(collect_results(exp, store))
    assert standard_error(cell, "regbench_tvd") == pytest.approx(0.03)  # the noise rule reads it as given

    exp = study(reduce="mean", seeds=(0, 1))
    store = ResultsStore(tmp_path / "r2")
    # every seed selects lr 1e-2 (best on validation); errors 0.03 and 0.04, TVDs 0.10 and 0.10
    valid = {1e-3: 0.1, 3e-3: 0.2, 1e-2: 0.3}
    record(
        store,
        exp,
        lambda lr, seed: {
            **with_valid(lr, seed),
            "valid_accuracy_per_query": valid[lr],
            "se:regbench_tvd": 0.03 + 0.01 * seed,
        },
    )
    (c,) = collect_results(exp, store).cells
    assert c.evidence["se:regbench_tvd"] == pytest.approx(0.05 / 2)  # sqrt(0.03^2 + 0.04^2) / 2
    assert "sd:se:regbench_tvd" not in c.evidence


def test_the_figure_reads_the_selected_cells(tmp_path):
    exp = study()
    store = ResultsStore(tmp_path / "r")
    record(store, exp, with_valid)
    res = collect_results(exp, store)
    assert series(res) == {(None, None, None): [(8, 0.70)]}
