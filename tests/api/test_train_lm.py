"""A language-model run from the Python API (``mixerzoo.api.train_lm``): the lifecycle of ``lm train``."""

from __future__ import annotations

import json

import pytest
import yaml

from mixerzoo.api import train_lm
from mixerzoo.registry import ConfigError
from mixerzoo.store.results import ResultsStore
from mixerzoo.training.lm_config import load_lm_config

CONFIG = {
    "corpus": {"name": "char"},
    "model": {"d_model": 8, "n_layers": 1, "mixer": "attention"},
    "train": {
        "steps": 3,
        "batch_size": 2,
        "block_size": 8,
        "warmup": 1,
        "eval_every": 3,
        "eval_iters": 1,
        "device": "cpu",
        "threads": 1,
    },
}


@pytest.fixture
def data_dir(tiny_text_dir):
    return tiny_text_dir


def test_train_lm_records_the_run_in_the_results_store(tmp_path, data_dir, capsys):
    results, out = tmp_path / "r", tmp_path / "run"
    record = train_lm(CONFIG, data_dir=data_dir, out=out, results=results)
    assert capsys.readouterr().out == ""  # quiet by default
    assert record.kind == "lm" and record.status == "finished" and record.name == "run"
    assert record.metrics["steps"] == 3 and record.made_attempt == 1
    assert record.output and (out / "result.json").is_file()

    (stored,) = ResultsStore(results, read_only=True).runs(kind="lm")
    assert stored.run_id == record.run_id and len(stored.attempts) == 1
    assert stored.attempts[0].outcome == "finished" and stored.metrics == record.metrics
    cfg, _ = load_lm_config(CONFIG, data_dir=str(data_dir))
    assert stored.config_hash == cfg.config_hash()  # the identity `lm train` records

    path = tmp_path / "lm.yaml"  # a YAML path, and a --set string that leaves the identity as it is
    path.write_text(yaml.safe_dump(CONFIG))
    again = train_lm(path, ["train.log_every=2"], data_dir=data_dir, out=out, results=results, quiet=False)
    printed = capsys.readouterr().out  # the corpus line and the resume, when not quiet
    assert "char: vocab" in printed and "resumed from" in printed
    assert again.run_id == record.run_id and again.made_attempt == 2 and len(again.attempts) == 2
    assert json.loads((out / "result.json").read_text())["resumed_from"] == 3  # resumed in its folder


def test_train_lm_mistakes_are_one_line_and_record_nothing(tmp_path, data_dir):
    with pytest.raises(ConfigError, match="expected a dict, a YAML/JSON path or an LMRunConfig"):
        train_lm(42, results=tmp_path / "r")
    bad = {**CONFIG, "model": {**CONFIG["model"], "mixer": "atention"}}
    with pytest.raises(ConfigError, match="unknown sequence mixer 'atention'"):
        train_lm(bad, data_dir=data_dir, results=tmp_path / "r")
    with pytest.raises(ConfigError, match="train.device = 'cuda:7'"):
        train_lm(CONFIG, {"train.device": "cuda:7"}, data_dir=data_dir, results=tmp_path / "r")
    assert not (tmp_path / "r").exists()  # nothing recorded, no store created
