"""The Python API of the package root: train, load, results, run, build_task (mixerzoo/api.py)."""

from __future__ import annotations

import subprocess
import sys

import pytest
import yaml

import mixerzoo
from mixerzoo.registry import ConfigError

CONFIG = {
    "data": {"task": {"name": "mqar_cat", "vocab_size": 30, "seq_len": 8}, "n_train": 48, "n_test": 16},
    "model": {"d_model": 16, "n_layers": 1, "mixer": "cat"},
    "train": {"epochs": 1, "batch_size": 16, "device": "cpu"},
}


def test_the_root_exposes_the_api_lazily():
    from mixerzoo import api

    assert (mixerzoo.train, mixerzoo.run, mixerzoo.load, mixerzoo.results) == (
        api.train,
        api.run,
        api.load,
        api.results,
    )
    code = "import sys, mixerzoo; print(sorted(m for m in ('torch', 'mixerzoo.api') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"  # importing the package loads neither torch nor the API


def test_train_load_and_results_from_a_dict_a_path_and_a_config(tmp_path):
    pytest.importorskip("pandas")
    from mixerzoo.config import RunConfig

    results = tmp_path / "r"
    rec = mixerzoo.train(CONFIG, results=results, progress=False)
    assert rec.status == "finished" and rec.checkpoint
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(CONFIG))
    again = mixerzoo.train(path, results=results, sets=["train.lr=0.01"], progress=False)
    cfg = RunConfig.model_validate(CONFIG)
    third = mixerzoo.train(cfg, results=results, sets={"train.lr": 0.003}, progress=False)
    assert len({rec.run_id, again.run_id, third.run_id}) == 3
    assert again.config["train"]["lr"] == 0.01 and third.config["train"]["lr"] == 0.003

    model, loaded = mixerzoo.load(rec.run_id, results=results)
    assert loaded.config_hash() == rec.config_hash and not model.training
    model2, loaded2 = mixerzoo.load(rec.checkpoint)
    assert loaded2.config_hash() == rec.config_hash

    table = mixerzoo.results(results)
    assert list(table["run_id"]) == [rec.run_id, again.run_id, third.run_id]
    row = table.iloc[0]
    assert (row["task"], row["mixer"], row["d_model"], row["status"]) == ("mqar_cat", "cat", 16, "finished")
    assert row["params"] == rec.params and 0 <= row["accuracy_per_query"] <= 1


def test_mistakes_are_one_line_config_errors(tmp_path):
    with pytest.raises(ConfigError, match="expected a dict, a YAML/JSON path or a RunConfig"):
        mixerzoo.train(42, results=tmp_path / "r")
    bad = {**CONFIG, "model": {**CONFIG["model"], "mixer": "catt"}}
    with pytest.raises(ConfigError, match=r"unknown sequence mixer 'catt' \(did you mean 'cat'\?\)"):
        mixerzoo.train(bad, results=tmp_path / "r")
    assert not (tmp_path / "r").exists()  # nothing recorded, no store created
    with pytest.raises(ConfigError, match="run\\(\\): unknown option 'worker'"):
        mixerzoo.run("cat-mqar", worker=2, results=tmp_path / "r")
    with pytest.raises(ConfigError, match="unknown experiment 'cat-mqr' \\(did you mean 'cat-mqar'\\?\\)"):
        mixerzoo.run("cat-mqr", results=tmp_path / "r")
    with pytest.raises(ConfigError, match="checkpoint 'nope' does not exist"):
        mixerzoo.load("nope", results=tmp_path / "r")


def test_results_without_pandas_is_one_clear_line(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "pandas", None)  # import pandas now raises ImportError
    with pytest.raises(ImportError, match=r"^mixerzoo.results\(\) returns a pandas DataFrame: pip install"):
        mixerzoo.results(tmp_path)


def test_build_task_takes_the_config_form_and_the_old_signature():
    spec = {"name": "mqar", "seq_len": 32, "vocab_size": 64}
    by_dict = mixerzoo.build_task(spec)
    by_name = mixerzoo.build_task("mqar", seq_len=32, vocab_size=64)
    assert type(by_dict) is type(by_name) and by_dict.p == by_name.p
    assert spec == {"name": "mqar", "seq_len": 32, "vocab_size": 64}  # not consumed
    with pytest.raises(ConfigError, match="a task mapping needs a 'name'"):
        mixerzoo.build_task({"seq_len": 32})
    task = mixerzoo.build_task("mixerzoo.tasks.mqar:MQAR", seq_len=32, vocab_size=64)
    assert type(task) is type(by_name)  # an import path names a task too


def test_run_serves_a_computed_study_too(tmp_path):
    pytest.importorskip("pandas")
    assert mixerzoo.run("cat-prop1-landmark-ar", preset="quick", results=tmp_path / "r", quiet=True) == 0
    table = mixerzoo.results(tmp_path / "r", kind="computed")
    assert list(table["study"]) == ["cat-prop1-landmark-ar"] and list(table["status"]) == ["finished"]
    with pytest.raises(ConfigError, match="--skip-failed: cat-prop1-landmark-ar is a computed study"):
        mixerzoo.run("cat-prop1-landmark-ar", preset="quick", results=tmp_path / "r", skip_failed=True)
