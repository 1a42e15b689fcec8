import sqlite3

import torch

from mixerzoo.config import load_run_config
from mixerzoo.experiments.results_store import ResultsStore
from mixerzoo.experiments.runs import execute_run, load_checkpoint

CFG = {
    "name": "tiny",
    "data": {"task": {"name": "mqar_cat", "vocab_size": 30, "seq_len": 8}, "n_train": 64, "n_test": 32},
    "model": {"d_model": 16, "n_layers": 1, "mixer": "cat"},
    "train": {"epochs": 2, "batch_size": 32},
}


def test_store_round_trip(tmp_results):
    store = ResultsStore(tmp_results)
    rid = store.start_run({"a": 1}, "h" * 64, "n", "exp", "0.1")
    assert store.get(rid).status == "running"
    store.log_eval(rid, 10, 1, 0.5, {"accuracy_per_query": 0.25})
    store.log_eval(rid, 20, 2, 1.0, {"accuracy_per_query": 0.5})
    store.finish_run(rid, {"accuracy_per_query": 0.5}, 1.5, 123, "ckpt.pt")
    rec = ResultsStore(tmp_results).get(rid)  # a fresh handle reads what was written
    assert rec.status == "finished" and rec.config == {"a": 1} and rec.params == 123
    assert rec.metrics == {"accuracy_per_query": 0.5} and rec.experiment == "exp"
    assert [h["step"] for h in store.history(rid)] == [10, 20]
    assert store.finished("h" * 64).run_id == rid
    rid2 = store.start_run({"a": 2}, "g" * 64)
    store.fail_run(rid2, "ValueError: boom")
    assert store.get(rid2).error == "ValueError: boom"
    assert [r.run_id for r in store.runs(status="failed")] == [rid2]


def test_execute_run_records_metrics_history_and_loadable_checkpoint(tmp_results):
    store = ResultsStore(tmp_results)
    rec = execute_run(CFG, store, progress=False)
    assert rec.status == "finished" and rec.name == "tiny"
    assert 0 <= rec.metrics["accuracy_per_query"] <= 1 and rec.params > 0 and rec.wall_s > 0
    assert len(store.history(rec.run_id)) == 2
    assert set(rec.to_json()) >= {
        "run_id",
        "status",
        "config",
        "config_hash",
        "metrics",
        "checkpoint",
        "wall_s",
        "params",
        "error",
    }
    model, cfg = load_checkpoint(rec.checkpoint)
    assert cfg.config_hash() == rec.config_hash == load_run_config(CFG).config_hash()
    x = torch.from_numpy(cfg.data.build_task().make(4, 0).inputs)
    assert model(x).shape == (4, 8, 30)
    with sqlite3.connect(store.db_path) as con:
        assert con.execute("SELECT package_version FROM runs").fetchone()[0]


def test_failed_run_is_recorded_with_its_error(tmp_results, monkeypatch):
    import importlib

    train_mod = importlib.import_module("mixerzoo.training.train")  # the module, not the function

    def boom(*a, **k):
        raise RuntimeError("exploded")

    monkeypatch.setattr(train_mod, "supervised_loss", boom)
    store = ResultsStore(tmp_results)
    rec = execute_run(CFG, store, progress=False, raise_errors=False)
    assert rec.status == "failed" and "exploded" in rec.error


def test_nan_loss_fails_the_run(tmp_results, monkeypatch):
    import importlib

    train_mod = importlib.import_module("mixerzoo.training.train")
    real = train_mod.supervised_loss
    monkeypatch.setattr(train_mod, "supervised_loss", lambda m, x, y: real(m, x, y) * float("nan"))
    rec = execute_run(CFG, ResultsStore(tmp_results), progress=False, raise_errors=False)
    assert rec.status == "failed" and "TrainingDiverged" in rec.error


def test_length_generalization_metrics_are_recorded(tmp_results):
    cfg = {**CFG, "data": {**CFG["data"], "test_seq_lens": [8, 16, 32]}}
    rec = execute_run(cfg, ResultsStore(tmp_results), progress=False)
    for length in (8, 16, 32):
        assert 0 <= rec.metrics[f"accuracy@{length}"] <= 1
    assert rec.metrics["accuracy@8"] == rec.metrics["accuracy_per_query"]  # same split as the test set
    assert rec.config["model"]["max_len"] == 32


def test_test_time_rope_scaling_changes_only_longer_lengths(tmp_results):
    import torch

    from mixerzoo.config import load_run_config
    from mixerzoo.evaluation.length_generalization import evaluate_lengths
    from mixerzoo.model import build_model

    base = {**CFG, "model": {"d_model": 16, "n_layers": 1, "mixer": "attention", "position": "rope"}}
    plain = load_run_config({**base, "data": {**CFG["data"], "test_seq_lens": [8, 32]}})
    pi = load_run_config(
        {**base, "data": {**CFG["data"], "test_seq_lens": [8, 32], "test_rope_scaling": "pi"}}
    )
    torch.manual_seed(0)
    model = build_model(plain.model)
    a, b = evaluate_lengths(model, plain), evaluate_lengths(model, pi)
    assert a["accuracy@8"] == b["accuracy@8"]
    assert model.rope.scale == 1.0  # restored after evaluation
