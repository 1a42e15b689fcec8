"""The results store: an embedded SQLite database plus checkpoint files in one directory.

Layout of a results directory::

    results/
      mixerzoo.sqlite                   runs, their attempts and evaluation history
      checkpoints/<run_id>.pt           state dict + config of a run's first attempt
      checkpoints/<run_id>-a<N>.pt      ... of its N-th attempt (load with weights_only=True)

A **run** is one config in one experiment (its *study*): it is identified by (config hash,
experiment) and has exactly one record, however often it is tried. Every run has a **kind**
(:data:`KINDS`): ``task`` (``mixerzoo train``, ``run``), ``lm`` (``train-lm``, its run folder's
checkpoint recorded) or ``computed`` (``theory run``: constructions, bounds, probe studies; its
result JSON recorded as the attempt's ``output``). Each try is an **attempt** (start, end, pid,
host, outcome, error, its own metrics and checkpoint), so a run killed and redone is one run
with two attempts, as a Ray Tune trial restarted in place is one trial. A run's status is
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
A store written by an earlier version (schema 1: one row per attempt; schema 2: no kind per run)
is upgraded in place the first time a writing command opens it (:func:`_upgrade`); a reading
command upgrades a private in-memory copy instead.

Reading never writes (``ResultsStore(read_only=True)``: ``mixerzoo results``, ``plot``,
``report``, ``check``), so a store in a read-only location, or on a full disk, can still be read,
and another program's database is refused untouched. A full disk while a run writes its
checkpoint or its records ends the attempt ``failed`` with :data:`NO_SPACE` as its error.
"""

from __future__ import annotations

import errno
import json
import os
import secrets
import shutil
import socket
import sqlite3
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

from mixerzoo.registry import ConfigError

DB_NAME = "mixerzoo.sqlite"
ENV_VAR = "MIXERZOO_RESULTS"
#: PRAGMA user_version; 0 with a `runs` table = schema 1 (one row per attempt), 2 = runs without a
#: kind (every run a task run) and attempts without an output file
SCHEMA_VERSION = 3

#: what a run trained or computed: a task run (``train``, ``run``), a language-model run
#: (``train-lm``, torchrun included), a computed result (``theory run``: constructions, bounds,
#: probe studies)
KINDS = ("task", "lm", "computed")

#: how often a running attempt refreshes its heartbeat, and how long an attempt on another host
#: may go without one before it counts as dead (same-host owners are checked by pid instead)
HEARTBEAT_S = 30.0
LEASE_S = 600.0

OUTCOMES = ("running", "finished", "failed", "interrupted")
OWNER_DEAD = "interrupted: the process running it ({owner}) ended before the run finished"
#: the error of an attempt that ran out of disk space (a checkpoint or store write)
NO_SPACE = "no space left on device"
#: below this many free bytes, a write that failed without saying why is taken for a full disk
LOW_SPACE = 1 << 20

SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_id          TEXT PRIMARY KEY,
    config_hash     TEXT NOT NULL,
    experiment      TEXT,
    name            TEXT,
    config_json     TEXT NOT NULL,
    status          TEXT NOT NULL
                    CHECK (status IN ('running', 'finished', 'failed', 'interrupted')),
    result_attempt  INTEGER,
    created_at      REAL NOT NULL,
    updated_at      REAL NOT NULL,
    kind            TEXT NOT NULL DEFAULT 'task' CHECK (kind IN ('task', 'lm', 'computed'))
);
CREATE UNIQUE INDEX IF NOT EXISTS runs_identity ON runs (config_hash, ifnull(experiment, ''));
CREATE INDEX IF NOT EXISTS runs_experiment ON runs (experiment);
CREATE INDEX IF NOT EXISTS runs_kind ON runs (kind);
CREATE TABLE IF NOT EXISTS attempts (
    run_id          TEXT NOT NULL REFERENCES runs (run_id),
    attempt         INTEGER NOT NULL,
    outcome         TEXT NOT NULL
                    CHECK (outcome IN ('running', 'finished', 'failed', 'interrupted')),
    started_at      REAL NOT NULL,
    ended_at        REAL,
    heartbeat_at    REAL,
    pid             INTEGER,
    pid_start       TEXT,
    parent_pid      INTEGER,
    host            TEXT,
    error           TEXT,
    metrics_json    TEXT,
    wall_s          REAL,
    params          INTEGER,
    checkpoint      TEXT,
    package_version TEXT,
    legacy_run_id   TEXT,
    output          TEXT,
    PRIMARY KEY (run_id, attempt)
);
CREATE INDEX IF NOT EXISTS attempts_outcome ON attempts (outcome);
CREATE TABLE IF NOT EXISTS evals (
    run_id       TEXT NOT NULL REFERENCES runs (run_id),
    attempt      INTEGER NOT NULL,
    step         INTEGER NOT NULL,
    epoch        INTEGER,
    wall_s       REAL,
    metrics_json TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS evals_run ON evals (run_id, attempt, step);
"""


class StaleAttempt(RuntimeError):
    """A write from an attempt that is no longer running (it was reaped as interrupted)."""


class NoSpace(ConfigError):
    """The disk holding the results store is full: a failed run (exit code 1), not a user mistake."""

    exit_code = 1


def out_of_space(err: BaseException | None) -> bool:
    """Whether ``err``, or an error it was raised from, says the disk is full (``ENOSPC``)."""
    for _ in range(8):
        if err is None:
            return False
        if isinstance(err, NoSpace) or getattr(err, "errno", None) in (errno.ENOSPC, errno.EDQUOT):
            return True
        text = str(err).lower()
        if any(s in text for s in ("no space left on device", "disk is full", "os error 28")):
            return True
        err = err.__cause__ or err.__context__
    return False


def _free_bytes(path: Path) -> int:
    """Free bytes on the file system holding ``path`` (its nearest existing ancestor)."""
    for p in (path, *path.absolute().parents):
        try:
            return shutil.disk_usage(p).free
        except OSError:
            continue
    return LOW_SPACE


def default_results_dir() -> Path:
    """``$MIXERZOO_RESULTS`` if set (and not empty), else ``./results``."""
    return Path(os.environ.get(ENV_VAR, "").strip() or "results")


# -- owners: who runs an attempt, and whether they are still alive ---------------------------
def _proc_stat(pid: int) -> list[str] | None:
    """Fields of ``/proc/<pid>/stat`` after the command name (Linux), or None."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text.rsplit(")", 1)[-1].split()


def process_start(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (Linux), to tell a reused pid apart."""
    fields = _proc_stat(pid)
    return fields[19] if fields is not None and len(fields) > 19 else None


def pid_alive(pid: int, start: str | None = None) -> bool:
    """Whether process ``pid`` (started at ``start``, when known) exists and is not a zombie."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # exists, owned by someone else
    except OSError:
        return False
    fields = _proc_stat(pid)
    if fields is None:
        return True  # no /proc (macOS): the signal test is all we have
    if fields[0] in ("Z", "X"):
        return False
    return start is None or fields[19] == start


@dataclass(frozen=True)
class Owner:
    """The process that runs an attempt, and the sweep that spawned it (if any)."""

    pid: int
    host: str
    pid_start: str | None = None
    parent_pid: int | None = None

    @classmethod
    def current(cls, parent_pid: int | None = None) -> Owner:
        return cls(os.getpid(), socket.gethostname(), process_start(os.getpid()), parent_pid)

    def describe(self) -> str:
        return f"pid {self.pid} on {self.host}"


def owner_dead(
    pid: int | None,
    pid_start: str | None,
    parent_pid: int | None,
    host: str | None,
    heartbeat_at: float | None,
    now: float,
) -> bool:
    """Dead: on this host, the pid or its spawning sweep is gone; elsewhere, the lease expired."""
    if host == socket.gethostname() and pid is not None:
        if not pid_alive(pid, pid_start):
            return True
        return parent_pid is not None and not pid_alive(parent_pid)
    return heartbeat_at is None or now - heartbeat_at > LEASE_S


# -- records ------------------------------------------------------------------------------
@dataclass
class AttemptRecord:
    attempt: int
    outcome: str
    started_at: float
    ended_at: float | None
    pid: int | None
    host: str | None
    error: str | None
    metrics: dict[str, Any]
    wall_s: float | None
    params: int | None
    checkpoint: str | None
    package_version: str | None
    heartbeat_at: float | None = None
    parent_pid: int | None = None
    #: a file the attempt wrote besides its checkpoint (a computed result's JSON)
    output: str | None = None

    def to_json(self) -> dict[str, Any]:
        """One entry of a run's ``attempts`` in ``mixerzoo results --json``."""
        return {
            "attempt": self.attempt,
            "outcome": self.outcome,
            "start": self.started_at,
            "end": self.ended_at,
            "pid": self.pid,
            "host": self.host,
            "error": self.error,
            "wall_s": self.wall_s,
            "checkpoint": self.checkpoint,
            "output": self.output,
        }


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
    attempts: list[AttemptRecord] = field(default_factory=list)
    #: the attempt a caller just made (``execute_run`` sets it); None for a record read as such
    made_attempt: int | None = None
    kind: str = "task"  # one of KINDS
    output: str | None = None  # the result attempt's output file (a computed result's JSON)

    @property
    def study(self) -> str | None:
        """The experiment (sweep, MAD protocol, theory check) the run belongs to; None for a lone run."""
        return self.experiment

    @property
    def last_attempt(self) -> AttemptRecord | None:
        """The attempt ``made_attempt`` names, else the latest one."""
        for a in self.attempts:
            if a.attempt == self.made_attempt:
                return a
        return self.attempts[-1] if self.attempts else None

    def to_json(self) -> dict[str, Any]:
        """The documented ``mixerzoo results --json`` entry: one per run, with its attempts."""
        return {
            "run_id": self.run_id,
            "kind": self.kind,
            "study": self.study,
            "status": self.status,
            "name": self.name,
            "experiment": self.experiment,
            "config": self.config,
            "config_hash": self.config_hash,
            "metrics": self.metrics,
            "checkpoint": self.checkpoint,
            "output": self.output,
            "wall_s": self.wall_s,
            "params": self.params,
            "error": self.error,
            "attempts": [a.to_json() for a in self.attempts],
        }


ATTEMPT_COLUMNS = (
    "run_id, attempt, outcome, started_at, ended_at, pid, host, error, metrics_json, wall_s, params,"
    " checkpoint, package_version, heartbeat_at, parent_pid, output"
)

#: the attempt columns that hold text (the others hold numbers)
TEXT_COLUMNS = set("run_id outcome host error metrics_json checkpoint package_version output".split())


class ResultsStore:
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

    def _make_directory(self, path: Path, parents: bool = False) -> None:
        try:
            path.mkdir(parents=parents, exist_ok=True)
        except OSError as err:
            message = f"results directory {str(path)!r} cannot be made"
            if out_of_space(err):
                raise NoSpace(f"{message}: {NO_SPACE}") from None
            raise ConfigError(f"{message}: {err.strerror or err}") from None

    # -- connections ----------------------------------------------------------------------
    def _fail(self, err: sqlite3.Error) -> ConfigError:
        if out_of_space(err) or (
            "disk I/O error" in str(err) and not self.read_only and _free_bytes(self.root) < LOW_SPACE
        ):
            return NoSpace(f"results database {str(self.db_path)!r} cannot be written: {NO_SPACE}")
        return ConfigError(
            f"results database {str(self.db_path)!r} cannot be used ({err}); "
            "check the file and its permissions, or give another --results"
        )

    def _new_connection(self) -> sqlite3.Connection:
        if not self.read_only:
            return sqlite3.connect(self.db_path, timeout=60.0, isolation_level=None)
        uri = f"file:{quote(str(self.db_path.resolve()))}?mode=ro{'&immutable=1' if self._immutable else ''}"
        return sqlite3.connect(uri, uri=True, timeout=60.0, isolation_level=None)

    @contextmanager
    def _connect(self, write: bool = False):
        """A connection in one transaction: ``BEGIN IMMEDIATE`` for writes (takes the write lock
        up front, so a read-then-write never fails with a busy snapshot), deferred for reads."""
        if write and self.read_only:
            raise ConfigError(f"results store {str(self.root)!r} was opened read-only; it cannot be written")
        if self._memory is not None:
            with self._transaction(self._memory, write):
                yield self._memory
            return
        try:
            con = self._new_connection()
        except sqlite3.Error as err:
            raise self._fail(err) from None
        try:
            with self._transaction(con, write):
                yield con
        finally:
            con.close()

    @contextmanager
    def _transaction(self, con: sqlite3.Connection, write: bool):
        try:
            try:
                con.execute("PRAGMA busy_timeout=60000")
                con.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            except sqlite3.Error as err:
                raise self._fail(err) from None
            try:
                yield con
            except BaseException:
                con.execute("ROLLBACK")
                raise
            try:
                con.execute("COMMIT")
            except sqlite3.Error as err:
                raise self._fail(err) from None
        except sqlite3.DatabaseError as err:
            raise self._fail(err) from None

    def _open_read_only(self) -> None:
        """Check that the file is a mixerzoo store without writing anything, then read it with
        ``mode=ro`` (``immutable=1`` when that cannot work here)."""
        version = self._header_version()  # it may lag behind the WAL, never lead
        if version > SCHEMA_VERSION:
            raise self._newer(version)
        wal = self.db_path.with_name(DB_NAME + "-wal")
        if version == 0 and not (wal.is_file() and wal.stat().st_size > 0):
            self._immutable = True  # nothing beyond the file: identify it without SQLite's side files
        if not self._immutable and not self._readable():
            self._immutable = True  # no side files here (a read-only directory, a full disk)
        self._identify()

    def _readable(self) -> bool:
        """Whether SQLite's ``mode=ro`` works here: it needs its shared-memory side file, which a
        read-only directory or a full disk cannot hold."""
        try:
            con = self._new_connection()
            try:
                con.execute("SELECT count(*) FROM sqlite_master").fetchone()
            finally:
                con.close()
        except sqlite3.OperationalError:
            return False
        except sqlite3.Error:
            return True  # not a database, damaged: the reading itself says so
        return True

    def _identify(self) -> None:
        """A current store is read as it is; a schema-1 or -2 store through a private in-memory copy
        upgraded there; anything else is refused."""
        with self._connect() as con:
            version = con.execute("PRAGMA user_version").fetchone()[0]
            tables = _tables(con)
            if version > SCHEMA_VERSION:
                raise self._newer(version)
            if version == SCHEMA_VERSION and {"runs", "attempts", "evals"} <= tables:
                return
            if not (_is_v2(version, tables) or (version == 0 and _is_v1(tables))):
                raise self._foreign(tables)
            memory = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
            con.backup(memory)
        with self._transaction(memory, write=True):
            _upgrade(memory, version, self.root)
        self._memory = memory

    def _header_version(self) -> int:
        """The database's schema version from its 100-byte header, read as plain bytes: a file
        that is not SQLite is refused before SQLite opens it (and could change it)."""
        try:
            with self.db_path.open("rb") as fh:
                header = fh.read(100)
        except OSError as err:
            raise ConfigError(
                f"results database {str(self.db_path)!r} cannot be read: {err.strerror}"
            ) from None
        if not header:
            raise ConfigError(f"results database {str(self.db_path)!r} is empty: it holds no runs")
        if len(header) < 100 or not header.startswith(b"SQLite format 3\x00"):
            raise ConfigError(
                f"results database {str(self.db_path)!r} cannot be used (file is not a database); "
                "give another --results"
            )
        return int.from_bytes(header[60:64], "big")

    def _newer(self, version: int) -> ConfigError:
        return ConfigError(
            f"results database {str(self.db_path)!r} has schema {version}, newer than "
            f"this mixerzoo's ({SCHEMA_VERSION}); upgrade mixerzoo to read it"
        )

    def _foreign(self, tables: set[str]) -> ConfigError:
        names = ", ".join(sorted(tables)[:5]) or "none"
        return ConfigError(
            f"{str(self.db_path)!r} is not a mixerzoo results store (another program's database? "
            f"its tables: {names}); give another --results"
        )

    def _open_schema(self) -> None:
        """Create the schema in a new (empty) database, or upgrade an earlier schema in place; a
        current store is only read (so a read-only database file still opens for reading), and
        another program's database is refused untouched."""
        try:
            con = sqlite3.connect(self.db_path, timeout=60.0, isolation_level=None)
            try:
                con.execute("PRAGMA busy_timeout=60000")
                if self._schema_is_current(con):
                    return
                if con.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                    con.execute("PRAGMA journal_mode=WAL")
                con.execute("BEGIN IMMEDIATE")
                try:
                    if not self._schema_is_current(con):
                        _upgrade(con, con.execute("PRAGMA user_version").fetchone()[0], self.root)
                    con.execute("COMMIT")
                except BaseException:
                    if con.in_transaction:
                        con.execute("ROLLBACK")
                    raise
            finally:
                con.close()
        except sqlite3.Error as err:
            raise self._fail(err) from None

    def _schema_is_current(self, con) -> bool:
        """True for a current store; False for an empty database or a schema-1 or -2 store (to create
        or upgrade); a newer schema or another program's database is refused."""
        version = con.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise self._newer(version)
        tables = _tables(con)
        if version == SCHEMA_VERSION and {"runs", "attempts", "evals"} <= tables:
            return True
        if (version == 0 and (not tables or _is_v1(tables))) or _is_v2(version, tables):
            return False
        raise self._foreign(tables)

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

    def resolve(self, stored: str | None) -> str | None:
        """A stored checkpoint path as a usable one: root-relative (this version), or an absolute
        or cwd-relative path written by schema 1 when that file exists."""
        if stored is None:
            return None
        p = Path(stored)
        if p.is_absolute():
            return str(p)
        in_root = self.root / p
        if not in_root.exists() and p.exists():
            return str(p)
        return str(in_root)

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
    ) -> str:
        """Begin a new attempt of the run (config_hash, experiment), creating the run (of ``kind``,
        one of :data:`KINDS`) if new."""
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
                " parent_pid, host, package_version) VALUES (?, ?, 'running', ?, ?, ?, ?, ?, ?, ?)",
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
                ),
            )
            _refresh_run(con, run_id, now)
        self._attempt[run_id] = attempt
        return run_id

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

    def _dead(self, con) -> dict[tuple[str, int], str]:
        """(run_id, attempt) -> the error to record, for running attempts whose owner is dead."""
        now = time.time()
        dead = {}
        for run_id, attempt, pid, pid_start, parent, host, beat, started in con.execute(
            "SELECT run_id, attempt, pid, pid_start, parent_pid, host, heartbeat_at, started_at"
            " FROM attempts WHERE outcome = 'running'"
        ):
            if owner_dead(pid, pid_start, parent, host, beat or started, now):
                who = f"pid {pid} on {host}" if pid is not None else "an earlier mixerzoo version"
                if parent is not None:
                    who += f", spawned by sweep pid {parent}"
                dead[(run_id, attempt)] = OWNER_DEAD.format(owner=who)
        return dead

    def reap(self) -> int:
        """Mark running attempts whose owner is dead as ``interrupted``; returns how many.

        Best effort on a store this process may not write (a read-only file): nothing is reaped.
        A read-only handle never writes: its records show such attempts interrupted instead.
        """
        if self.read_only:
            return 0
        try:
            with self._connect() as con:
                dead = self._dead(con)
        except ConfigError:
            return 0
        if not dead:
            return 0
        now = time.time()
        reaped = 0
        try:
            with self._connect(write=True) as con:
                for (run_id, attempt), error in dead.items():
                    cur = con.execute(
                        "UPDATE attempts SET outcome = 'interrupted', error = ?, ended_at = ?"
                        " WHERE run_id = ? AND attempt = ? AND outcome = 'running'",
                        (error, now, run_id, attempt),
                    )
                    if cur.rowcount == 1:
                        reaped += 1
                        _refresh_run(con, run_id, now)
        except ConfigError:
            return 0
        return reaped

    # -- reading ------------------------------------------------------------------------
    def _json(self, text: str | None, what: str) -> dict[str, Any]:
        """A stored JSON object; anything else is one line saying which record is damaged."""
        if not text:
            return {}
        try:
            value = json.loads(text)
        except (TypeError, ValueError):
            value = None
        if not isinstance(value, dict):
            raise ConfigError(
                f"results database {str(self.db_path)!r} is damaged: {what} is not a JSON object "
                f"({str(text)[:60]!r}); fix or delete that record"
            )
        return value

    def _check_row(self, r: tuple) -> None:
        """Numbers and text where the schema puts them (SQLite keeps whatever a hand edit wrote):
        a damaged attempt row is one line here, not a failure somewhere later."""
        for name, value in zip((c.strip() for c in ATTEMPT_COLUMNS.split(",")), r):
            if value is None or isinstance(value, str if name in TEXT_COLUMNS else (int, float)):
                continue
            raise ConfigError(
                f"results database {str(self.db_path)!r} is damaged: run {r[0]} attempt {r[1]} has "
                f"{name} = {str(value)[:40]!r}; fix or delete that record"
            )

    def _attempt_record(self, r: tuple, dead: dict[tuple[str, int], str]) -> AttemptRecord:
        self._check_row(r)
        rec = AttemptRecord(
            attempt=r[1],
            outcome=r[2],
            started_at=r[3],
            ended_at=r[4],
            pid=r[5],
            host=r[6],
            error=r[7],
            metrics=self._json(r[8], f"the metrics of run {r[0]} attempt {r[1]}"),
            wall_s=r[9],
            params=r[10],
            checkpoint=self.resolve(r[11]) if isinstance(r[11], str) else None,
            package_version=r[12],
            heartbeat_at=r[13],
            parent_pid=r[14],
            output=self.resolve(r[15]) if isinstance(r[15], str) else None,
        )
        if (r[0], r[1]) in dead:  # a read-only view of what the reaper would record
            rec.outcome, rec.error, rec.ended_at = "interrupted", dead[(r[0], r[1])], time.time()
        return rec

    def _records(self, where: str = "", args: tuple = ()) -> list[RunRecord]:
        self.reap()
        with self._connect() as con:
            runs = con.execute(
                "SELECT run_id, config_hash, experiment, name, config_json, status, result_attempt,"
                f" created_at, updated_at, kind FROM runs {where} ORDER BY created_at, run_id",
                args,
            ).fetchall()
            attempt_rows = con.execute(
                f"SELECT {', '.join('a.' + c.strip() for c in ATTEMPT_COLUMNS.split(','))}"
                f" FROM attempts a JOIN runs USING (run_id) {where} ORDER BY a.run_id, a.attempt",
                args,
            ).fetchall()
            dead = self._dead(con) if self.read_only else {}
        attempts: dict[str, list[AttemptRecord]] = {}
        for r in attempt_rows:
            attempts.setdefault(r[0], []).append(self._attempt_record(r, dead))
        out = []
        for run_id, chash, experiment, name, config_json, status, result_n, created, updated, kind in runs:
            tries = attempts.get(run_id, [])
            latest = tries[-1] if tries else None
            if status != "finished" and latest is not None:
                status = latest.outcome  # as stored, unless a read-only view reaped it
            result = next((a for a in tries if a.attempt == result_n), None) if status == "finished" else None
            shown = result or latest
            out.append(
                RunRecord(
                    run_id=run_id,
                    status=status,
                    config=self._json(config_json, f"the config of run {run_id}"),
                    config_hash=chash,
                    name=name,
                    experiment=experiment,
                    metrics=dict(result.metrics) if result else {},
                    checkpoint=result.checkpoint if result else None,
                    wall_s=shown.wall_s if shown else None,
                    params=shown.params if shown else None,
                    error=None if status == "finished" or latest is None else latest.error,
                    package_version=shown.package_version if shown else None,
                    created_at=created,
                    updated_at=updated,
                    attempts=tries,
                    kind=kind,
                    output=result.output if result else None,
                )
            )
        return out

    def runs(
        self,
        experiment: str | None = None,
        status: str | None = None,
        kind: str | None = None,
        study: str | None = None,
    ) -> list[RunRecord]:
        """One record per run (never per attempt), optionally of one experiment (``study`` is the
        same filter), status or kind."""
        clauses, args = [], []
        for column, value in (("experiment", experiment), ("experiment", study), ("kind", kind)):
            if value is not None:
                clauses.append(f"{column} = ?")
                args.append(value)
        if status is not None and not self.read_only:
            clauses.append("status = ?")
            args.append(status)
        where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
        records = self._records(where, tuple(args))
        return [r for r in records if status is None or r.status == status]

    def get(self, run_id: str) -> RunRecord | None:
        found = self._records("WHERE run_id = ?", (run_id,))
        return found[0] if found else None

    def finished(self, config_hash: str) -> RunRecord | None:
        """The first finished run with this config hash, in any experiment (to skip redone work)."""
        found = self._records("WHERE config_hash = ? AND status = 'finished'", (config_hash,))
        return found[0] if found else None

    def running(self) -> list[tuple[RunRecord, AttemptRecord]]:
        """Runs with an attempt in progress under a live owner (dead owners are reaped first)."""
        out = []
        for rec in self._records("WHERE run_id IN (SELECT run_id FROM attempts WHERE outcome = 'running')"):
            out += [(rec, a) for a in rec.attempts if a.outcome == "running"]
        return out

    def history(self, run_id: str, attempt: int | None = None) -> list[dict[str, Any]]:
        """Evaluation history of one attempt: by default the one whose result the run shows
        (its latest finished attempt), else its latest attempt."""
        with self._connect() as con:
            if attempt is None:
                row = con.execute(
                    "SELECT CASE WHEN status = 'finished' THEN result_attempt END FROM runs WHERE run_id = ?",
                    (run_id,),
                ).fetchone()
                attempt = row[0] if row is not None and row[0] is not None else None
                if attempt is None:
                    latest = con.execute(
                        "SELECT max(attempt) FROM attempts WHERE run_id = ?", (run_id,)
                    ).fetchone()
                    attempt = latest[0] if latest is not None else None
            rows = con.execute(
                "SELECT step, epoch, wall_s, metrics_json FROM evals WHERE run_id = ? AND attempt = ?"
                " ORDER BY step",
                (run_id, attempt),
            ).fetchall()
        what = f"an evaluation of run {run_id}"
        return [{"step": s, "epoch": e, "wall_s": w, **self._json(m, what)} for s, e, w, m in rows]


def _tables(con) -> set[str]:
    return {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def _is_v1(tables: set[str]) -> bool:
    """Schema 1's layout: ``runs`` and ``evals`` (one row per attempt), no ``attempts`` table."""
    return {"runs", "evals"} <= tables and "attempts" not in tables


def _is_v2(version: int, tables: set[str]) -> bool:
    """Schema 2: runs with attempts, no kind per run."""
    return version == 2 and {"runs", "attempts", "evals"} <= tables


def _upgrade(con, version: int, root: Path) -> None:
    """An empty database, a schema-1 or a schema-2 store to the current schema, in the caller's
    transaction (on the file for a writing command, on a private in-memory copy for a reading one)."""
    if version == 2:
        _migrate_v2(con)
    elif _is_v1(_tables(con)):
        _migrate_v1(con, root)
    else:
        _create_schema(con)
    con.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")


def _migrate_v2(con) -> None:
    """Schema 2 -> 3: every run of schema 2 was a task run; attempts gain an (empty) output file."""
    con.execute(
        "ALTER TABLE runs ADD COLUMN kind TEXT NOT NULL DEFAULT 'task'"
        " CHECK (kind IN ('task', 'lm', 'computed'))"
    )
    con.execute("ALTER TABLE attempts ADD COLUMN output TEXT")
    con.execute("CREATE INDEX IF NOT EXISTS runs_kind ON runs (kind)")


def _create_schema(con) -> None:
    """Every statement of :data:`SCHEMA` in the caller's transaction (``executescript`` would commit it)."""
    for statement in SCHEMA.split(";"):
        if statement.strip():
            con.execute(statement)


def _refresh_run(con, run_id: str, now: float) -> None:
    """The run's status from its attempts: finished once any finished, else the latest outcome."""
    finished = con.execute(
        "SELECT max(attempt) FROM attempts WHERE run_id = ? AND outcome = 'finished'", (run_id,)
    ).fetchone()[0]
    latest = con.execute(
        "SELECT outcome FROM attempts WHERE run_id = ? ORDER BY attempt DESC LIMIT 1", (run_id,)
    ).fetchone()
    status = "finished" if finished is not None else (latest[0] if latest else "running")
    con.execute(
        "UPDATE runs SET status = ?, result_attempt = ?, updated_at = ? WHERE run_id = ?",
        (status, finished, now, run_id),
    )


# -- migration from schema 1 (one row per attempt, cwd-relative checkpoint paths) --------------
V1_INTERRUPTED = "interrupted: the sweep running this config was killed before the run finished"


def _v1_checkpoint(stored: str | None, root: Path) -> str | None:
    """A schema-1 checkpoint path (absolute, or relative to the cwd of the process that wrote it)
    as a schema-2 one: root-relative when the file is in this store's ``checkpoints/``."""
    if not stored:
        return None
    p = Path(stored)
    if (root / "checkpoints" / p.name).is_file():
        return f"checkpoints/{p.name}"
    if p.exists():
        return str(p.resolve())
    return stored  # not found now; resolve() tries it again on every read


def _migrate_v1(con, root: Path) -> None:
    """Schema 1 -> current inside the caller's transaction: rows of one (config hash, experiment)
    become the attempts of one run, in creation order; every eval, metric and checkpoint is kept.

    The run takes the id of its latest finished row (else its latest row), so the checkpoint
    files, named after row ids, keep their names. A ``failed`` row whose error says it was
    interrupted (Ctrl-C, a killed sweep) becomes an ``interrupted`` attempt."""
    for index in ("runs_hash", "runs_experiment", "evals_run"):
        con.execute(f"DROP INDEX IF EXISTS {index}")
    con.execute("ALTER TABLE runs RENAME TO runs_v1")
    con.execute("ALTER TABLE evals RENAME TO evals_v1")
    _create_schema(con)
    rows = con.execute(
        "SELECT run_id, config_hash, name, experiment, status, config_json, metrics_json, wall_s,"
        " params, package_version, error, checkpoint, created_at, updated_at FROM runs_v1"
        " ORDER BY created_at, rowid"
    ).fetchall()
    groups: dict[tuple[str, str | None], list[tuple]] = {}
    for r in rows:
        groups.setdefault((r[1], r[3]), []).append(r)
    for (chash, experiment), group in groups.items():
        finished = [r for r in group if r[4] == "finished"]
        head = (finished or group)[-1]
        run_id = head[0]
        con.execute(
            "INSERT INTO runs (run_id, config_hash, experiment, name, config_json, status, created_at,"
            " updated_at) VALUES (?, ?, ?, ?, ?, 'running', ?, ?)",
            (run_id, chash, experiment, head[2], head[5], group[0][12], max(r[13] for r in group)),
        )
        for n, r in enumerate(group, start=1):
            outcome, error = r[4], r[10]
            if (
                outcome == "failed"
                and error
                and (error.startswith("interrupted") or error.startswith("KeyboardInterrupt"))
            ):
                outcome = "interrupted"
            con.execute(
                "INSERT INTO attempts (run_id, attempt, outcome, started_at, ended_at, heartbeat_at, error,"
                " metrics_json, wall_s, params, checkpoint, package_version, legacy_run_id)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    run_id,
                    n,
                    outcome,
                    r[12],
                    None if outcome == "running" else r[13],
                    r[13],
                    error,
                    r[6],
                    r[7],
                    r[8],
                    _v1_checkpoint(r[11], root) if outcome == "finished" else None,
                    r[9],
                    r[0],
                ),
            )
            con.execute(
                "INSERT INTO evals (run_id, attempt, step, epoch, wall_s, metrics_json)"
                " SELECT ?, ?, step, epoch, wall_s, metrics_json FROM evals_v1 WHERE run_id = ?"
                " ORDER BY rowid",
                (run_id, n, r[0]),
            )
        _refresh_run(con, run_id, max(r[13] for r in group))
    con.execute("DROP TABLE evals_v1")
    con.execute("DROP TABLE runs_v1")
