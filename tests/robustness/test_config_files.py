"""Probes of run config files through ``mixerzoo train``: every mistake is one clear line (exit 2).

Before the fixes: ``device: cuda`` on a CPU machine, ``betas`` outside [0, 1) and a model
vocabulary smaller than the task's ended in tracebacks; ``lr: .inf`` trained into a NaN;
``grad_clip: .inf`` trained silently; duplicate keys were silently resolved to the last one;
YAML errors lost their line and column; a 10-line alias bomb took 1.6 GB and printed 322 MB.
"""

from __future__ import annotations

import copy
import tracemalloc

import pytest
import torch
import yaml

from mixerzoo.config import MAX_YAML_NODES, load_config_file
from mixerzoo.registry import ConfigError

RUN = {
    "name": "probe",
    "data": {"task": {"name": "mqar_cat", "vocab_size": 30, "seq_len": 8}, "n_train": 64, "n_test": 32},
    "model": {"d_model": 16, "n_layers": 1, "mixer": "cat"},
    "train": {"epochs": 1, "batch_size": 32},
}


def with_value(path: str, value):
    cfg = copy.deepcopy(RUN)
    node = cfg
    *parents, last = path.split(".")
    for key in parents:
        node = node.setdefault(key, {})
    node[last] = value
    return cfg


@pytest.mark.parametrize(
    "path,value,needles",
    [
        ("train.betas", [1.5, 0.9], ["train.betas", "[0, 1)"]),
        ("train.betas", [0.9, 1.0], ["[0, 1)"]),
        ("train.betas", [-0.1, 0.9], ["[0, 1)"]),
        ("train.betas", [0.9], ["train.betas"]),
        ("model.vocab_size", 10, ["model.vocab_size = 10", "(30)"]),
        ("model.max_len", 4, ["model.max_len = 4", "(8"]),
        ("train.lr", float("inf"), ["train.lr = inf", "finite"]),
        ("train.lr", float("nan"), ["train.lr = nan", "finite"]),
        ("train.grad_clip", float("inf"), ["train.grad_clip", "finite"]),
        ("train.weight_decay", float("inf"), ["train.weight_decay", "finite"]),
        ("model.rope_scale", float("inf"), ["model.rope_scale", "finite"]),
        ("model.mixer", {"name": "mamba", "dt_max": float("inf")}, ["dt_max", "finite"]),
        ("data.task", {"name": "mqar", "power_a": float("inf")}, ["power_a", "finite"]),
        ("train.seed", -1, ["train.seed = -1"]),
        ("model.n_layers", True, ["model.n_layers = True", "a boolean is not a number"]),
        ("train.lr", False, ["a boolean is not a number"]),
        ("data.task.seq_len", True, ["seq_len = True", "a boolean is not a number"]),
        ("model.mixer", {"name": "cat", "conv_width": True}, ["a boolean is not a number"]),
        ("data.seed", -1, ["data.seed = -1"]),
        ("train.epoch", 3, ["unknown field 'train.epoch'", "did you mean 'epochs'"]),
        ("model.d_modle", 3, ["did you mean 'd_model'"]),
        ("data.n_trian", 3, ["did you mean 'n_train'"]),
        ("data.task.seq_lenn", 8, ["seq_lenn", "did you mean 'seq_len'"]),
        ("model.mixer", "cta", ["unknown sequence mixer 'cta'", "did you mean 'cat'"]),
        ("model.mixer", {"name": "cat", "conv_widht": 3}, ["did you mean 'conv_width'"]),
        ("data.task.name", "mqar_ct", ["unknown task 'mqar_ct'", "did you mean 'mqar_cat'"]),
        ("model.mixer", ["cat", "nope"], ["mixer lists 2 entries"]),
        ("train.device", "tpu", ["train.device = 'tpu'"]),
        ("name", "x" * 100_000, ["name = 'xxx", "at most 1000"]),
        ("train.epochs", "x" * 100_000, ["train.epochs = 'xxx", "..."]),
        ("data.task", {"name": ["mqar"]}, ["data.task"]),
        ("data.test_seq_lens", [8, 10**9], ["test_seq_lens"]),
    ],
)
def test_bad_config_value_is_one_clear_line(run_cli, tmp_path, path, value, needles):
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(with_value(path, value)))
    run_cli("train", tmp_path / "run.yaml", "--results", tmp_path / "r").clear_error(*needles)


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_unavailable_device_is_one_clear_line(run_cli, tmp_path):
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(with_value("train.device", "cuda")))
    run_cli("train", tmp_path / "run.yaml", "--results", tmp_path / "r").clear_error("cuda")


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_resolve_device_refuses_cuda_without_cuda():
    from mixerzoo.training.train import resolve_device

    with pytest.raises(ConfigError, match="not available"):
        resolve_device("cuda")
    assert resolve_device("cpu").type == "cpu"


@pytest.mark.parametrize(
    "text,needles",
    [
        ("data:\n  task: [mqar\nmodel: {}\n", ["line 3, column 6", "flow sequence"]),
        ("data: {task: mqar\n", ["line 2, column 1"]),
        ("name: a\n\tdata: 1\n", ["line 2, column 1"]),
        ("name: a\nname: b\ndata: {task: mqar}\n", ["key 'name' appears twice", "line 1 and line 2"]),
        (
            "data:\n  task: mqar\n  n_train: 5\n  n_train: 6\n",
            ["'n_train' appears twice", "line 3 and line 4"],
        ),
        ("- 1\n- 2\n", ["mapping at the top level"]),
        ("", ["mapping at the top level"]),
        ("a: &a [*a]\n", ["refers to itself"]),
        ("a: " + "[" * 5000 + "]" * 5000 + "\n", ["nested too deeply"]),
    ],
)
def test_bad_yaml_keeps_line_and_column(run_cli, tmp_path, text, needles):
    (tmp_path / "run.yaml").write_text(text)
    run_cli("train", tmp_path / "run.yaml", "--results", tmp_path / "r").clear_error(*needles)


def test_binary_and_oversized_files(run_cli, tmp_path):
    (tmp_path / "bin.yaml").write_bytes(b"\xff\xfe\x00garbage\x80")
    run_cli("train", tmp_path / "bin.yaml").clear_error("not UTF-8")
    (tmp_path / "big.yaml").write_text("# " + "x" * (5 * 2**20))
    run_cli("train", tmp_path / "big.yaml").clear_error("MB")
    run_cli("train", tmp_path).clear_error()  # a directory


def alias_bomb(levels: int = 7, width: int = 10) -> str:
    """``levels`` lines whose aliases expand to width**levels strings (10^7 here) in 10 lines."""
    lines = ["a0: &a0 [" + ", ".join(['"xxxxxxxxxx"'] * width) + "]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * width) + "]" for i in range(1, levels)]
    lines += [f"name: *a{levels - 1}", "data: {task: mqar}", "model: {}"]
    return "\n".join(lines) + "\n"


def test_alias_bomb_is_refused_cheaply(run_cli, tmp_path):
    path = tmp_path / "bomb.yaml"
    path.write_text(alias_bomb())
    assert len(path.read_text().splitlines()) == 10
    tracemalloc.start()
    try:
        with pytest.raises(ConfigError, match="alias bomb") as err:
            load_config_file(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 20 * 2**20, f"{peak / 2**20:.0f} MB to refuse a 10-line file"
    assert len(str(err.value)) < 300
    run_cli("train", path).clear_error("alias bomb")


def test_aliases_that_stay_small_still_work(tmp_path):
    path = tmp_path / "ok.yaml"
    path.write_text("base: &b {seq_len: 8, vocab_size: 30}\ntask: {<<: *b, name: mqar}\nother: *b\n")
    data = load_config_file(path)
    assert data["task"] == {"seq_len": 8, "vocab_size": 30, "name": "mqar"} and data["other"]["seq_len"] == 8
    width = int(MAX_YAML_NODES ** (1 / 2)) // 2  # just under the limit: width^2 values
    path.write_text(f"a: &a [{', '.join(['1'] * width)}]\nb: [{', '.join(['*a'] * width)}]\n")
    assert len(load_config_file(path)["b"]) == width


def test_echoed_values_are_capped(run_cli, tmp_path):
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(with_value("train.lr", "y" * 10**6)))
    msg = run_cli("train", tmp_path / "run.yaml").clear_error("train.lr")
    assert len(msg) < 400
    many = {f"unknown_{i}": i for i in range(5000)}
    (tmp_path / "many.yaml").write_text(yaml.safe_dump({**RUN, **many}))
    msg = run_cli("train", tmp_path / "many.yaml").clear_error("unknown field", "more problems")
    assert len(msg) < 1000
