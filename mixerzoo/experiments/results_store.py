"""The results store: an embedded SQLite database plus checkpoint files in one directory.

Layout of a results directory::

    results/
      mixerzoo.sqlite          runs and their evaluation history
      checkpoints/<run_id>.pt  state dict + config (load with weights_only=True)

Every write is one short transaction (WAL mode, busy timeout), so several worker
processes can share a store and a killed process never leaves a half-written run:
a run is either absent, ``running`` (started, not finished), ``finished`` or ``failed``.
"""

from __future__ import annotations

import json
import os
import secrets
import sqlite3
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DB_NAME = "mixerzoo.sqlite"
ENV_VAR = "MIXERZOO_RESULTS"

SCHEMA = """
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


def default_results_dir() -> Path:
    """``$MIXERZOO_RESULTS`` if set, else ``./results``."""
    return Path(os.environ.get(ENV_VAR, "results"))


@dataclass
class RunRecord:
    run_id: str
    status: str
    config: dict[str, Any]
    config_hash: str
    name: str | None
    experiment: str | None
    metrics: dict[str, Any]
    checkpoint: str | None
    wall_s: float | None
    params: int | None
    error: str | None
    package_version: str | None
    created_at: float
    updated_at: float

    def to_json(self) -> dict[str, Any]:
        """The documented ``mixerzoo results --json`` entry."""
        return {
            "run_id": self.run_id,
            "status": self.status,
            "name": self.name,
            "experiment": self.experiment,
            "config": self.config,
            "config_hash": self.config_hash,
            "metrics": self.metrics,
            "checkpoint": self.checkpoint,
            "wall_s": self.wall_s,
            "params": self.params,
            "error": self.error,
        }


class ResultsStore:
    """Runs, their metrics history and checkpoints under one directory."""

    def __init__(self, root: str | Path | None = None) -> None:
        self.root = Path(root) if root is not None else default_results_dir()
        self.root.mkdir(parents=True, exist_ok=True)
        self.checkpoint_dir = self.root / "checkpoints"
        self.checkpoint_dir.mkdir(exist_ok=True)
        self.db_path = self.root / DB_NAME
        with self._connect() as con:
            con.executescript(SCHEMA)

    @contextmanager
    def _connect(self):
        con = sqlite3.connect(self.db_path, timeout=60.0)
        try:
            con.execute("PRAGMA journal_mode=WAL")
            con.execute("PRAGMA busy_timeout=60000")
            with con:  # one transaction: commit on success, roll back on error
                yield con
        finally:
            con.close()

    # -- writing ------------------------------------------------------------------------
    def start_run(
        self,
        config: dict[str, Any],
        config_hash: str,
        name: str | None = None,
        experiment: str | None = None,
        package_version: str | None = None,
    ) -> str:
        run_id = f"{config_hash[:12]}-{secrets.token_hex(3)}"
        now = time.time()
        with self._connect() as con:
            con.execute(
                "INSERT INTO runs (run_id, config_hash, name, experiment, status, config_json,"
                " package_version, created_at, updated_at) VALUES (?, ?, ?, ?, 'running', ?, ?, ?, ?)",
                (run_id, config_hash, name, experiment, json.dumps(config), package_version, now, now),
            )
        return run_id

    def log_eval(self, run_id: str, step: int, epoch: int | None, wall_s: float, metrics: dict) -> None:
        with self._connect() as con:
            con.execute(
                "INSERT INTO evals (run_id, step, epoch, wall_s, metrics_json) VALUES (?, ?, ?, ?, ?)",
                (run_id, step, epoch, wall_s, json.dumps(metrics)),
            )
            con.execute("UPDATE runs SET updated_at = ? WHERE run_id = ?", (time.time(), run_id))

    def finish_run(
        self, run_id: str, metrics: dict, wall_s: float, params: int, checkpoint: str | None
    ) -> None:
        with self._connect() as con:
            con.execute(
                "UPDATE runs SET status = 'finished', metrics_json = ?, wall_s = ?, params = ?,"
                " checkpoint = ?, updated_at = ? WHERE run_id = ?",
                (json.dumps(metrics), wall_s, params, checkpoint, time.time(), run_id),
            )

    def fail_run(self, run_id: str, error: str, wall_s: float | None = None) -> None:
        with self._connect() as con:
            con.execute(
                "UPDATE runs SET status = 'failed', error = ?, wall_s = ?, updated_at = ? WHERE run_id = ?",
                (error, wall_s, time.time(), run_id),
            )

    def checkpoint_path(self, run_id: str) -> Path:
        return self.checkpoint_dir / f"{run_id}.pt"

    # -- reading ------------------------------------------------------------------------
    def _records(self, where: str = "", args: tuple = ()) -> list[RunRecord]:
        with self._connect() as con:
            rows = con.execute(
                "SELECT run_id, status, config_json, config_hash, name, experiment, metrics_json,"
                " checkpoint, wall_s, params, error, package_version, created_at, updated_at"
                f" FROM runs {where} ORDER BY created_at",
                args,
            ).fetchall()
        return [
            RunRecord(
                run_id=r[0],
                status=r[1],
                config=json.loads(r[2]),
                config_hash=r[3],
                name=r[4],
                experiment=r[5],
                metrics=json.loads(r[6]) if r[6] else {},
                checkpoint=r[7],
                wall_s=r[8],
                params=r[9],
                error=r[10],
                package_version=r[11],
                created_at=r[12],
                updated_at=r[13],
            )
            for r in rows
        ]

    def runs(self, experiment: str | None = None, status: str | None = None) -> list[RunRecord]:
        clauses, args = [], []
        if experiment is not None:
            clauses.append("experiment = ?")
            args.append(experiment)
        if status is not None:
            clauses.append("status = ?")
            args.append(status)
        where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
        return self._records(where, tuple(args))

    def get(self, run_id: str) -> RunRecord | None:
        found = self._records("WHERE run_id = ?", (run_id,))
        return found[0] if found else None

    def finished(self, config_hash: str) -> RunRecord | None:
        """The first finished run with this config hash, if any (used to skip redone work)."""
        found = self._records("WHERE config_hash = ? AND status = 'finished'", (config_hash,))
        return found[0] if found else None

    def history(self, run_id: str) -> list[dict[str, Any]]:
        with self._connect() as con:
            rows = con.execute(
                "SELECT step, epoch, wall_s, metrics_json FROM evals WHERE run_id = ? ORDER BY step",
                (run_id,),
            ).fetchall()
        return [{"step": s, "epoch": e, "wall_s": w, **json.loads(m)} for s, e, w, m in rows]
