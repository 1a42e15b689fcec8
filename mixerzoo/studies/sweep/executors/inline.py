"""The in-process executor (one worker): each run trained in turn in the sweep's own process."""

from __future__ import annotations

import time

from mixerzoo.studies.sweep.config import PlannedRun
from mixerzoo.studies.sweep.executors.base import Job, attempt_outcome
from mixerzoo.studies.sweep.workers import run_one, streaming


def run_inline(todo: list[PlannedRun], job: Job) -> None:
    """Train ``todo`` one after another here; Ctrl-C / SIGTERM reports the run it stopped, then stops."""
    root = str(job.store.root)
    with streaming(job.tracking, job.board):
        for p in todo:
            since = time.time()
            try:
                outcome = run_one(p.config.model_dump_json(), root, job.experiment, job.metric)
            except KeyboardInterrupt:  # recorded as interrupted by execute_run: count it, then stop
                stopped = attempt_outcome(job, p, since)
                if stopped is not None:
                    job.report(p, stopped)
                raise
            job.report(p, outcome)
