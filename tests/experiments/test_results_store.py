"""The results store: records, attempts (issue 15), owners and reaping, migration, checkpoint
paths, unusable databases (issue 10)."""

import errno
import json
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from mixerzoo.config import load_run_config
from mixerzoo.registry import ConfigError
from mixerzoo.runs.task import execute_run, load_checkpoint
from mixerzoo.store.owners import LEASE_S, process_start
from mixerzoo.store.results import Owner, ResultsStore, StaleAttempt
from mixerzoo.store.schema import SCHEMA_VERSION

CFG = {
    "name": "tiny",
    "data": {"task": {"name": "mqar_cat", "vocab_size": 30, "seq_len": 8}, "n_train": 64, "n_test": 32},
    "model": {"d_model": 16, "n_layers": 1, "mixer": "cat"},
    "train": {"epochs": 2, "batch_size": 32},
}


def test_store_round_trip(tmp_results):
    store = ResultsStore(tmp_results)
    rid = store.start_run({"a": 1}, "h" * 64, "n", "exp", "0.1")
    assert store.get(rid).status == "running"
    store.log_eval(rid, 10, 1, 0.5, {"accuracy_per_query": 0.25})
    store.log_eval(rid, 20, 2, 1.0, {"accuracy_per_query": 0.5})
    store.finish_run(rid, {"accuracy_per_query": 0.5}, 1.5, 123, "ckpt.pt")
    rec = ResultsStore(tmp_results).get(rid)  # a fresh handle reads what was written
    assert rec.status == "finished" and rec.config == {"a": 1} and rec.params == 123
    assert rec.metrics == {"accuracy_per_query": 0.5} and rec.experiment == "exp"
    assert [h["step"] for h in store.history(rid)] == [10, 20]
    assert store.finished("h" * 64).run_id == rid
    rid2 = store.start_run({"a": 2}, "g" * 64)
    store.fail_run(rid2, "ValueError: boom")
    assert store.get(rid2).error == "ValueError: boom"
    assert [r.run_id for r in store.runs(status="failed")] == [rid2]


def test_execute_run_records_metrics_history_and_loadable_checkpoint(tmp_results):
    store = ResultsStore(tmp_results)
    rec = execute_run(CFG, store, progress=False)
    assert rec.status == "finished" and rec.name == "tiny"
    assert 0 <= rec.metrics["accuracy_per_query"] <= 1 and rec.params > 0 and rec.wall_s > 0
    assert len(store.history(rec.run_id)) == 2
    assert set(rec.to_json()) >= {
        "run_id",
        "status",
        "config",
        "config_hash",
        "metrics",
        "checkpoint",
        "wall_s",
        "params",
        "error",
    }
    model, cfg = load_checkpoint(rec.checkpoint)
    assert cfg.config_hash() == rec.config_hash == load_run_config(CFG).config_hash()
    x = torch.from_numpy(cfg.data.build_task().make(4, 0).inputs)
    assert model(x).shape == (4, 8, 30)
    with sqlite3.connect(store.db_path) as con:
        assert con.execute("SELECT package_version FROM attempts").fetchone()[0] == rec.package_version


def test_failed_run_is_recorded_with_its_error(tmp_results, monkeypatch):
    import importlib

    train_mod = importlib.import_module("mixerzoo.training.train")  # the module, not the function

    def boom(*a, **k):
        raise RuntimeError("exploded")

    monkeypatch.setattr(train_mod, "supervised_loss", boom)
    store = ResultsStore(tmp_results)
    rec = execute_run(CFG, store, progress=False, raise_errors=False)
    assert rec.status == "failed" and "exploded" in rec.error


def test_nan_loss_fails_the_run(tmp_results, monkeypatch):
    import importlib

    train_mod = importlib.import_module("mixerzoo.training.train")
    real = train_mod.supervised_loss
    monkeypatch.setattr(train_mod, "supervised_loss", lambda m, x, y: real(m, x, y) * float("nan"))
    rec = execute_run(CFG, ResultsStore(tmp_results), progress=False, raise_errors=False)
    assert rec.status == "failed" and "TrainingDiverged" in rec.error


def test_length_generalization_metrics_are_recorded(tmp_results):
    cfg = {**CFG, "data": {**CFG["data"], "test_seq_lens": [8, 16, 32]}}
    rec = execute_run(cfg, ResultsStore(tmp_results), progress=False)
    for length in (8, 16, 32):
        assert 0 <= rec.metrics[f"accuracy@{length}"] <= 1
    assert rec.metrics["accuracy@8"] == rec.metrics["accuracy_per_query"]  # same split as the test set
    assert rec.config["model"]["max_len"] == 32


def test_test_time_rope_scaling_changes_only_longer_lengths(tmp_results):
    import torch

    from mixerzoo.config import load_run_config
    from mixerzoo.evaluation.length_generalization import evaluate_lengths
    from mixerzoo.model import build_model

    base = {**CFG, "model": {"d_model": 16, "n_layers": 1, "mixer": "attention", "position": "rope"}}
    plain = load_run_config({**base, "data": {**CFG["data"], "test_seq_lens": [8, 32]}})
    pi = load_run_config(
        {**base, "data": {**CFG["data"], "test_seq_lens": [8, 32], "test_rope_scaling": "pi"}}
    )
    torch.manual_seed(0)
    model = build_model(plain.model)
    a, b = evaluate_lengths(model, plain), evaluate_lengths(model, pi)
    assert a["accuracy@8"] == b["accuracy@8"]
    assert model.rope.scale == 1.0  # restored after evaluation


# -- one record per run, attempts as history (issue 15) ------------------------------------------
def test_a_redone_run_is_one_record_with_its_attempts(tmp_results):
    store = ResultsStore(tmp_results)
    rid = store.start_run({"a": 1}, "h" * 64, "n", "exp")
    store.log_eval(rid, 10, 1, 0.5, {"accuracy_per_query": 0.1})
    assert store.fail_run(rid, "ValueError: boom")
    assert store.get(rid).status == "failed" and store.get(rid).error == "ValueError: boom"
    again = ResultsStore(tmp_results)  # another process redoing the run
    assert again.start_run({"a": 1}, "h" * 64, "n", "exp") == rid
    again.log_eval(rid, 20, 1, 0.5, {"accuracy_per_query": 0.9})
    again.finish_run(rid, {"accuracy_per_query": 0.9}, 2.0, 7, None)
    (rec,) = store.runs()
    assert rec.status == "finished" and rec.error is None  # finishing clears the stale error
    assert [(a.attempt, a.outcome, a.error) for a in rec.attempts] == [
        (1, "failed", "ValueError: boom"),
        (2, "finished", None),
    ]
    assert rec.metrics == {"accuracy_per_query": 0.9} and rec.params == 7
    assert [h["step"] for h in store.history(rid)] == [20]  # the finished attempt's history
    assert [h["step"] for h in store.history(rid, attempt=1)] == [10]
    entry = rec.to_json()
    assert [a["outcome"] for a in entry["attempts"]] == ["failed", "finished"]
    assert set(entry["attempts"][0]) >= {"start", "end", "pid", "host", "outcome", "error"}
    assert entry["attempts"][0]["pid"] == os.getpid() and entry["attempts"][0]["host"] == socket.gethostname()
    # the same config in another experiment is another run; a retrain that fails keeps the result
    other = store.start_run({"a": 1}, "h" * 64, "n", "other-exp")
    assert other != rid and len(store.runs()) == 2
    store.start_run({"a": 1}, "h" * 64, "n", "exp")
    store.fail_run(rid, "RuntimeError: retrain failed")
    rec = store.get(rid)
    assert rec.status == "finished" and rec.metrics == {"accuracy_per_query": 0.9} and rec.error is None
    assert [a.outcome for a in rec.attempts] == ["failed", "finished", "failed"]


def test_execute_run_twice_adds_an_attempt_with_its_own_checkpoint(tmp_results):
    store = ResultsStore(tmp_results)
    first = execute_run(CFG, store, progress=False)
    second = execute_run(CFG, store, progress=False)
    assert second.run_id == first.run_id and len(store.runs()) == 1
    assert [a.outcome for a in second.attempts] == ["finished", "finished"]
    assert second.last_attempt.attempt == 2 and second.checkpoint == second.attempts[1].checkpoint
    assert os.path.isfile(second.attempts[0].checkpoint) and os.path.isfile(second.checkpoint)
    assert second.attempts[0].checkpoint != second.checkpoint  # the first attempt's model is kept


# -- owners: only dead runs are reaped (issue 10) ---------------------------------------------------
def dead_owner() -> Owner:
    """The owner of a process that has exited (its start time recorded, so a reused pid differs)."""
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    start = process_start(child.pid)
    child.stdin.close()
    child.wait(timeout=60)
    return Owner(child.pid, socket.gethostname(), start)


def set_heartbeat(store, run_id, t):
    with sqlite3.connect(store.db_path) as con:
        con.execute("UPDATE attempts SET heartbeat_at = ? WHERE run_id = ?", (t, run_id))


def test_only_runs_whose_owner_is_dead_are_reaped_on_any_store_access(tmp_results):
    store = ResultsStore(tmp_results)
    gone = dead_owner()
    dead = store.start_run({"a": 1}, "a" * 64, owner=gone)
    live = store.start_run({"a": 2}, "b" * 64)  # this process
    orphan = store.start_run({"a": 3}, "c" * 64, owner=Owner.current(parent_pid=gone.pid))
    far_stale = store.start_run({"a": 4}, "d" * 64, owner=Owner(1, "another-host"))
    far_fresh = store.start_run({"a": 5}, "e" * 64, owner=Owner(1, "another-host"))
    set_heartbeat(store, far_stale, time.time() - LEASE_S - 60)
    status = {r.run_id: r.status for r in ResultsStore(tmp_results).runs()}  # reaped on opening
    assert status == {
        dead: "interrupted",
        live: "running",
        orphan: "interrupted",  # its sweep died: a worker dies with it
        far_stale: "interrupted",  # lease expired
        far_fresh: "running",
    }
    assert f"pid {gone.pid} on {gone.host}" in store.get(dead).error
    assert store.heartbeat(live) and not store.heartbeat(dead, attempt=1)
    # a reaped attempt is fenced: its late finish is refused and changes nothing
    with pytest.raises(StaleAttempt):
        store.finish_run(orphan, {"accuracy_per_query": 1.0}, 1.0, 1, None)
    assert store.get(orphan).status == "interrupted"


def test_heartbeat_thread_refreshes_the_lease(tmp_results):
    from mixerzoo.runs.lifecycle import keep_alive

    store = ResultsStore(tmp_results)
    rid = store.start_run({"a": 1}, "a" * 64)
    set_heartbeat(store, rid, 0.0)
    with keep_alive(store, rid, 1, every=0.01):
        deadline = time.monotonic() + 60
        while store.get(rid).attempts[0].heartbeat_at == 0.0 and time.monotonic() < deadline:
            time.sleep(0.01)
    assert store.get(rid).attempts[0].heartbeat_at > 0.0


# -- failures leave no orphan files; config errors leave no rows (issue 10) ---------------------------
def test_disk_full_while_saving_the_checkpoint_leaves_a_failed_row_and_no_file(tmp_results, monkeypatch):
    import mixerzoo.checkpoint

    def full_disk(tensors, path, *a, **k):
        Path(path).write_bytes(b"partial")  # what a full disk leaves: the start of the file
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(mixerzoo.checkpoint, "save_file", full_disk)
    store = ResultsStore(tmp_results)
    rec = execute_run(CFG, store, progress=False, raise_errors=False)
    assert rec.status == "failed" and rec.error.startswith("no space left on device")
    assert not store.runs(status="running")
    assert list((tmp_results / "checkpoints").iterdir()) == []  # no checkpoint, no .tmp


def test_config_errors_found_before_training_create_no_row(tmp_results):
    store = ResultsStore(tmp_results)
    wrong_head = {**CFG, "model": {**CFG["model"], "head": "regression"}}
    with pytest.raises(ConfigError, match="needs head = 'lm'"):
        execute_run(wrong_head, store, progress=False, raise_errors=False)
    if not torch.cuda.is_available():
        with pytest.raises(ConfigError, match="no CUDA device"):
            execute_run({**CFG, "train": {**CFG["train"], "device": "cuda"}}, store, progress=False)
    assert store.runs() == []


# -- checkpoints relative to the store root --------------------------------------------------------
def test_a_moved_store_opened_from_elsewhere_finds_its_checkpoints(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rec = execute_run(CFG, ResultsStore("results"), progress=False)  # a cwd-relative root
    with sqlite3.connect(tmp_path / "results" / "mixerzoo.sqlite") as con:
        assert con.execute("SELECT checkpoint FROM attempts").fetchone()[0] == f"checkpoints/{rec.run_id}.pt"
    shutil.move(tmp_path / "results", tmp_path / "moved")
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    moved = ResultsStore(tmp_path / "moved").get(rec.run_id)
    assert Path(moved.checkpoint) == tmp_path / "moved" / "checkpoints" / f"{rec.run_id}.pt"
    model, cfg = load_checkpoint(moved.checkpoint)
    assert cfg.config_hash() == rec.config_hash


# -- migration: a store written by schema 1 is upgraded in place ------------------------------------
FIXTURE = Path(__file__).parent / "fixtures" / "store_v1"

# today's (schema 1) table definitions, verbatim, for stores written by hand below
V1_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_id          TEXT PRIMARY KEY,
    config_hash     TEXT NOT NULL,
    name            TEXT,
    experiment      TEXT,
    status          TEXT NOT NULL CHECK (status IN ('running', 'finished', 'failed')),
    config_json     TEXT NOT NULL,
    metrics_json    TEXT,
    wall_s          REAL,
    params          INTEGER,
    package_version TEXT,
    error           TEXT,
    checkpoint      TEXT,
    created_at      REAL NOT NULL,
    updated_at      REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS runs_hash ON runs (config_hash, status);
CREATE INDEX IF NOT EXISTS runs_experiment ON runs (experiment);
CREATE TABLE IF NOT EXISTS evals (
    run_id       TEXT NOT NULL REFERENCES runs (run_id),
    step         INTEGER NOT NULL,
    epoch        INTEGER,
    wall_s       REAL,
    metrics_json TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS evals_run ON evals (run_id, step);
"""


def v1_rows(path):
    with sqlite3.connect(path) as con:
        runs = con.execute("SELECT run_id, config_hash, experiment, status, checkpoint FROM runs").fetchall()
        evals = con.execute("SELECT run_id, step, metrics_json FROM evals").fetchall()
    return runs, evals


def test_a_store_written_by_schema_1_is_upgraded_in_place_keeping_every_run_and_checkpoint(
    tmp_path, monkeypatch
):
    root = tmp_path / "old"
    shutil.copytree(FIXTURE, root)
    old_runs, old_evals = v1_rows(root / "mixerzoo.sqlite")
    assert len(old_runs) == 5 and len(old_evals) == 5  # 5 rows of 4 runs (one redone after a kill)
    monkeypatch.chdir(tmp_path)  # not the directory the store was written from
    store = ResultsStore(root)
    runs = store.runs()
    by_id = {r.run_id: r for r in runs}
    # one record per (config hash, experiment); every schema-1 row is one of its attempts
    assert sorted((r.config_hash, r.experiment) for r in runs) == sorted(
        {(h, e) for _, h, e, _, _ in old_runs}
    )
    legacy = {}
    with sqlite3.connect(root / "mixerzoo.sqlite") as con:
        for run_id, attempt, legacy_id in con.execute("SELECT run_id, attempt, legacy_run_id FROM attempts"):
            legacy[legacy_id] = (run_id, attempt)
        assert con.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert set(legacy) == {r[0] for r in old_runs}
    for old_id, _, _, old_status, _ in old_runs:
        run_id, attempt = legacy[old_id]
        outcome = by_id[run_id].attempts[attempt - 1].outcome
        assert outcome == old_status or (old_status, outcome) in {
            ("failed", "interrupted"),  # a row the killed sweep left and the restart marked
            ("running", "interrupted"),  # a row left running long ago: its lease has expired
        }
    redone = [r for r in runs if len(r.attempts) == 2]
    assert len(redone) == 1 and [a.outcome for a in redone[0].attempts] == ["interrupted", "finished"]
    assert redone[0].status == "finished" and redone[0].error is None
    # every evaluation is kept, under the attempt of the row it belonged to
    for old_id, step, metrics in old_evals:
        run_id, attempt = legacy[old_id]
        by_step = {h["step"]: h for h in store.history(run_id, attempt)}
        assert json.loads(metrics).items() <= by_step[step].items()
    assert sum(len(store.history(r.run_id, a.attempt)) for r in runs for a in r.attempts) == len(old_evals)
    # every checkpoint is found (the rows held cwd-relative paths) and loads
    finished = [r for r in runs if r.status == "finished"]
    assert len(finished) == sum(s == "finished" for *_, s, _ in old_runs)
    for rec in finished:
        assert Path(rec.checkpoint) == root / "checkpoints" / f"{rec.run_id}.pt"
        assert load_checkpoint(rec.checkpoint)[1].config_hash() == rec.config_hash
    # opening again does not migrate again
    assert [r.to_json() for r in ResultsStore(root).runs()] == [r.to_json() for r in runs]


def test_schema_1_absolute_checkpoint_paths_resolve_where_the_file_is(tmp_path):
    root, outside = tmp_path / "store", tmp_path / "outside"
    (root / "checkpoints").mkdir(parents=True)
    outside.mkdir()
    (root / "checkpoints" / "r1.pt").write_bytes(b"1")  # moved with the store: old path is gone
    (outside / "r2.pt").write_bytes(b"2")  # kept outside the store: old path still valid
    with sqlite3.connect(root / "mixerzoo.sqlite") as con:
        con.executescript(V1_SCHEMA)
        for run_id, h, ckpt in (
            ("r1", "a" * 64, "/no/longer/there/checkpoints/r1.pt"),
            ("r2", "b" * 64, str(outside / "r2.pt")),
        ):
            con.execute(
                "INSERT INTO runs (run_id, config_hash, status, config_json, checkpoint, created_at,"
                " updated_at) VALUES (?, ?, 'finished', '{}', ?, 1.0, 2.0)",
                (run_id, h, ckpt),
            )
    store = ResultsStore(root)
    assert Path(store.get("r1").checkpoint).read_bytes() == b"1"
    assert Path(store.get("r2").checkpoint).read_bytes() == b"2"


# -- unusable databases are one clear error ---------------------------------------------------------
@pytest.mark.parametrize("damage", ["garbage", "truncated"])
def test_a_damaged_database_is_a_config_error(tmp_path, damage):
    root = tmp_path / "r"
    store = ResultsStore(root)
    for i in range(20):
        store.start_run({"a": i, "pad": "x" * 2000}, f"{i:064d}")
    data = (root / "mixerzoo.sqlite").read_bytes()
    for extra in ("mixerzoo.sqlite-wal", "mixerzoo.sqlite-shm"):
        (root / extra).unlink(missing_ok=True)
    (root / "mixerzoo.sqlite").write_bytes(
        b"not sqlite " * 500 if damage == "garbage" else data[: len(data) // 3]
    )
    with pytest.raises(ConfigError, match="cannot be used"):
        ResultsStore(root).runs()


def test_a_read_only_database_reads_and_refuses_writes_with_a_config_error(tmp_path, monkeypatch):
    import mixerzoo.store.results as results_store

    store = ResultsStore(tmp_path / "r")
    rid = store.start_run({"a": 1}, "a" * 64)
    store.finish_run(rid, {}, 1.0, 1, None)
    real = sqlite3.connect

    def read_only(path, *a, **k):  # the tests run as root, which ignores file modes
        return real(f"file:{path}?mode=ro", *a, uri=True, **k)

    monkeypatch.setattr(results_store.sqlite3, "connect", read_only)
    ro = ResultsStore(tmp_path / "r")
    assert [r.status for r in ro.runs()] == ["finished"]
    with pytest.raises(ConfigError, match="readonly database"):
        ro.start_run({"a": 2}, "b" * 64)


def test_a_read_only_handle_sees_what_writers_add_and_cannot_write(tmp_path):
    store = ResultsStore(tmp_path / "r")
    reader = ResultsStore(tmp_path / "r", read_only=True)
    rid = store.start_run({"a": 1}, "a" * 64)  # written after the reader opened the store
    assert [(r.run_id, r.status) for r in reader.runs()] == [(rid, "running")]  # its owner is alive
    with pytest.raises(ConfigError, match="opened read-only"):
        reader.start_run({"a": 2}, "b" * 64)
    assert len(store.runs()) == 1


def test_results_path_that_is_a_file_or_missing_for_reading(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(ConfigError, match="is a file"):
        ResultsStore(tmp_path / "file")
    with pytest.raises(ConfigError, match="does not exist"):
        ResultsStore(tmp_path / "typo", create=False)
    assert not (tmp_path / "typo").exists()
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match="no mixerzoo.sqlite"):
        ResultsStore(tmp_path / "empty", create=False)
    assert list((tmp_path / "empty").iterdir()) == []
