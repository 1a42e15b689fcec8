"""Local sweep workers on a machine with several GPUs: one GPU each, round robin, and K runs per GPU
(the device count is mocked: these run without a GPU)."""

from __future__ import annotations

import queue

import pytest
import yaml

from mixerzoo.registry import ConfigError
from mixerzoo.studies.sweep import runner, workers
from mixerzoo.studies.sweep.executors import local
from mixerzoo.studies.sweep.plan import SweepSummary

STUDY = {
    "kind": "sweep",
    "name": "tiny-gpus",
    "paper": "test Fig. 0",
    "base": {
        "data": {"task": {"name": "mqar_cat", "vocab_size": 30, "seq_len": 8}, "n_train": 48, "n_test": 16},
        "model": {"d_model": 8, "n_layers": 1, "mixer": "attention"},
        "train": {"epochs": 1, "batch_size": 16},
    },
    "variants": {"attention-1L": {}},
    "grid": {"train.lr": [1e-2, 3e-3]},
    "aggregate": {"metric": "accuracy_per_query", "reduce": "max", "over": ["train.lr"]},
    "presets": {"quick": {}, "paper": {}},
}


def test_workers_take_the_gpus_round_robin():
    assert local.gpu_slots(4, 2) == [0, 1, 0, 1]
    assert local.gpu_slots(3, 4) == [0, 1, 2]
    assert local.gpu_slots(6, 3) == [0, 1, 2, 0, 1, 2]  # --runs-per-gpu 2 on 3 GPUs: two runs each
    assert local.gpu_slots(4, 0) is None  # no GPU: workers are not pinned


def test_runs_per_gpu_sets_the_worker_count():
    assert local.local_workers(3, None, 8) == 3
    assert local.local_workers(1, 2, 4) == 8
    with pytest.raises(ConfigError, match="no CUDA device is visible"):
        local.local_workers(1, 2, 0)
    with pytest.raises(ConfigError, match="give one of them"):
        local.local_workers(4, 2, 2)


def test_each_worker_pins_the_device_it_takes(monkeypatch):
    import torch

    pinned = []
    monkeypatch.setattr(torch.cuda, "set_device", pinned.append)
    monkeypatch.setattr(local, "cuda_device_count", lambda: 2)
    slots = local._device_queue(queue, 3)  # the module stands in for a multiprocessing context
    assert [workers.pin_gpu(slots) for _ in range(3)] == [0, 1, 0] == pinned
    assert workers.pin_gpu(None) is None and pinned == [0, 1, 0]
    monkeypatch.setattr(local, "cuda_device_count", lambda: 0)
    assert local._device_queue(queue, 3) is None


@pytest.mark.parametrize(
    ("gpus", "options", "workers"), [(3, ["--runs-per-gpu", "2"], 6), (0, ["--workers", "2"], 2)]
)
def test_the_cli_passes_the_worker_count_to_the_sweep(run_cli, tmp_path, monkeypatch, gpus, options, workers):
    seen = {}

    def fake_sweep(exp, store, **kwargs):
        seen.update(kwargs)
        return SweepSummary(experiment=exp.name, total=0, skipped=0)

    monkeypatch.setattr(local, "cuda_device_count", lambda: gpus)
    monkeypatch.setattr(runner, "run_sweep", fake_sweep)
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(STUDY))
    code, _, err = run_cli(["study", "run", path, "--results", tmp_path / "r", "--quiet", *options])
    assert code == 0, err
    assert seen["workers"] == workers


def test_runs_per_gpu_without_a_gpu_is_one_line(run_cli, tmp_path, monkeypatch):
    monkeypatch.setattr(local, "cuda_device_count", lambda: 0)
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(STUDY))
    code, _, err = run_cli(["study", "run", path, "--results", tmp_path / "r", "--runs-per-gpu", "2"])
    assert code == 2 and "--runs-per-gpu: no CUDA device is visible here" in err
    assert not (tmp_path / "r").exists()


def test_the_shipped_presets_train_where_the_machine_trains_best():
    """``auto``: CUDA when present, else the CPU (no preset pins the CPU on a GPU machine)."""
    from mixerzoo.studies.sweep.config import load_experiment, shipped_experiments

    for name in shipped_experiments():
        if name == "mad":
            continue
        for preset in ("quick", "paper"):
            try:
                runs = load_experiment(name, preset).expand()
            except ConfigError:  # a study without this preset
                continue
            assert all(r.config.train.device == "auto" for r in runs), (name, preset)
