"""The records the results store hands out: one :class:`RunRecord` per run, with its attempts.

Owns their fields and their ``mixerzoo results --json`` form (the documented output).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


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
    #: the fingerprint of the code that made it (``fingerprint.py``); None: unknown code
    code: str | None = None
    #: the ``--set`` overrides it was made with (dotted path -> value); {} when none
    overrides: dict[str, Any] = field(default_factory=dict)

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
            "code": self.code,
            "overrides": self.overrides,
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
    code: str | None = None  # the code fingerprint of the attempt whose result it shows
    overrides: dict[str, Any] = field(default_factory=dict)  # that attempt's --set overrides

    @property
    def stale(self) -> bool:
        """A finished run made by other code than the current code would use for its config
        (``fingerprint.py``); a run that recorded no fingerprint counts as stale. Only task runs
        are compared: a language-model or computed run is never reused by a later one."""
        from mixerzoo.store.fingerprint import is_stale

        return self.status == "finished" and self.kind == "task" and is_stale(self.code, self.config)

    def attempt_stale(self, attempt: AttemptRecord) -> bool:
        """A finished attempt of a task run made by other code than the current code."""
        from mixerzoo.store.fingerprint import is_stale

        return attempt.outcome == "finished" and self.kind == "task" and is_stale(attempt.code, self.config)

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
            "code": self.code,
            "stale": self.stale,
            "overrides": self.overrides,
            "attempts": [{**a.to_json(), "stale": self.attempt_stale(a)} for a in self.attempts],
        }
