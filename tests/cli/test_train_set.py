"""``mixerzoo train CONFIG --set PATH=VALUE``: the one ``--set`` of every command, on task runs too."""

from __future__ import annotations

import json

import pytest
import yaml

from mixerzoo.config import load_run_config, parse_sets
from mixerzoo.config_paths import apply_sets
from mixerzoo.registry import ConfigError

RUN = {
    "name": "set-probe",
    "data": {"task": {"name": "mqar_cat", "vocab_size": 30, "seq_len": 8}, "n_train": 64, "n_test": 32},
    "model": {"d_model": 16, "n_layers": 1, "mixer": "cat"},
    "train": {"epochs": 1, "batch_size": 32, "lr": 3e-3},
}


@pytest.fixture
def config(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(RUN))
    return path


def test_train_set_changes_the_run_and_shows_in_results_json(run_cli, tmp_path, config):
    results = tmp_path / "results"
    sets = ["--set", "train.lr=1e-3", "--set", "model.d_model=32"]
    code, _, err = run_cli(["train", config, "--results", results, "--quiet", *sets])
    assert code == 0, err
    code, out, err = run_cli(["results", "--json", "--results", results])
    assert code == 0, err
    (run,) = json.loads(out)
    assert run["config"]["train"]["lr"] == 1e-3 and run["config"]["model"]["d_model"] == 32
    overridden = {**RUN, "model": {**RUN["model"], "d_model": 32}, "train": {**RUN["train"], "lr": 1e-3}}
    assert run["config_hash"] == load_run_config(overridden).config_hash()
    assert run["config_hash"] != load_run_config(RUN).config_hash()


@pytest.mark.parametrize(
    "item,needles",
    [
        ("train.lrr=1", ["unknown field 'train.lrr'", "did you mean 'lr'"]),
        ("train.lr=.nan", ["train.lr = nan", "finite"]),
        ("model.n_layers=true", ["model.n_layers = True", "a boolean is not a number"]),
        ("train.device=tpu", ["train.device = 'tpu'", "cuda:N"]),
        ("train.lr", ["--set 'train.lr': expected key=value"]),
        ("train.epochs.x=1", ["train.epochs is 1, not a mapping"]),
        ("model.mixer.conv_widht=3", ["did you mean 'conv_width'"]),
    ],
)
def test_a_bad_set_is_one_line_before_anything_is_recorded(run_cli, tmp_path, config, item, needles):
    code, _, err = run_cli(["train", config, "--results", tmp_path / "r", "--set", item])
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1, err
    assert all(n in lines[0] for n in needles), lines[0]
    assert not (tmp_path / "r").exists()


def test_set_reaches_into_a_spec_written_as_a_name():
    cfg = load_run_config(RUN, sets={"model.mixer.conv_width": 5, "data.task.seq_len": 16})
    assert cfg.model.mixer.name == "cat" and cfg.model.mixer.params == {"conv_width": 5}
    assert cfg.data.build_task().seq_len == 16


def test_parse_and_apply_are_the_one_implementation():
    sets = parse_sets(["train.lr=1e-3", "model.mixer={name: gla}", "train.grad_clip=null"])
    assert sets == {"train.lr": "1e-3", "model.mixer": {"name": "gla"}, "train.grad_clip": None}
    with pytest.raises(ConfigError, match="given twice"):
        parse_sets(["a=1", "a=2"])
    raw = {"train": {"lr": 1}, "model": {"mixer": ["cat", "attention"]}}
    out = apply_sets(raw, {"train.lr": 2, "model.mixer.1.num_heads": 4, "corpus.name": "kjv"})
    assert out == {
        "train": {"lr": 2},
        "model": {"mixer": ["cat", {"name": "attention", "num_heads": 4}]},
        "corpus": {"name": "kjv"},
    }
    assert raw == {"train": {"lr": 1}, "model": {"mixer": ["cat", "attention"]}}  # a copy is changed
    with pytest.raises(ConfigError, match="'5' is not an index of a list of 2"):
        apply_sets(raw, {"model.mixer.5.num_heads": 4})
