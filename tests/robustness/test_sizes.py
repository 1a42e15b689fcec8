"""Probes of sizes that cannot fit: refused up front with an estimate, never an allocation crash.

Before the fixes ``data.task.seq_len: 1e9`` or ``n_train: 1e12`` failed inside numpy after
seconds of work (a traceback), and ``model.max_len: 2e9`` with learned positions tried to
allocate a 128 GB embedding.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import yaml

from mixerzoo.config import load_run_config
from mixerzoo.registry import ConfigError
from mixerzoo.tasks import TASKS, build_task
from mixerzoo.training.memory_bound import memory_lower_bound

RUN = {
    "name": "probe",
    "data": {
        "task": {"name": "mqar", "vocab_size": 30, "seq_len": 8, "num_kv_pairs": 2},
        "n_train": 64,
        "n_test": 32,
    },
    "model": {"d_model": 16, "n_layers": 1, "mixer": "attention"},
    "train": {"epochs": 1, "batch_size": 32},
}


def run_with(**sections):
    cfg = {k: dict(v) if isinstance(v, dict) else v for k, v in RUN.items()}
    for section, values in sections.items():
        cfg[section] = {**cfg[section], **values}
    return cfg


@pytest.mark.parametrize(
    "sections,needles",
    [
        ({"data": {"n_train": 10**12}, "train": {"max_steps": 9}}, ["at least 128.0 TB", "data 128.0 TB"]),
        ({"data": {"n_test": 10**12}}, ["data 128.0 TB"]),
        ({"model": {"max_len": 2 * 10**9}}, ["this run needs at least", "weights"]),
        ({"model": {"d_model": 10**6, "n_layers": 64}}, ["this run needs at least", "weights"]),
        ({"train": {"batch_size": 10**9}, "data": {"n_train": 10**9 // 16}}, ["this run needs at least"]),
    ],
)
def test_runs_that_cannot_fit_are_refused_before_allocating(run_cli, tmp_path, sections, needles):
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(run_with(**sections)))
    run_cli("train", tmp_path / "run.yaml", "--results", tmp_path / "r", "--quiet").clear_error(*needles)


def test_memory_lower_bound_counts_parameters_without_allocating():
    cfg = load_run_config(run_with(model={"max_len": 10**9}))
    task = cfg.data.build_task()
    bound = memory_lower_bound(cfg, task)  # a 10^9 x 16 position table, on the meta device
    assert bound["weights"] >= 16 * 10**9 * 16
    assert bound["data"] == (64 + 32) * 16 * 8
    assert bound["activations"] == 4 * 32 * 8 * 16 * 2


def test_memory_lower_bound_is_below_what_a_real_run_holds():
    from mixerzoo.model import build_model, count_parameters

    cfg = load_run_config(RUN)
    task = cfg.data.build_task()
    bound = memory_lower_bound(cfg, task)
    d = task.make(64, 0)
    assert bound["data"] <= (d.inputs.nbytes + d.labels.nbytes) * (64 + 32) / 64
    assert bound["weights"] == 16 * count_parameters(build_model(cfg.model))


@pytest.mark.parametrize("name", TASKS.names())
def test_bytes_per_example_is_a_lower_bound_for_every_task(name, task_params):
    task = build_task(name, **task_params(name))
    d = task.make(2, 0)
    held = sum(a.nbytes for a in d.arrays().values()) / 2
    assert task.bytes_per_example() <= held


def test_task_make_refuses_before_allocating():
    task = build_task("mqar", seq_len=64)
    with pytest.raises(ConfigError, match="need at least 1,024.0 TB"):
        task.make(10**12, 0)
    with pytest.raises(ConfigError, match="seed = -1"):
        task.make(4, -1)


def test_a_run_that_fits_still_trains(tmp_path):
    from mixerzoo.training import train

    r = train(load_run_config(RUN), progress=False)
    assert r.steps == 2 and np.isfinite(r.metrics["loss"])
    assert torch.is_tensor(next(r.model.parameters()))
