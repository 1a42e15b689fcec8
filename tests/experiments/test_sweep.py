"""Sweeps: resumable after SIGKILL, failures recorded, N local workers (issue 5)."""

import collections
import os
import signal
import subprocess
import sys
import time

import pytest
import yaml

from mixerzoo.experiments.experiment_config import load_experiment
from mixerzoo.experiments.results_store import ResultsStore
from mixerzoo.experiments.sweep import INTERRUPTED, run_sweep, sweep_lock
from mixerzoo.registry import ConfigError


def tiny_experiment(lrs=(1e-2, 3e-3), seq_lens=(8, 12), n_train=64, epochs=2):
    return {
        "name": "tiny-sweep",
        "claim": "paper: n/a",
        "base": {
            "data": {
                "task": {"name": "mqar_cat", "vocab_size": 30, "seq_len": 8},
                "n_train": n_train,
                "n_test": 16,
            },
            "model": {"d_model": 16, "n_layers": 1, "mixer": "cat"},
            "train": {"epochs": epochs, "batch_size": 16, "device": "cpu"},
        },
        "grid": {"data.task.seq_len": list(seq_lens), "train.lr": list(lrs)},
        "presets": {"quick": {}, "paper": {}},
    }


def finished_per_hash(store):
    return collections.Counter(r.config_hash for r in store.runs(status="finished"))


def test_sequential_sweep_runs_everything_once_and_resume_skips_it(tmp_path):
    exp = load_experiment(tiny_experiment())
    store = ResultsStore(tmp_path / "r")
    lines = []
    summary = run_sweep(exp, store, progress=False, log=lines.append)
    hashes = {p.config_hash for p in exp.expand()}
    assert summary.total == 4 and summary.finished == 4 and summary.skipped == 0
    assert finished_per_hash(store) == collections.Counter(hashes)
    assert {r.experiment for r in store.runs()} == {"tiny-sweep"}
    assert sum("finished" in line and "accuracy_per_query" in line for line in lines) == 4
    again = run_sweep(exp, store, progress=False, log=lambda s: None)
    assert again.skipped == 4 and again.outcomes == []
    assert finished_per_hash(store) == collections.Counter(hashes)


def test_failed_run_is_recorded_and_the_sweep_continues(tmp_path):
    # lr = 1e30 makes the first AdamW step blow the weights up: the loss turns non-finite
    exp = load_experiment(tiny_experiment(lrs=(1e30, 1e-2)))
    store = ResultsStore(tmp_path / "r")
    summary = run_sweep(exp, store, progress=False, log=lambda s: None)
    assert summary.finished == 2 and summary.failed == 2
    failed = store.runs(status="failed")
    assert len(failed) == 2
    assert all(r.config["train"]["lr"] == 1e30 for r in failed)
    assert all("Diverged" in (r.error or "") or "nan" in (r.error or "").lower() for r in failed)
    assert {r.config["train"]["lr"] for r in store.runs(status="finished")} == {1e-2}
    # a restart retries the failed configs (they may be transient) unless told not to
    assert len(run_sweep(exp, store, progress=False, log=lambda s: None, skip_failed=True).outcomes) == 0
    assert run_sweep(exp, store, progress=False, log=lambda s: None).failed == 2


def test_two_local_workers(tmp_path):
    exp = load_experiment(tiny_experiment())
    store = ResultsStore(tmp_path / "r")
    summary = run_sweep(exp, store, workers=2, progress=False, log=lambda s: None)
    assert summary.finished == 4
    assert finished_per_hash(store) == collections.Counter(p.config_hash for p in exp.expand())
    assert all(os.path.isfile(r.checkpoint) for r in store.runs(status="finished"))


def test_one_sweep_per_results_directory(tmp_path):
    store = ResultsStore(tmp_path / "r")
    with sweep_lock(store.root):
        child = subprocess.run(
            [
                sys.executable,
                "-c",
                "import sys; from pathlib import Path; from mixerzoo.experiments.sweep import sweep_lock\n"
                "try:\n    with sweep_lock(Path(sys.argv[1])): pass\nexcept Exception as e: print(e)",
                str(store.root),
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert "another sweep" in child.stdout and str(os.getpid()) in child.stdout
    with pytest.raises(ConfigError, match="executor 'slurm'"):
        run_sweep(load_experiment(tiny_experiment()), store, executor="slurm")


@pytest.mark.parametrize("workers", [1, 2])
def test_sigkill_then_restart_completes_every_run_exactly_once(tmp_path, workers):
    spec = tiny_experiment(lrs=(1e-2, 3e-3, 1e-3), seq_lens=(8, 12), n_train=256, epochs=3)
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(spec))
    results = tmp_path / "r"
    cmd = [
        sys.executable,
        "-m",
        "mixerzoo.cli.main",
        "run",
        str(path),
        "--results",
        str(results),
        "--workers",
        str(workers),
        "--quiet",
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    store = ResultsStore(results)
    deadline = time.time() + 120
    while time.time() < deadline and not store.runs(status="finished"):
        assert proc.poll() is None, "the sweep ended before it could be killed"
        time.sleep(0.1)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    before = {r.run_id: r.config_hash for r in store.runs(status="finished")}
    assert 1 <= len(before) < 6, "kill the sweep after at least one run finished and before the last"
    time.sleep(1.0)  # worker processes die with the sweep: nothing may finish after the kill
    assert {r.run_id for r in store.runs(status="finished")} == set(before)

    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    planned = {p.config_hash for p in load_experiment(spec).expand()}
    assert finished_per_hash(store) == collections.Counter(planned)  # every run exactly once
    after = {r.run_id: r.config_hash for r in store.runs(status="finished")}
    assert set(before) <= set(after)  # nothing finished before the kill was redone
    assert not store.runs(status="running")
    assert all(r.error == INTERRUPTED for r in store.runs(status="failed"))


def test_trackers_receive_every_run_and_missing_extras_are_clear_errors(tmp_path):
    import importlib.util

    from mixerzoo.experiments.tracking import make_trackers

    class Recorder:
        def __init__(self):
            self.runs, self.closed = [], False

        def log_run(self, record, history):
            self.runs.append((record.run_id, len(history)))

        def close(self):
            self.closed = True

    rec = Recorder()
    store = ResultsStore(tmp_path / "r")
    run_sweep(load_experiment(tiny_experiment()), store, trackers=[rec], progress=False, log=lambda s: None)
    assert sorted(r for r, _ in rec.runs) == sorted(r.run_id for r in store.runs()) and rec.closed
    assert all(n == len(store.history(r)) and n > 0 for r, n in rec.runs)
    for name, module in (("tensorboard", "tensorboard"), ("wandb", "wandb")):
        if importlib.util.find_spec(module) is None:
            with pytest.raises(ConfigError, match=f"needs the {module} package"):
                make_trackers([name], tmp_path / "t", "x")
