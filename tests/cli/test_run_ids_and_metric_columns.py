"""The IDs a dry run lists name runs wherever a run ID does (``store/lookup.py: find_run``), a
metric is a ``results`` column and sort key, and ``mixers`` describes a class by import path."""

from __future__ import annotations

import json

import pytest
import yaml

CONFIG = {
    "data": {"task": {"name": "mqar_cat", "vocab_size": 30, "seq_len": 8}, "n_train": 32, "n_test": 16},
    "model": {"d_model": 8, "n_layers": 1, "mixer": "attention"},
    "train": {"epochs": 1, "batch_size": 16, "max_steps": 2, "device": "cpu"},
}
USER_MIXER = '''
import torch
from torch import nn
from mixerzoo.mixers import SequenceMixer


class RunningMean(SequenceMixer):
    """y_t = W mean(x_1 .. x_t) (a test's mixer)."""

    class Params(SequenceMixer.Params):
        scale: float = 1.0

    def __init__(self, d_model, max_len=2048, **params):
        super().__init__(d_model, max_len, **params)
        self.proj = nn.Linear(d_model, d_model)

    def forward(self, x, input_ids=None, rope=None):
        steps = torch.arange(1, x.shape[1] + 1, dtype=x.dtype, device=x.device).view(1, -1, 1)
        return self.proj(x.cumsum(1) / steps)


class NotAMixer:
    pass
'''


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """Two finished runs (attention at d_model 8, cat at 16); ``(results folder, their records)``."""
    from mixerzoo.cli.main import main

    root = tmp_path_factory.mktemp("results")
    (root / "run.yaml").write_text(yaml.safe_dump(CONFIG))
    res = str(root / "res")
    for sets in ([], ["--set", "model.mixer=cat", "--set", "model.d_model=16"]):
        try:
            main(["train", str(root / "run.yaml"), "--results", res, "--quiet", *sets])
        except SystemExit as stop:
            assert stop.code == 0
    return res


def runs(run_cli, store, *args):
    code, out, err = run_cli(["results", "--results", store, "--json", *args])
    assert code == 0, err
    return json.loads(out)


def test_a_metric_is_a_column_and_a_sort_key(store, run_cli):
    records = runs(run_cli, store)
    code, out, err = run_cli(
        [
            "results",
            "--results",
            store,
            "--columns",
            "mixer,accuracy_per_query",
            "--sort",
            "-accuracy_per_query",
        ]
    )
    assert code == 0, err
    lines = [line.split() for line in out.splitlines()]
    assert lines[0] == ["mixer", "accuracy_per_query"]
    ordered = sorted(records, key=lambda r: -r["metrics"]["accuracy_per_query"])
    assert [float(row[1]) for row in lines[1:]] == [
        pytest.approx(r["metrics"]["accuracy_per_query"], abs=1e-4) for r in ordered
    ]


def test_a_name_that_is_no_column_and_no_metric_is_one_line(store, run_cli):
    for args in (["--columns", "accuracy_per_qery"], ["--sort", "nope_metric"]):
        code, _, err = run_cli(["results", "--results", store, *args])
        assert code == 2 and "unknown column" in err and len(err.strip().splitlines()) == 1
    code, _, err = run_cli(["results", "--results", store, "--columns", "accuracy_per_qery"])
    assert "did you mean 'accuracy_per_query'" in err


def test_a_config_hash_prefix_names_the_run_in_eval_load_and_filter(store, run_cli):
    import mixerzoo

    (run,) = runs(run_cli, store, "--filter", "mixer=cat")
    prefix = run["config_hash"][:12]  # what `study run --dry-run` prints
    (found,) = runs(run_cli, store, "--filter", f"run_id={prefix}")
    assert found["run_id"] == run["run_id"]
    code, out, err = run_cli(["eval", prefix, "--results", store, "--json", "-"])
    assert code == 0, err
    assert json.loads(out)["accuracy_per_query"] == pytest.approx(run["metrics"]["accuracy_per_query"])
    _, config = mixerzoo.load(prefix, results=store)
    assert config.model.d_model == 16


def test_a_planned_run_not_trained_yet_is_one_line(store, run_cli):
    code, _, err = run_cli(["eval", "0123456789ab", "--results", store])
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "run '0123456789ab' is planned but not trained yet" in err


def test_mixers_describes_a_class_by_import_path(tmp_path, monkeypatch, run_cli):
    (tmp_path / "run_ids_user_mixer.py").write_text(USER_MIXER)
    monkeypatch.syspath_prepend(str(tmp_path))
    code, out, err = run_cli(["mixers", "run_ids_user_mixer:RunningMean", "--json"])
    assert code == 0, err
    info = json.loads(out)
    assert info["kind"] == "sequence mixer" and info["params_d64"] == 64 * 64 + 64
    assert "scale" in [p["name"] for p in info["parameters"]]
    code, out, err = run_cli(["mixers", "run_ids_user_mixer:RunningMean"])
    assert code == 0 and "scale" in out
    for bad, needle in (
        ("run_ids_user_mixer:NotAMixer", "neither a sequence mixer nor a state mixer"),
        ("run_ids_no_such_module:Mixer", "run_ids_no_such_module"),
    ):
        code, _, err = run_cli(["mixers", bad])
        assert code == 2 and needle in err and len(err.strip().splitlines()) == 1
