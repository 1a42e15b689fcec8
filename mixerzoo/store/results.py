"""The results store: an embedded SQLite database plus checkpoint files in one directory.

Layout of a results directory::

    results/
      mixerzoo.sqlite                   runs, their attempts and evaluation history
      checkpoints/<run_id>.pt           state dict + config of a run's first attempt
      checkpoints/<run_id>-a<N>.pt      ... of its N-th attempt (load with weights_only=True)

A **run** is one config in one experiment (its *study*): it is identified by (config hash,
experiment) and has exactly one record, however often it is tried. Every run has a **kind**
(:data:`KINDS`): ``task`` (``mixerzoo train``, ``study run`` of a sweep), ``lm`` (``lm train``, its
run folder's checkpoint recorded) or ``computed`` (``study run`` of a computed, LM or probe study:
constructions, bounds, probe studies; its result JSON recorded as the attempt's ``output``).
Each try is an **attempt** (start, end, pid, host, outcome, error, its own metrics and
checkpoint), so a run killed and redone is one run with two attempts, as a Ray Tune trial
restarted in place is one trial. A run's status is
``finished`` once any attempt finished (its metrics and checkpoint are those of the latest
finished attempt, and it shows no error), else the outcome of its latest attempt: ``running``,
``failed`` (an exception, a NaN loss) or ``interrupted`` (Ctrl-C, SIGTERM, or its process died).
Reports and aggregations count runs, never attempts.

Ownership. A running attempt records its owner: pid (with the process's start time, so a reused
pid is not mistaken for it), the sweep process that spawned it (``parent_pid``), host, and a
heartbeat. Whenever a store is opened or read, attempts whose owner is dead are *reaped*
(marked ``interrupted``): on this host when the pid (or the spawning sweep) is gone, on another
host when the heartbeat is older than :data:`LEASE_S`. A live owner is never reaped, and a
reaped attempt is fenced: a late ``finish_run`` from it is refused (:class:`StaleAttempt`).

Every write is one short ``BEGIN IMMEDIATE`` transaction (WAL mode, busy timeout), so several
processes can share a store and a killed process never leaves a half-written record. Checkpoint
paths are stored relative to the store root, so a store can be moved or opened from anywhere.
A store written by an earlier version (schema 1: one row per attempt; schema 2: no kind per run;
schema 3: no code fingerprint per attempt, so its finished runs count as stale) is upgraded in
place the first time a writing command opens it (``store/schema.py``); a reading command
upgrades a private in-memory copy instead.

Reading never writes (``ResultsStore(read_only=True)``: ``mixerzoo results``, ``plot``,
``report``, ``check``), so a store in a read-only location, or on a full disk, can still be read,
and another program's database is refused untouched. A full disk while a run writes its
checkpoint or its records ends the attempt ``failed`` with :data:`NO_SPACE` as its error.

This module holds :class:`ResultsStore` (its constructor, checkpoint paths and the writes of a
run's attempts) and is the one callers import. Beside it: ``store/schema.py`` (the schema and its
migrations), ``store/database.py`` (opening the database: header check, read-only and in-memory
reading, transactions), ``store/reading.py`` (records read back, dead owners reaped),
``store/records.py`` (:class:`RunRecord`, :class:`AttemptRecord`), ``store/owners.py`` (who runs
an attempt, and whether they are alive) and ``store/errors.py`` (a full disk, a fenced attempt).
"""

from __future__ import annotations

import json
import secrets
import sqlite3
import time
from pathlib import Path
from typing import Any

from mixerzoo.registry import ConfigError
from mixerzoo.store.database import DB_NAME, default_results_dir
from mixerzoo.store.errors import StaleAttempt
from mixerzoo.store.owners import Owner
from mixerzoo.store.reading import StoreReader
from mixerzoo.store.schema import KINDS, _refresh_run


class ResultsStore(StoreReader):
    """Runs, their attempts, metrics history and checkpoints under one directory.

    ``read_only=True`` (the reading commands: ``results``, ``plot``, ``report``, ``check``)
    never creates, migrates or writes anything: a directory or database that does not exist is
    reported (so a typo'd ``--results`` is not silently made); a file that is not a mixerzoo
    store is refused untouched (one that is not SQLite before SQLite opens it); the database is
    opened with SQLite's ``mode=ro`` (``immutable=1`` where its side files cannot be made: a
    read-only directory, a full disk); attempts whose owner is dead are shown ``interrupted``
    without being written so; a store of an earlier schema is upgraded in memory only. In a writable
    directory SQLite may leave its shared-memory side files (``-shm``, an empty ``-wal``) next
    to the database it read; the database file itself is never written.
    """

    def __init__(self, root: str | Path | None = None, create: bool = True, read_only: bool = False) -> None:
        if root is not None and not str(root).strip():
            raise ConfigError("results directory '': an empty path; name a directory")
        self.root = Path(root) if root is not None else default_results_dir()
        self.checkpoint_dir = self.root / "checkpoints"
        self.db_path = self.root / DB_NAME
        self.read_only = read_only
        self._attempt: dict[str, int] = {}  # run_id -> the attempt this handle started
        self._immutable = False  # read-only and SQLite's side files cannot be made here
        self._memory: sqlite3.Connection | None = None  # an earlier schema upgraded in memory
        if self.root.exists() and not self.root.is_dir():
            raise ConfigError(f"results directory {str(self.root)!r} is a file, not a directory")
        if self.db_path.exists() and not self.db_path.is_file():
            raise ConfigError(f"results database {str(self.db_path)!r} is not a file")
        if read_only or not create:
            if not self.root.is_dir():
                raise ConfigError(f"results directory {str(self.root)!r} does not exist")
            if not self.db_path.is_file():
                raise ConfigError(f"{str(self.root)!r} holds no results store (no {DB_NAME})")
        if read_only:
            self._open_read_only()
            return
        if self.checkpoint_dir.exists() and not self.checkpoint_dir.is_dir():
            raise ConfigError(
                f"{str(self.checkpoint_dir)!r} is a file, not a directory: the results store keeps its "
                "checkpoints there; move the file away or give another --results"
            )
        self._make_directory(self.root, parents=True)
        self._open_schema()
        self._make_directory(self.checkpoint_dir)
        self.reap()

    # -- paths --------------------------------------------------------------------------
    def checkpoint_path(self, run_id: str, attempt: int | None = None) -> Path:
        """Where ``attempt`` (default: the one this handle started, else 1) saves its checkpoint."""
        n = attempt or self._attempt.get(run_id, 1)
        return self.checkpoint_dir / (f"{run_id}.pt" if n == 1 else f"{run_id}-a{n}.pt")

    def _store_path(self, path: str | Path | None) -> str | None:
        """A checkpoint path as stored: relative to the root when inside it, else absolute."""
        if path is None:
            return None
        p = Path(path).resolve()
        try:
            return p.relative_to(self.root.resolve()).as_posix()
        except ValueError:
            return str(p)

    # -- writing ------------------------------------------------------------------------
    def start_run(
        self,
        config: dict[str, Any],
        config_hash: str,
        name: str | None = None,
        experiment: str | None = None,
        package_version: str | None = None,
        owner: Owner | None = None,
        kind: str = "task",
        code: str | None = None,
        overrides: dict[str, Any] | None = None,
    ) -> str:
        """Begin a new attempt of the run (config_hash, experiment), creating the run (of ``kind``,
        one of :data:`KINDS`) if new. ``code``: the fingerprint of the code that makes the attempt
        (``fingerprint.py``); ``overrides``: the ``--set`` overrides the config was made with."""
        if kind not in KINDS:
            raise ValueError(f"kind {kind!r}: allowed: {', '.join(KINDS)}")
        owner = owner or Owner.current()
        now = time.time()
        with self._connect(write=True) as con:
            row = con.execute(
                "SELECT run_id FROM runs WHERE config_hash = ? AND experiment IS ?", (config_hash, experiment)
            ).fetchone()
            if row is None:
                run_id = f"{config_hash[:12]}-{secrets.token_hex(3)}"
                con.execute(
                    "INSERT INTO runs (run_id, config_hash, experiment, name, config_json, status,"
                    " created_at, updated_at, kind) VALUES (?, ?, ?, ?, ?, 'running', ?, ?, ?)",
                    (run_id, config_hash, experiment, name, json.dumps(config), now, now, kind),
                )
            else:
                run_id = row[0]
            attempt = con.execute(
                "SELECT ifnull(max(attempt), 0) + 1 FROM attempts WHERE run_id = ?", (run_id,)
            ).fetchone()[0]
            con.execute(
                "INSERT INTO attempts (run_id, attempt, outcome, started_at, heartbeat_at, pid, pid_start,"
                " parent_pid, host, package_version, code, overrides_json)"
                " VALUES (?, ?, 'running', ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    run_id,
                    attempt,
                    now,
                    now,
                    owner.pid,
                    owner.pid_start,
                    owner.parent_pid,
                    owner.host,
                    package_version,
                    code,
                    json.dumps(overrides) if overrides else None,
                ),
            )
            _refresh_run(con, run_id, now)
        self._attempt[run_id] = attempt
        return run_id

    def stamp_overrides(self, run_id: str, overrides: dict[str, Any], attempt: int | None = None) -> None:
        """Record the ``--set`` overrides ``attempt`` (default: the latest) was made with, for a
        caller that learns of the attempt after it started (a sweep, from its workers' outcomes)."""
        with self._connect(write=True) as con:
            n = self._which(con, run_id, attempt)
            con.execute(
                "UPDATE attempts SET overrides_json = ? WHERE run_id = ? AND attempt = ?",
                (json.dumps(overrides) if overrides else None, run_id, n),
            )

    def _which(self, con, run_id: str, attempt: int | None) -> int:
        if attempt is not None:
            return attempt
        if run_id in self._attempt:
            return self._attempt[run_id]
        row = con.execute("SELECT max(attempt) FROM attempts WHERE run_id = ?", (run_id,)).fetchone()
        if row is None or row[0] is None:
            raise KeyError(f"no run {run_id!r} in {self.root}")
        return row[0]

    def current_attempt(self, run_id: str) -> int:
        """The attempt this handle started for ``run_id`` (else the latest)."""
        with self._connect() as con:
            return self._which(con, run_id, None)

    def log_eval(
        self,
        run_id: str,
        step: int,
        epoch: int | None,
        wall_s: float,
        metrics: dict,
        attempt: int | None = None,
    ) -> None:
        now = time.time()
        with self._connect(write=True) as con:
            n = self._which(con, run_id, attempt)
            con.execute(
                "INSERT INTO evals (run_id, attempt, step, epoch, wall_s, metrics_json)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (run_id, n, step, epoch, wall_s, json.dumps(metrics)),
            )
            con.execute(
                "UPDATE attempts SET heartbeat_at = ? WHERE run_id = ? AND attempt = ?"
                " AND outcome = 'running'",
                (now, run_id, n),
            )
            con.execute("UPDATE runs SET updated_at = ? WHERE run_id = ?", (now, run_id))

    def heartbeat(self, run_id: str, attempt: int | None = None) -> bool:
        """Refresh the attempt's lease; False when it is no longer running (reaped or ended)."""
        with self._connect(write=True) as con:
            n = self._which(con, run_id, attempt)
            cur = con.execute(
                "UPDATE attempts SET heartbeat_at = ? WHERE run_id = ? AND attempt = ?"
                " AND outcome = 'running'",
                (time.time(), run_id, n),
            )
            return cur.rowcount == 1

    def finish_run(
        self,
        run_id: str,
        metrics: dict,
        wall_s: float,
        params: int,
        checkpoint: str | Path | None,
        attempt: int | None = None,
        output: str | Path | None = None,
    ) -> None:
        """End the attempt as ``finished``; the run then shows its metrics and no error.
        ``output``: a file the attempt wrote besides its checkpoint (stored like a checkpoint path).

        Raises :class:`StaleAttempt` when the attempt was reaped meanwhile (its owner was judged
        dead): a fenced attempt never overwrites the run.
        """
        now = time.time()
        with self._connect(write=True) as con:
            n = self._which(con, run_id, attempt)
            cur = con.execute(
                "UPDATE attempts SET outcome = 'finished', error = NULL, metrics_json = ?, wall_s = ?,"
                " params = ?, checkpoint = ?, output = ?, ended_at = ? WHERE run_id = ? AND attempt = ?"
                " AND outcome = 'running'",
                (
                    json.dumps(metrics),
                    wall_s,
                    params,
                    self._store_path(checkpoint),
                    self._store_path(output),
                    now,
                    run_id,
                    n,
                ),
            )
            if cur.rowcount != 1:
                raise StaleAttempt(f"attempt {n} of run {run_id} is no longer running; not recorded")
            _refresh_run(con, run_id, now)

    def fail_run(
        self,
        run_id: str,
        error: str,
        wall_s: float | None = None,
        outcome: str = "failed",
        attempt: int | None = None,
        overrule_reaper: bool = False,
    ) -> bool:
        """End the attempt as ``failed`` (or ``interrupted``) with its error.

        Only a running attempt is ended (False otherwise); ``overrule_reaper`` also rewrites one
        the reaper already marked interrupted (a sweep that knows its worker died of a crash).
        """
        if outcome not in ("failed", "interrupted"):
            raise ValueError(f"outcome {outcome!r}: allowed: failed, interrupted")
        now = time.time()
        allowed = "('running', 'interrupted')" if overrule_reaper else "('running')"
        with self._connect(write=True) as con:
            n = self._which(con, run_id, attempt)
            cur = con.execute(
                f"UPDATE attempts SET outcome = ?, error = ?, wall_s = ?, ended_at = ?"
                f" WHERE run_id = ? AND attempt = ? AND outcome IN {allowed}",
                (outcome, error, wall_s, now, run_id, n),
            )
            if cur.rowcount == 1:
                _refresh_run(con, run_id, now)
            return cur.rowcount == 1
