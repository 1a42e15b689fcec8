"""A full disk is a failed run with its reason: when a checkpoint or store write runs out of space,
the attempt ends ``failed`` with "no space left on device", ``train`` and ``run`` exit 1 with one
line, and the store stays readable (``results`` works on a full disk too).

The first tests simulate ``ENOSPC`` and always run; the last one fills a real small tmpfs during a
run, and is skipped where mounting is not allowed.
"""

from __future__ import annotations

import errno
import json
import os
import sqlite3
from pathlib import Path

import pytest
import yaml

import mixerzoo.runs.task as runs
from mixerzoo.store.errors import NO_SPACE, NoSpace
from mixerzoo.store.results import ResultsStore
from tests.robustness.conftest import tmpfs

TASK = {"task": {"name": "mqar_cat", "vocab_size": 30, "seq_len": 8}, "n_train": 16, "n_test": 16}
SMALL = {
    "name": "disk-small",
    "data": TASK,
    "model": {"d_model": 8, "n_layers": 1, "mixer": "cat"},
    "train": {"epochs": 1, "batch_size": 16, "device": "cpu"},
}
BIG = {**SMALL, "name": "disk-big", "model": {"d_model": 128, "n_layers": 2, "mixer": "cat"}}  # 1.6 MB
SWEEP = {
    "kind": "sweep",
    "name": "disk-sweep",
    "paper": "test",
    "base": {k: SMALL[k] for k in ("data", "model", "train")},
    "grid": {"data.task.seq_len": [8, 12]},
    "aggregate": {"metric": "accuracy_per_query", "reduce": "max", "over": []},
    "presets": {"quick": {}, "paper": {}},
}


def write(path: Path, spec: dict) -> Path:
    path.write_text(yaml.safe_dump(spec))
    return path


def full_disk(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")


def attempts(run_cli, root: Path) -> dict[str, list[dict]]:
    out = run_cli("results", "--json", "--results", root)
    assert out.code == 0 and "Traceback" not in out.err, out.err[-2000:]
    return {e["name"]: e["attempts"] for e in json.loads(out.out)}


def assert_failed_line(out, *needles: str) -> str:
    """Exit 1 (a failed run), no traceback, and a last stderr line with every needle."""
    assert out.code == 1, f"exit {out.code}: {out.err[-2000:]}"
    assert "Traceback" not in out.err
    line = out.err.strip().splitlines()[-1]
    assert line.startswith("error: ") and all(n in line for n in needles), line
    return line


# -- simulated: always run ---------------------------------------------------------------------------
def test_a_checkpoint_write_out_of_space_fails_the_attempt_with_its_reason(run_cli, tmp_path, monkeypatch):
    monkeypatch.setattr(runs, "save_checkpoint", full_disk)
    out = run_cli("train", write(tmp_path / "run.yaml", SMALL), "--results", tmp_path / "r", "--quiet")
    assert_failed_line(out, "disk-small", NO_SPACE)
    assert len(out.err.strip().splitlines()) == 1
    (attempt,) = attempts(run_cli, tmp_path / "r")["disk-small"]
    assert attempt["outcome"] == "failed" and attempt["error"].startswith(NO_SPACE)
    assert list((tmp_path / "r" / "checkpoints").iterdir()) == []


def test_a_store_that_cannot_record_the_failure_still_exits_1_with_the_reason(run_cli, tmp_path, monkeypatch):
    def store_full(self, *args, **kwargs):
        raise NoSpace(f"results database {str(self.db_path)!r} cannot be written: {NO_SPACE}")

    monkeypatch.setattr(runs, "save_checkpoint", full_disk)
    monkeypatch.setattr(ResultsStore, "fail_run", store_full)
    out = run_cli("train", write(tmp_path / "run.yaml", SMALL), "--results", tmp_path / "r", "--quiet")
    assert_failed_line(out, NO_SPACE, "could not record")
    assert len(out.err.strip().splitlines()) == 1


def test_a_store_write_out_of_space_is_no_space_not_a_broken_database(tmp_path, monkeypatch):
    """SQLite's "database or disk is full" while recording an evaluation fails the attempt as a
    full disk, and the store says so instead of calling itself unusable."""
    store = ResultsStore(tmp_path / "r")

    def log_eval(*args, **kwargs):
        raise store._fail(sqlite3.OperationalError("database or disk is full"))

    monkeypatch.setattr(store, "log_eval", log_eval)
    rec = runs.execute_run(SMALL, store, progress=False, raise_errors=False)
    assert rec.status == "failed" and rec.error.startswith(NO_SPACE) and "cannot be written" in rec.error


def test_a_sweep_stops_at_a_full_disk_and_exits_1(run_cli, tmp_path, monkeypatch):
    monkeypatch.setattr(runs, "save_checkpoint", full_disk)
    experiment = write(tmp_path / "sweep.yaml", SWEEP)
    out = run_cli("study", "run", experiment, "--results", tmp_path / "r", "--quiet")
    assert_failed_line(out, "disk-sweep", "stopped", NO_SPACE, "run it again")
    tried = attempts(run_cli, tmp_path / "r")
    assert len(tried) == 1  # the second run was not started on a full disk
    ((attempt,),) = tried.values()
    assert attempt["outcome"] == "failed" and attempt["error"].startswith(NO_SPACE)


# -- a real full disk: a small tmpfs ---------------------------------------------------------------
def fill(path: Path, leave: int = 0) -> None:
    """Write zeros to ``path`` until at most ``leave`` bytes are free on its file system."""
    stat = os.statvfs(path.parent)
    todo = stat.f_bavail * stat.f_frsize - leave
    with path.open("ab", buffering=0) as fh:  # unbuffered: nothing is left to fail at close
        try:
            while todo > 0 or not leave:
                todo -= fh.write(b"\0" * min(65536, max(todo, 4096)))
        except OSError as err:
            assert err.errno == errno.ENOSPC


@pytest.fixture
def small_disk(tmp_path):
    with tmpfs(tmp_path / "disk", "2m") as disk:
        yield disk


def test_a_disk_filled_during_a_run_fails_it_and_the_store_stays_readable(run_cli, small_disk, tmp_path):
    root = small_disk / "r"
    small, big = write(tmp_path / "small.yaml", SMALL), write(tmp_path / "big.yaml", BIG)
    assert run_cli("train", small, "--results", root, "--quiet").code == 0
    fill(small_disk / "filler", leave=256 * 1024)  # room for the store's writes, not for a 1.6 MB checkpoint
    out = run_cli("train", big, "--results", root, "--quiet")
    assert_failed_line(out, "disk-big", NO_SPACE)
    assert len(out.err.strip().splitlines()) == 1
    tried = attempts(run_cli, root)
    assert [a["outcome"] for a in tried["disk-small"]] == ["finished"]
    ((attempt,),) = [tried["disk-big"]]
    assert attempt["outcome"] == "failed" and attempt["error"].startswith(NO_SPACE)
    assert len(list((root / "checkpoints").iterdir())) == 1  # the small run's; no partial file

    fill(small_disk / "filler")  # now completely full
    assert attempts(run_cli, root) == tried  # reading needs no space
    out = run_cli("train", small, "--results", root, "--quiet")  # nothing can be recorded now
    assert_failed_line(out, NO_SPACE)
    assert len(out.err.strip().splitlines()) == 1
    (small_disk / "filler").unlink()
    assert attempts(run_cli, root) == tried
