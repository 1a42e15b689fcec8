"""One results store for every kind of run: task runs, language-model runs and computed results.

In one fresh directory, ``train``, ``lm train`` and ``study run`` of a computed study each record
a run; ``results`` lists the three with their kinds, filters by kind and study, and reads what was
made before the store recorded language models and computed results (run folders, result JSONs)
without writing.
A schema-2 store (no kind per run) is upgraded by a writing command and read as it is by a
reading one.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from mixerzoo.runs.lifecycle import Recording
from mixerzoo.store.results import ResultsStore
from mixerzoo.store.schema import SCHEMA_VERSION
from tests.experiments.conftest import SMALL, THEORY, write_inputs


@pytest.fixture
def fresh(tmp_path, monkeypatch):
    """A fresh working directory with a task config, an LM config and its corpus; no results yet."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MIXERZOO_RESULTS", raising=False)
    return write_inputs(tmp_path)


def listed(run_cli, *args) -> list[dict]:
    code, out, err = run_cli(["results", "--json", *args])
    assert code == 0, err
    return json.loads(out)


def test_one_fresh_directory_lists_a_task_run_a_language_model_run_and_a_computed_result(
    three_kinds_here, run_cli
):
    fresh = three_kinds_here
    entries = listed(run_cli)
    assert [(e["kind"], e["status"], len(e["attempts"])) for e in entries] == [
        ("task", "finished", 1),
        ("lm", "finished", 1),
        ("computed", "finished", 1),
    ]
    task, lm, computed = entries
    assert task["study"] is None and task["name"] == "tiny-task"
    assert Path(task["checkpoint"]).is_file()
    assert lm["study"] is None and lm["name"] == "lm"
    assert Path(lm["checkpoint"]) == (fresh / "runs" / "lm" / "checkpoint.pt").resolve()
    assert Path(lm["output"]) == (fresh / "runs" / "lm").resolve()
    assert lm["metrics"]["steps"] == 4 and lm["metrics"]["val_loss"] > 0 and lm["params"] > 0
    attempt = lm["attempts"][0]
    assert attempt["pid"] == os.getpid() and attempt["host"] and attempt["end"] >= attempt["start"]
    assert computed["study"] == THEORY and computed["checkpoint"] is None
    assert computed["metrics"] == {"claims": 1, "reproduced": 1}
    assert Path(computed["output"]) == Path("results/theory") / f"{THEORY}.json"
    assert json.loads(Path(computed["output"]).read_text())["name"] == THEORY  # what report reads


def test_results_filters_by_kind_and_study_and_shows_the_kind(three_kinds_here, run_cli):
    assert [e["kind"] for e in listed(run_cli, "--kind", "lm")] == ["lm"]
    assert [e["kind"] for e in listed(run_cli, "--kind", "task")] == ["task"]
    assert [e["study"] for e in listed(run_cli, "--study", THEORY)] == [THEORY]
    assert listed(run_cli, "--study", THEORY, "--kind", "task") == []
    code, out, _ = run_cli(["results"])
    assert code == 0
    rows = {line.split()[1]: line for line in out.splitlines()[1:]}
    assert set(rows) == {"task", "lm", "computed"}
    assert "claims 1/1" in rows["computed"] and "val_loss" in rows["lm"]
    code, _, err = run_cli(["results", "--kind", "probe"])
    assert code == 2 and err.strip().count("\n") == 0


def test_a_resumed_language_model_run_is_one_record_with_a_new_attempt(fresh, run_cli):
    for _ in range(2):
        code, out, err = run_cli(["lm", "train", "lm.yaml", "--out", "runs/lm", "--quiet"])
        assert code == 0, err
    (entry,) = listed(run_cli, "--kind", "lm")
    assert [a["outcome"] for a in entry["attempts"]] == ["finished", "finished"]
    history = ResultsStore("results", read_only=True).history(entry["run_id"])
    assert [row["step"] for row in history] == [2, 4] and all("val_loss" in row for row in history)


def test_a_mistake_found_while_setting_up_a_language_model_records_nothing(fresh, run_cli):
    code, _, err = run_cli(["lm", "train", "lm.yaml", "--out", "runs/lm", "--results", "a", "--quiet"])
    assert code == 0, err
    argv = ["lm", "train", "lm.yaml", "--out", "runs/lm", "--set", "train.lr=0.01", "--results", "b"]
    code, _, err = run_cli(argv)
    assert code == 2 and "different config" in err
    assert not (fresh / "b").exists()


def test_a_failed_or_interrupted_attempt_is_recorded_with_its_error(tmp_path):
    store = ResultsStore(tmp_path / "r")
    for err, outcome in (
        (RuntimeError("training loss is nan"), "failed"),
        (KeyboardInterrupt(), "interrupted"),
    ):
        with pytest.raises(type(err)):
            with Recording(store, "lm", {"x": 1}, "h" * 64, "lm", start=True):
                raise err
        (run,) = store.runs(kind="lm")
        assert run.attempts[-1].outcome == outcome and run.status == outcome
    assert "training loss is nan" in run.attempts[0].error
    with pytest.raises(RuntimeError):
        with Recording(store, "lm", {"x": 2}, "g" * 64, "lm"):  # never started: nothing recorded
            raise RuntimeError("bad folder")
    assert len(store.runs()) == 1


def test_results_made_before_the_store_recorded_them_are_listed_without_writing(
    three_kinds_here, run_cli, tmp_path
):
    fresh = three_kinds_here
    old = tmp_path / "old"
    (old / "theory").mkdir(parents=True)
    (old / "theory" / f"{THEORY}.json").write_bytes(
        (fresh / "results" / "theory" / f"{THEORY}.json").read_bytes()
    )
    (old / "theory" / "notes.json").write_text("[]")  # not a result: not a run
    runs = old / "runs"
    for name, finished in (("done", True), ("stopped", False)):
        (runs / name).mkdir(parents=True)
        for f in ("config.json", "checkpoint.pt", "metrics.jsonl", "result.json"):
            if f != "result.json" or finished:
                (runs / name / f).write_bytes((fresh / "runs" / "lm" / f).read_bytes())
    before = sorted(p.relative_to(old).as_posix() for p in old.rglob("*"))
    entries = listed(run_cli, "--results", old, "--lm-runs", runs)
    assert sorted((e["kind"], e["status"]) for e in entries) == [
        ("computed", "finished"),
        ("lm", "finished"),
        ("lm", "interrupted"),
    ]
    lm_hash = listed(run_cli, "--kind", "lm")[0]["config_hash"]
    assert {e["config_hash"] for e in entries if e["kind"] == "lm"} == {lm_hash}
    assert sorted(p.relative_to(old).as_posix() for p in old.rglob("*")) == before  # no store made
    # what the store holds is listed once: the recorded run folder and result JSON are not repeated
    assert len(listed(run_cli, "--lm-runs", "runs")) == 3
    code, _, err = run_cli(["results", "--lm-runs", "data"])
    assert code == 2 and "no `mixerzoo lm train --out` folder" in err


# -- schema 2 (runs without a kind): its tables as that version made them ---------------------
V2_SCHEMA = """
CREATE TABLE runs (
    run_id TEXT PRIMARY KEY, config_hash TEXT NOT NULL, experiment TEXT, name TEXT,
    config_json TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('running', 'finished', 'failed', 'interrupted')),
    result_attempt INTEGER, created_at REAL NOT NULL, updated_at REAL NOT NULL
);
CREATE UNIQUE INDEX runs_identity ON runs (config_hash, ifnull(experiment, ''));
CREATE INDEX runs_experiment ON runs (experiment);
CREATE TABLE attempts (
    run_id TEXT NOT NULL REFERENCES runs (run_id), attempt INTEGER NOT NULL,
    outcome TEXT NOT NULL CHECK (outcome IN ('running', 'finished', 'failed', 'interrupted')),
    started_at REAL NOT NULL, ended_at REAL, heartbeat_at REAL, pid INTEGER, pid_start TEXT,
    parent_pid INTEGER, host TEXT, error TEXT, metrics_json TEXT, wall_s REAL, params INTEGER,
    checkpoint TEXT, package_version TEXT, legacy_run_id TEXT, PRIMARY KEY (run_id, attempt)
);
CREATE INDEX attempts_outcome ON attempts (outcome);
CREATE TABLE evals (
    run_id TEXT NOT NULL REFERENCES runs (run_id), attempt INTEGER NOT NULL, step INTEGER NOT NULL,
    epoch INTEGER, wall_s REAL, metrics_json TEXT NOT NULL
);
CREATE INDEX evals_run ON evals (run_id, attempt, step);
INSERT INTO runs VALUES ('abc-1', 'abc', 'sweep', 'old', '{"lr": 0.1}', 'finished', 1, 1.0, 2.0);
INSERT INTO attempts (run_id, attempt, outcome, started_at, ended_at, metrics_json, wall_s, params)
    VALUES ('abc-1', 1, 'finished', 1.0, 2.0, '{"accuracy": 0.5}', 1.0, 10);
PRAGMA user_version = 2;
"""


def version(db: Path) -> int:
    with sqlite3.connect(f"file:{db}?mode=ro&immutable=1", uri=True) as con:
        return con.execute("PRAGMA user_version").fetchone()[0]


def test_a_schema_2_store_is_read_unchanged_and_upgraded_by_a_writing_command(tmp_path, run_cli):
    root = tmp_path / "r"
    root.mkdir()
    con = sqlite3.connect(root / "mixerzoo.sqlite")
    con.executescript(V2_SCHEMA)
    con.close()
    before = (root / "mixerzoo.sqlite").read_bytes()
    (entry,) = listed(run_cli, "--results", root)
    assert (entry["run_id"], entry["kind"], entry["study"], entry["metrics"]) == (
        "abc-1",
        "task",
        "sweep",
        {"accuracy": 0.5},
    )
    assert (root / "mixerzoo.sqlite").read_bytes() == before and version(root / "mixerzoo.sqlite") == 2
    code, _, err = run_cli(["study", "run", THEORY, *SMALL, "--results", root])
    assert code == 0, err
    assert version(root / "mixerzoo.sqlite") == SCHEMA_VERSION
    entries = listed(run_cli, "--results", root)
    assert [(e["kind"], e["study"]) for e in entries] == [("task", "sweep"), ("computed", THEORY)]
    assert entries[0]["run_id"] == "abc-1" and entries[0]["metrics"] == {"accuracy": 0.5}


@pytest.mark.slow
def test_torchrun_records_one_attempt_from_rank_0(fresh):
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]
    cmd += ["-m", "mixerzoo.train_lm", "lm.yaml", "--out", "runs/ddp", "--results", "r", "--quiet"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    (run,) = ResultsStore("r", read_only=True).runs()
    assert run.kind == "lm" and run.status == "finished" and len(run.attempts) == 1
    assert Path(run.checkpoint) == (fresh / "runs" / "ddp" / "checkpoint.pt").resolve()
