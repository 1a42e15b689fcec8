"""What every sweep executor takes and shares: the :class:`Job` (the store, the experiment tag, the
metric, where runs stream live, and :meth:`Job.report`, which takes each run's outcome), and the
outcome of the attempt a sweep made for a run, read back from the store."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mixerzoo.store.errors import NO_SPACE, NoSpace
from mixerzoo.store.records import RunRecord
from mixerzoo.store.results import ResultsStore
from mixerzoo.studies.sweep.config import PlannedRun
from mixerzoo.studies.sweep.plan import RunOutcome, SweepSummary, outcome_of


@dataclass
class Job:
    """A sweep as its executor sees it: what it trains into (``store``, under the tag
    ``experiment``), the ``metric`` it reports, where each run streams live (``tracking``: a
    checked ``tracking.TrackSpec`` or None; ``board``: the ``ProgressBoard`` of the bar over runs,
    or None), and :meth:`report`, which counts each outcome in ``summary``, moves ``bar``, prints
    the run's line with ``emit`` and stamps the ``--set`` ``overrides`` on the attempt."""

    store: ResultsStore
    experiment: str
    metric: str
    summary: SweepSummary
    bar: Any
    emit: Callable[[str], None]
    overrides: dict[str, Any] | None = None
    tracking: Any = None
    board: Any = None

    def report(self, p: PlannedRun, outcome: RunOutcome) -> None:
        """Take one run's outcome; a run that failed for a full disk stops the sweep (:class:`NoSpace`)."""
        summary = self.summary
        summary.outcomes.append(outcome)
        self.bar.update(1)
        if self.board is not None:  # its worker may have died before saying so
            self.board.put((outcome.name, None, None))
        if self.overrides and outcome.run_id:
            self.store.stamp_overrides(outcome.run_id, self.overrides)
        at = f"[{summary.skipped + len(summary.outcomes)}/{summary.total}]"
        wall = f"{outcome.wall_s:.1f} s" if outcome.wall_s is not None else "-"
        if outcome.status == "finished":
            value = f"{outcome.metric:.4f}" if outcome.metric is not None else "-"
            self.emit(f"{at} finished {outcome.name}: {self.metric} {value} ({wall})")
        elif outcome.status == "failed":
            self.emit(f"{at} FAILED {outcome.name}: {outcome.error} ({wall})")
            if (outcome.error or "").startswith(NO_SPACE):  # every later run would fail the same way
                raise NoSpace(
                    f"{summary.experiment}: stopped, {NO_SPACE}; free some space and run it again to resume"
                )
        else:
            self.emit(f"{at} interrupted {outcome.name}: {outcome.error} ({wall})")


def run_of(job: Job, p: PlannedRun) -> RunRecord | None:
    """The record of ``p`` in the job's store under its experiment tag (None before a first attempt)."""
    runs = job.store.runs(experiment=job.experiment)
    return next((r for r in runs if r.config_hash == p.config_hash), None)


def attempt_outcome(job: Job, p: PlannedRun, since: float) -> RunOutcome | None:
    """The outcome of the attempt this sweep made for ``p`` (None when it never started one)."""
    rec = run_of(job, p)
    if rec is None or not rec.attempts or rec.attempts[-1].started_at < since:
        return None
    return outcome_of(rec, job.metric)
