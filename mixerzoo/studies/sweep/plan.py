"""What a sweep runs and what it came to: the planned runs still to train, each run's outcome and
the summary line (``runner.py`` runs them).

A run counts as done when its config hash is ``finished`` in the store by the code that would run
it now (``fingerprint.py``); one finished only by other code is *stale*. An attempt in progress
under a live owner is running elsewhere and is not started again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from mixerzoo.registry import count
from mixerzoo.store.records import RunRecord
from mixerzoo.store.results import ResultsStore
from mixerzoo.studies.sweep.config import PlannedRun


@dataclass
class RunOutcome:
    """What a worker reports back: enough for the status line and the summary."""

    config_hash: str
    name: str
    status: str
    run_id: str | None = None
    metric: float | None = None
    wall_s: float | None = None
    error: str | None = None


@dataclass
class SweepSummary:
    """``skipped``: finished before; ``elsewhere``: running under a live owner (not trained here)."""

    experiment: str
    total: int
    skipped: int
    outcomes: list[RunOutcome] = field(default_factory=list)
    wall_s: float = 0.0
    elsewhere: list[str] = field(default_factory=list)
    #: planned runs finished only by other code: reused (``reuse_stale``) or trained again
    stale: int = 0
    reuse_stale: bool = False

    @property
    def finished(self) -> int:
        return sum(o.status == "finished" for o in self.outcomes)

    @property
    def failed(self) -> int:
        """Real failures (an exception, a NaN loss, a dead worker); never an interruption."""
        return sum(o.status == "failed" for o in self.outcomes)

    @property
    def interrupted(self) -> int:
        return sum(o.status not in ("finished", "failed") for o in self.outcomes)

    def line(self) -> str:
        text = (
            f"{count(self.total, 'run')}: {self.skipped} already finished, {self.finished} finished now, "
            f"{self.failed} failed"
        )
        if self.interrupted:
            text += f", {self.interrupted} interrupted (retried by the next run)"
        if self.elsewhere:
            text += f", {len(self.elsewhere)} running elsewhere (not started here)"
        if self.stale:
            text += f"; {count(self.stale, 'run')} {stale_words(self.reuse_stale)}"
        return text


def stale_words(reused: bool) -> str:
    """How stale runs were handled, after their count: reused, or trained again."""
    return "reused from other code (--reuse-stale)" if reused else "made by other code trained again"


def running_elsewhere(store: ResultsStore) -> dict[str, str]:
    """Config hash -> owner, for attempts in progress under a live owner (dead ones are reaped)."""
    return {rec.config_hash: f"pid {a.pid} on {a.host}" for rec, a in store.running()}


def finished_hashes(runs: list[RunRecord]) -> tuple[set[str], set[str]]:
    """Config hashes finished by the current code, and those finished only by other code (stale)."""
    done = [r for r in runs if r.status == "finished"]
    current = {r.config_hash for r in done if not r.stale}
    return current, {r.config_hash for r in done} - current


def pending_runs(
    planned: list[PlannedRun], store: ResultsStore, skip_failed: bool = False, reuse_stale: bool = False
) -> list[PlannedRun]:
    """The planned runs to train now: not finished (by config hash, in any experiment) by the
    current code (or by any code, with ``reuse_stale``), not running under a live owner, and with
    ``skip_failed`` not failed. An interrupted run is no failure: it is always retried."""
    runs = store.runs()
    current, stale = finished_hashes(runs)
    finished = current | stale if reuse_stale else current
    failed = {r.config_hash for r in runs if r.status == "failed"} if skip_failed else set()
    busy = running_elsewhere(store)
    return [p for p in planned if p.config_hash not in finished | failed and p.config_hash not in busy]


def outcome_of(record: RunRecord, metric: str) -> RunOutcome:
    """What the attempt just made (``record.last_attempt``) came to."""
    attempt = record.last_attempt
    status = attempt.outcome if attempt is not None else record.status
    metrics = attempt.metrics if attempt is not None else record.metrics
    text = attempt.error if attempt is not None else record.error
    value = metrics.get(metric)
    return RunOutcome(
        config_hash=record.config_hash,
        name=record.name or "",
        status=status,
        run_id=record.run_id,
        metric=float(value) if isinstance(value, (int, float)) else None,
        wall_s=attempt.wall_s if attempt is not None else record.wall_s,
        error=text.strip().splitlines()[0] if text else None,
    )


class SweepPlan(NamedTuple):
    """A sweep's planned runs sorted: those to train now, the summary so far, the interrupted to redo."""

    todo: list[PlannedRun]
    summary: SweepSummary
    interrupted: int


def plan_sweep(
    planned: list[PlannedRun], store: ResultsStore, tag: str, skip_failed: bool, reuse_stale: bool
) -> SweepPlan:
    """Sort ``planned`` against ``store`` (reaped already): to train, finished, stale, running elsewhere."""
    busy = running_elsewhere(store)
    todo = pending_runs(planned, store, skip_failed, reuse_stale)
    hashes = {p.config_hash for p in planned}
    current, stale = finished_hashes(store.runs())
    finished = (current | stale if reuse_stale else current) & hashes
    interrupted = sum(
        r.status == "interrupted" for r in store.runs(experiment=tag) if r.config_hash in hashes
    )
    elsewhere = [
        f"{p.config.name} ({busy[p.config_hash]})"
        for p in planned
        if p.config_hash in busy and p.config_hash not in finished
    ]
    summary = SweepSummary(
        experiment=tag,
        total=len(planned),
        skipped=len(planned) - len(todo) - len(elsewhere),
        elsewhere=elsewhere,
        stale=len(stale & hashes),
        reuse_stale=reuse_stale,
    )
    return SweepPlan(todo, summary, interrupted)


def plan_lines(plan: SweepPlan, executor: str, workers: int) -> list[str]:
    """What a sweep says before it starts: its counts, the runs running elsewhere, the stale runs."""
    summary, tag = plan.summary, plan.summary.experiment
    lines = [
        f"{tag}: {count(summary.total, 'run')}, {summary.skipped} already finished, {len(plan.todo)} to run"
        + (f" ({plan.interrupted} interrupted runs will be redone)" if plan.interrupted else "")
        + f" [{executor}, {workers} worker{'s' if workers != 1 else ''}]"
    ]
    lines += [f"running elsewhere, not started here: {what}" for what in summary.elsewhere]
    if summary.stale:
        lines.append(
            f"{tag}: {summary.stale} finished runs were made by other code (a mixer, state mixer or "
            f"task edited since, or another mixerzoo version): {stale_words(summary.reuse_stale)}"
        )
    return lines
