"""Reading the results store back: one record per run, with its attempts and evaluation history.

Owns the queries behind ``runs``, ``get``, ``finished``, ``running`` and ``history``, the check of
every stored row (a damaged, hand-edited record is one line, not a failure somewhere later), the
resolution of stored checkpoint paths, and the reaping done before every read: running attempts
whose owner is dead are marked ``interrupted`` (a read-only handle only shows them so).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from mixerzoo.registry import ConfigError
from mixerzoo.store.database import StoreDatabase
from mixerzoo.store.owners import OWNER_DEAD, owner_dead
from mixerzoo.store.records import AttemptRecord, RunRecord
from mixerzoo.store.schema import _refresh_run

ATTEMPT_COLUMNS = (
    "run_id, attempt, outcome, started_at, ended_at, pid, host, error, metrics_json, wall_s, params,"
    " checkpoint, package_version, heartbeat_at, parent_pid, output, code, overrides_json"
)

#: the attempt columns that hold text (the others hold numbers)
TEXT_COLUMNS = set(
    "run_id outcome host error metrics_json checkpoint package_version output code overrides_json".split()
)


class StoreReader(StoreDatabase):
    """The reading side of :class:`~mixerzoo.store.results.ResultsStore` (and its reaper)."""

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
            code=r[16],
            overrides=self._json(r[17], f"the overrides of run {r[0]} attempt {r[1]}"),
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
                    code=shown.code if shown else None,
                    overrides=dict(shown.overrides) if shown else {},
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
