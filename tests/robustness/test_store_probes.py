"""Probes of the results store through the CLI (issue 10): unusable stores are one clear line
(exit 2), read-only commands do not create a typo'd --results, a diverged or terminated
`mixerzoo train` ends its row (never `running`) with one line and no traceback, and
`mixerzoo results` shows runs, `--attempts` their history (issue 15)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from mixerzoo.store.results import ResultsStore

RUN = {
    "name": "probe-tiny",
    "data": {"task": {"name": "mqar_cat", "vocab_size": 30, "seq_len": 8}, "n_train": 32, "n_test": 16},
    "model": {"d_model": 16, "n_layers": 1, "mixer": "cat"},
    "train": {"epochs": 1, "batch_size": 16, "device": "cpu"},
}
HOOK = (Path(__file__).parents[1] / "experiments" / "fixtures" / "blocking_sitecustomize.py").read_text()


def write_config(tmp_path, **train):
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump({**RUN, "train": {**RUN["train"], **train}}))
    return path


@pytest.mark.parametrize("command", ["results", "study plot", "study report"])
def test_read_only_commands_do_not_create_a_missing_results_directory(run_cli, tmp_path, command):
    args = [] if command == "results" else ["cat-mqar"]
    run_cli(*command.split(), *args, "--results", tmp_path / "typo").clear_error("does not exist")
    assert not (tmp_path / "typo").exists()


@pytest.mark.parametrize("command", ["results", "train", "study run"])
def test_results_pointing_at_a_file_is_one_line(run_cli, tmp_path, command):
    (tmp_path / "file").write_text("x")
    args = {"results": [], "train": [write_config(tmp_path)], "study run": ["cat-mqar", "--dry-run"]}[command]
    run_cli(*command.split(), *args, "--results", tmp_path / "file").clear_error("is a file")


@pytest.mark.parametrize("command", ["results", "train"])
def test_a_garbage_database_is_one_line(run_cli, tmp_path, command):
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "mixerzoo.sqlite").write_bytes(b"garbage " * 1000)
    args = [write_config(tmp_path)] if command == "train" else []
    run_cli(command, *args, "--results", tmp_path / "r").clear_error("cannot be used", "not a database")


def test_diverged_training_fails_the_row_with_one_line(run_cli, tmp_path):
    out = run_cli("train", write_config(tmp_path, lr=1e30), "--results", tmp_path / "r", "--quiet")
    assert out.code == 1 and "Traceback" not in out.err
    lines = out.err.strip().splitlines()
    assert len(lines) == 1 and "TrainingDiverged" in lines[0] and lines[0].startswith("error: run ")
    (rec,) = ResultsStore(tmp_path / "r").runs()
    assert rec.status == "failed" and "TrainingDiverged" in rec.error


def test_a_config_error_found_before_training_leaves_no_row(run_cli, tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump({**RUN, "model": {**RUN["model"], "head": "regression"}}))
    run_cli("train", path, "--results", tmp_path / "r").clear_error("model.head")
    assert ResultsStore(tmp_path / "r").runs() == []


def test_results_shows_runs_and_attempts(run_cli, tmp_path):
    config = write_config(tmp_path)
    for _ in range(2):
        assert run_cli("train", config, "--results", tmp_path / "r", "--quiet").code == 0
    entries = json.loads(run_cli("results", "--json", "--results", tmp_path / "r").out)
    assert len(entries) == 1 and [a["outcome"] for a in entries[0]["attempts"]] == ["finished"] * 2
    table = run_cli("results", "--results", tmp_path / "r").out.splitlines()
    assert len(table) == 2 and table[0].split()[3] == "tries"  # header + one run with 2 tries
    assert table[1].split()[3] == "2" and " probe-tiny " in table[1]
    detailed = run_cli("results", "--attempts", "--results", tmp_path / "r").out
    attempt_lines = [line.split()[:2] for line in detailed.splitlines() if line.startswith("    #")]
    assert attempt_lines == [["#1", "finished"], ["#2", "finished"]]
    assert f"pid {os.getpid()}" in detailed


def test_sigterm_during_train_ends_the_row_interrupted(tmp_path):
    """SIGTERM is handled like Ctrl-C: the row ends `interrupted` (not `running`), exit 143, one line."""
    hook_dir, calls = tmp_path / "hook", tmp_path / "calls"
    hook_dir.mkdir()
    calls.mkdir()
    (hook_dir / "sitecustomize.py").write_text(HOOK)
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "PYTHONPATH": os.pathsep.join([str(hook_dir), os.environ.get("PYTHONPATH", "")]),
        "MIXERZOO_TEST_HOOK_DIR": str(calls),
        "MIXERZOO_TEST_HOOK_ALLOW": "0",  # block before saving the first checkpoint
    }
    cmd = [sys.executable, "-m", "mixerzoo.cli.main", "train", str(write_config(tmp_path))]
    proc = subprocess.Popen(
        cmd + ["--results", str(tmp_path / "r"), "--quiet"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    deadline = time.monotonic() + 240
    while not list(calls.glob("blocked-*")):  # training done, blocked before the checkpoint
        assert proc.poll() is None, proc.stderr.read()[-2000:]
        assert time.monotonic() < deadline, "the run never reached its checkpoint"
        time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 143 and "Traceback" not in err and len(err.strip().splitlines()) == 1
    (rec,) = ResultsStore(tmp_path / "r").runs()
    assert rec.status == "interrupted" and "SIGTERM" in rec.error
    assert list((tmp_path / "r" / "checkpoints").iterdir()) == []
