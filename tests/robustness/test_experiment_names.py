"""Probes of names that become paths, and of experiment sizes.

Before the fixes an experiment ``name: "../../x"`` (or an absolute path) made ``mixerzoo report``
/ ``plot`` write ``.html`` / ``.png`` / ``.svg`` files outside the results directory, and a grid
of 10^6 points was expanded (validated point by point) for hours before anything was said.
"""

from __future__ import annotations

import pytest
import yaml

from mixerzoo.params import check_path_component
from mixerzoo.registry import ConfigError
from mixerzoo.studies.sweep.config import MAX_GRID_POINTS, load_experiment, shipped_experiments

EXPERIMENT = {
    "kind": "sweep",
    "name": "probe",
    "base": {
        "data": {"task": {"name": "mqar_cat", "vocab_size": 30, "seq_len": 8}, "n_train": 64, "n_test": 32},
        "model": {"d_model": 16, "n_layers": 1, "mixer": "cat"},
        "train": {"epochs": 1, "batch_size": 32},
    },
    "grid": {"train.lr": [1e-3, 1e-2]},
    "presets": {"quick": {}, "paper": {}},
}

BAD_NAMES = ["../../x", "/tmp/evil", "a/b", "..", ".", ".hidden", "", "a b", "x" * 101, "a\\b", "a\nb", "é"]


@pytest.mark.parametrize("name", BAD_NAMES)
@pytest.mark.parametrize("command", ["report", "plot", "run"])
def test_unsafe_experiment_name_is_refused_before_any_write(run_cli, tmp_path, name, command):
    work = tmp_path / "work"
    work.mkdir()
    exp = work / "exp.yaml"
    exp.write_text(yaml.safe_dump({**EXPERIMENT, "name": name}))
    extra = ["--dry-run"] if command == "run" else []
    run_cli("study", command, exp, "--results", work / "results", *extra).clear_error(
        "name = ", "file-name component"
    )
    files = [p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file()]
    assert not [f for f in files if f.endswith((".html", ".png", ".svg"))]
    # nothing outside the results directory (whether a read-only command may create the store
    # itself is the store's concern, tests/robustness/test_store_*.py)
    assert [f for f in files if not f.startswith("work/results/")] == ["work/exp.yaml"]


@pytest.mark.parametrize("name", BAD_NAMES + [None, 3, ["a"]])
def test_check_path_component_refuses(name):
    with pytest.raises(ConfigError, match="file-name component"):
        check_path_component(name, "name")


@pytest.mark.parametrize("name", ["cat-mqar", "a", "A_b.c-1", "x" * 100, *shipped_experiments()])
def test_safe_names_pass(name):
    assert check_path_component(name, "name") == name


def test_every_shipped_experiment_name_is_safe():
    for name, path in shipped_experiments().items():
        assert load_experiment(path).name == name


def test_a_million_point_grid_is_refused_without_expanding():
    grid = {
        "train.lr": [10.0**-i for i in range(1, 1001)],
        "train.weight_decay": [i / 1000 for i in range(1000)],
    }
    exp = load_experiment({**EXPERIMENT, "grid": grid})
    with pytest.raises(
        ConfigError, match=r"1,000,000 points \(1000 train.lr x 1000 train.weight_decay x 1 seed\)"
    ):
        exp.expand()


def test_a_grid_at_the_limit_expands(monkeypatch):
    import mixerzoo.studies.sweep.config as ec

    monkeypatch.setattr(ec, "MAX_GRID_POINTS", 2)
    assert len(load_experiment(EXPERIMENT).expand()) == 2
    monkeypatch.setattr(ec, "MAX_GRID_POINTS", 1)
    with pytest.raises(ConfigError, match="at most 1 are expanded"):
        load_experiment(EXPERIMENT).expand()
    assert MAX_GRID_POINTS >= 1000  # the shipped paper presets stay expandable


def test_big_grid_through_the_cli(run_cli, tmp_path):
    exp = tmp_path / "exp.yaml"
    grid = {
        "train.lr": [10.0**-i for i in range(1, 1001)],
        "train.weight_decay": [i / 1000 for i in range(1000)],
    }
    exp.write_text(yaml.safe_dump({**EXPERIMENT, "grid": grid}))
    run_cli("study", "run", exp, "--results", tmp_path / "r", "--dry-run").clear_error("1,000,000 points")


@pytest.mark.parametrize(
    "args,needle",
    [
        (["study", "run", "cat-mqr", "--dry-run"], "did you mean 'cat-mqar'"),
        (["study", "plot", "cat-mqr"], "did you mean 'cat-mqar'"),
        (["study", "report", "zoology-mqar"], "did you mean 'zoology-mqar-dmodel'"),
        (["study", "run", "missing.yaml"], "does not exist"),
        (["study", "run", "cat-mqar", "--preset", "fast"], "--preset"),
        (["study", "run", "cat-mqar", "--workers", "0"], "--workers"),
    ],
)
def test_experiment_command_mistakes(run_cli, tmp_path, monkeypatch, args, needle):
    monkeypatch.chdir(tmp_path)
    run_cli(*args).clear_error(needle)
