"""The Ray executor on a real local Ray instance (issue 5); skipped only without the extra."""

import collections
import os

import pytest

ray = pytest.importorskip("ray", reason="the ray extra is not installed: pip install 'mixerzoo[ray]'")

from mixerzoo.runs.task import load_checkpoint  # noqa: E402
from mixerzoo.store.results import ResultsStore  # noqa: E402
from mixerzoo.studies.sweep.config import load_experiment  # noqa: E402
from mixerzoo.studies.sweep.runner import run_sweep  # noqa: E402

SPEC = {
    "name": "tiny-ray",
    "claim": "paper: n/a",
    "base": {
        "data": {"task": {"name": "mqar_cat", "vocab_size": 30, "seq_len": 8}, "n_train": 48, "n_test": 16},
        "model": {"d_model": 16, "n_layers": 1, "mixer": "cat"},
        "train": {"epochs": 2, "batch_size": 16, "device": "cpu"},
    },
    "grid": {"train.lr": [1e-2, 1e30]},  # 1e30: the loss diverges, the run fails, the sweep goes on
    "presets": {"quick": {}, "paper": {}},
}


def test_ray_sweep_on_a_local_instance(tmp_path):
    exp = load_experiment(SPEC)
    store = ResultsStore(tmp_path / "r")
    summary = run_sweep(exp, store, executor="ray", num_cpus=1, progress=False, log=lambda s: None)
    assert not ray.is_initialized()  # the instance the sweep started is shut down again
    assert summary.finished == 1 and summary.failed == 1
    (good,) = store.runs(status="finished")
    (bad,) = store.runs(status="failed")
    assert good.config["train"]["lr"] == 1e-2 and bad.config["train"]["lr"] == 1e30
    assert good.experiment == "tiny-ray" and "Diverged" in bad.error
    # the record, its evaluation history and its checkpoint came back from the Ray worker
    assert store.history(good.run_id) and os.path.isfile(good.checkpoint)
    model, cfg = load_checkpoint(good.checkpoint)
    assert cfg.config_hash() == good.config_hash
    # resumable like the local executor: the finished run is skipped, the failed one retried
    again = run_sweep(exp, store, executor="ray", num_cpus=1, progress=False, log=lambda s: None)
    assert again.skipped == 1 and again.failed == 1
    assert collections.Counter(r.config_hash for r in store.runs(status="finished")) == {good.config_hash: 1}
