"""Learning curves of stored runs: ``mixerzoo curves`` (text, ``--json``, ``--out``) and
``mixerzoo.api.curves`` give every evaluation the run recorded, by step and split."""

from __future__ import annotations

import json

import pytest

from mixerzoo.evaluation.learning_curves import curve_rows
from mixerzoo.runs.task import execute_run
from mixerzoo.store.results import ResultsStore

CONFIG = {
    "data": {"task": {"name": "mqar_cat", "vocab_size": 30, "seq_len": 8}, "n_train": 32, "n_test": 16},
    "model": {"d_model": 8, "n_layers": 1, "mixer": "attention"},
    "train": {"epochs": 3, "batch_size": 16, "device": "cpu"},
}


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    root = tmp_path_factory.mktemp("curves") / "res"
    store = ResultsStore(root)
    record = execute_run(CONFIG, store, progress=False)
    return str(root), record, store.history(record.run_id)


def test_curve_rows_put_each_metric_of_each_evaluation_on_its_split():
    history = [
        {"step": 4, "epoch": 2, "wall_s": 2.0, "accuracy": 0.5, "valid_accuracy": 0.4, "train_loss": 1.0},
        {"step": 2, "epoch": 1, "wall_s": 1.0, "accuracy": 0.25, "note": "text", "valid_accuracy": 0.2},
    ]
    rows = curve_rows(history)
    assert [(r["step"], r["split"], r["metric"], r["value"]) for r in rows] == [
        (2, "test", "accuracy", 0.25),
        (2, "valid", "accuracy", 0.2),
        (4, "test", "accuracy", 0.5),
        (4, "valid", "accuracy", 0.4),
        (4, "train", "loss", 1.0),
    ]


def test_the_api_gives_one_row_per_run_evaluation_and_metric(trained):
    from mixerzoo.api import curves

    results, record, history = trained
    table = curves(record.run_id, results=results)
    assert list(table.columns) == ["run_id", "step", "epoch", "wall_s", "split", "metric", "value"]
    acc = table[(table.metric == "accuracy_per_query") & (table.split == "test")]
    assert list(acc.step) == [h["step"] for h in history] == [2, 4, 6]
    assert list(acc.value) == pytest.approx([h["accuracy_per_query"] for h in history])
    by_hash = curves([record.config_hash[:12]], results=results)  # a dry run's ID
    assert by_hash.equals(table)


def test_the_curves_command_prints_json_text_and_a_figure(trained, run_cli, tmp_path):
    results, record, history = trained
    code, out, err = run_cli(["curves", record.run_id, "--results", results, "--json"])
    assert code == 0, err
    assert json.loads(out)[record.run_id] == curve_rows(history)
    code, out, err = run_cli(
        ["curves", record.run_id, "--results", results, "--metric", "accuracy_per_query"]
    )
    assert code == 0, err
    assert out.splitlines()[0].startswith(f"{record.run_id} test  accuracy_per_query: 2:")
    figure = tmp_path / "curves.png"
    code, out, err = run_cli(["curves", record.run_id, "--results", results, "--out", figure])
    assert code == 0, err
    assert figure.read_bytes()[:4] == b"\x89PNG" and f"wrote {figure}" in out


def test_an_unknown_run_is_one_line(trained, run_cli):
    results, _, _ = trained
    code, _, err = run_cli(["curves", "no-such-run", "--results", results])
    assert code == 2 and "no-such-run" in err and len(err.strip().splitlines()) == 1


def test_results_json_and_the_results_table_carry_each_runs_curve(trained, run_cli):
    import mixerzoo

    results, record, history = trained
    code, out, err = run_cli(["results", "--results", results, "--json", "--curves"])
    assert code == 0, err
    (run,) = json.loads(out)
    steps = sorted({r["step"] for r in run["curve"] if r["metric"] == "accuracy_per_query"})
    assert steps == [h["step"] for h in history]
    code, out, _ = run_cli(["results", "--results", results, "--json"])
    assert "curve" not in json.loads(out)[0]  # only when asked
    table = mixerzoo.results(results, curves=True)
    assert table.loc[0, "curve"] == run["curve"]
