"""The results store's schema (version :data:`SCHEMA_VERSION`) and its migrations.

Owns the SQL of the three tables (``runs``, ``attempts``, ``evals``), how a run's status follows
from its attempts (:func:`_refresh_run`), and the upgrade of an empty database, a schema-1 store
(one row per attempt) or a schema-2 store (no kind per run) to the current schema, inside the
caller's transaction: on the file for a writing command, on a private in-memory copy for a
reading one (``store/database.py``).
"""

from __future__ import annotations

from pathlib import Path

#: PRAGMA user_version; 0 with a `runs` table = schema 1 (one row per attempt), 2 = runs without a
#: kind (every run a task run) and attempts without an output file, 3 = attempts without the
#: fingerprint of the code that made them (``fingerprint.py``) and without their ``--set`` overrides
SCHEMA_VERSION = 4

#: what a run trained or computed: a task run (``train``, ``study run`` of a sweep), a
#: language-model run (``lm train``, torchrun included), a computed result (``study run`` of a
#: computed study: constructions, bounds, probe studies)
KINDS = ("task", "lm", "computed")

OUTCOMES = ("running", "finished", "failed", "interrupted")

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
    code            TEXT,
    overrides_json  TEXT,
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


def _tables(con) -> set[str]:
    return {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def _is_v1(tables: set[str]) -> bool:
    """Schema 1's layout: ``runs`` and ``evals`` (one row per attempt), no ``attempts`` table."""
    return {"runs", "evals"} <= tables and "attempts" not in tables


def _is_v2(version: int, tables: set[str]) -> bool:
    """Schema 2 or 3: runs with attempts, an earlier layout that :func:`_upgrade` brings up to date."""
    return version in (2, 3) and {"runs", "attempts", "evals"} <= tables


def _upgrade(con, version: int, root: Path) -> None:
    """An empty database, a schema-1, -2 or -3 store to the current schema, in the caller's
    transaction (on the file for a writing command, on a private in-memory copy for a reading one)."""
    if version == 2:
        _migrate_v2(con)
    if version in (2, 3):
        _migrate_v3(con)
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


def _migrate_v3(con) -> None:
    """Schema 3 -> 4: attempts gain the code fingerprint and the overrides they were made with;
    the attempts already stored have neither (made by unknown code: stale)."""
    con.execute("ALTER TABLE attempts ADD COLUMN code TEXT")
    con.execute("ALTER TABLE attempts ADD COLUMN overrides_json TEXT")


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
    for (chash, experiment), group in _v1_groups(con).items():
        _migrate_v1_run(con, root, chash, experiment, group)
    con.execute("DROP TABLE evals_v1")
    con.execute("DROP TABLE runs_v1")


def _v1_groups(con) -> dict[tuple[str, str | None], list[tuple]]:
    """The rows of ``runs_v1`` by (config hash, experiment), each group in creation order."""
    rows = con.execute(
        "SELECT run_id, config_hash, name, experiment, status, config_json, metrics_json, wall_s,"
        " params, package_version, error, checkpoint, created_at, updated_at FROM runs_v1"
        " ORDER BY created_at, rowid"
    ).fetchall()
    groups: dict[tuple[str, str | None], list[tuple]] = {}
    for r in rows:
        groups.setdefault((r[1], r[3]), []).append(r)
    return groups


def _migrate_v1_run(con, root: Path, chash: str, experiment: str | None, group: list[tuple]) -> None:
    """One group of schema-1 rows as one run, its rows as the run's attempts with their evals."""
    finished = [r for r in group if r[4] == "finished"]
    head = (finished or group)[-1]
    run_id = head[0]
    con.execute(
        "INSERT INTO runs (run_id, config_hash, experiment, name, config_json, status, created_at,"
        " updated_at) VALUES (?, ?, ?, ?, ?, 'running', ?, ?)",
        (run_id, chash, experiment, head[2], head[5], group[0][12], max(r[13] for r in group)),
    )
    for n, r in enumerate(group, start=1):
        _migrate_v1_attempt(con, root, run_id, n, r)
    _refresh_run(con, run_id, max(r[13] for r in group))


def _v1_outcome(status: str, error: str | None) -> str:
    """A schema-1 row's status as an attempt outcome: a failure that was an interrupt is one."""
    if (
        status == "failed"
        and error
        and (error.startswith("interrupted") or error.startswith("KeyboardInterrupt"))
    ):
        return "interrupted"
    return status


def _migrate_v1_attempt(con, root: Path, run_id: str, n: int, r: tuple) -> None:
    """Schema-1 row ``r`` as attempt ``n`` of run ``run_id``, with the evals it logged."""
    outcome, error = _v1_outcome(r[4], r[10]), r[10]
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
