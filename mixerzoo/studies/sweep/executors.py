"""The executors' bookkeeping: a local pool round (collecting, stopping, recording the attempts of a
dead worker), and Ray (its session, and recording a run a Ray worker trained).

``studies/sweep/runner.py`` runs the executors (and re-exports these names).
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from mixerzoo.registry import ConfigError
from mixerzoo.runs.task import signal_handlers
from mixerzoo.store.records import RunRecord
from mixerzoo.store.results import ResultsStore
from mixerzoo.studies.sweep.config import PlannedRun
from mixerzoo.studies.sweep.plan import RunOutcome, outcome_of

WORKER_DIED = "worker process died (killed or out of memory)"


@dataclass
class _Job:
    """What an executor records and reports into: the store, the experiment tag, the metric, the reporter."""

    store: ResultsStore
    experiment: str
    metric: str
    report: Callable[[PlannedRun, RunOutcome], None]


@dataclass
class _Round:
    """One process pool of a local sweep: its futures (-> planned run), start time, and whether it broke."""

    pool: ProcessPoolExecutor
    futures: dict[Any, PlannedRun]
    started: float
    broken: bool = False


def _collect(job: _Job, rnd: _Round, remaining: list[PlannedRun]) -> None:
    """Report each run of the round as it ends, until all have or the pool breaks."""
    while rnd.futures:
        done, _ = wait(list(rnd.futures), return_when=FIRST_COMPLETED)
        for fut in done:
            p = rnd.futures.pop(fut)
            try:
                outcome = fut.result()
            except BrokenProcessPool:
                rnd.broken = True
                continue
            except KeyboardInterrupt:  # only this worker was stopped: recorded, go on
                outcome = _attempt_outcome(job.store, p, job.experiment, job.metric, rnd.started)
            remaining.remove(p)
            if outcome is not None:
                job.report(p, outcome)
        if rnd.broken:
            break


def _stop_pool(job: _Job, rnd: _Round) -> None:
    """On Ctrl-C / SIGTERM to the sweep: stop the workers, wait for them, report the runs they ended."""
    # Stop the workers too (a terminal's Ctrl-C reaches them already; a SIGTERM to the sweep alone
    # does not), so their attempts end `interrupted` now instead of the shutdown below waiting for
    # them to finish.
    for proc in list((getattr(rnd.pool, "_processes", None) or {}).values()):
        if proc.is_alive():
            proc.terminate()
    # A second Ctrl-C / SIGTERM now (pressing Ctrl-C twice; `timeout` forwarding a signal that was
    # also sent directly) would cut the shutdown short: the interrupted runs went unreported, and
    # the pool's manager thread could die on a closed pipe, leaving the workers without exit
    # sentinels and the sweep hanging at exit. Ignore it meanwhile.
    with signal_handlers(signal.SIG_IGN, signal.SIGINT, signal.SIGTERM):
        rnd.pool.shutdown(wait=True, cancel_futures=True)
        for p in rnd.futures.values():
            stopped = _attempt_outcome(job.store, p, job.experiment, job.metric, rnd.started)
            if stopped is not None:
                job.report(p, stopped)


def _fail_dead_attempts(job: _Job, remaining: list[PlannedRun], pool_started: float) -> None:
    """After a worker died (killed, out of memory) and took the pool down: the attempts that pool
    started and did not end are recorded as failed and reported; the runs not yet started remain."""
    store = job.store
    for p in list(remaining):
        rec = _run_of(store, p, job.experiment)
        attempt = rec.attempts[-1] if rec is not None and rec.attempts else None
        if attempt is None or attempt.started_at < pool_started:
            continue
        if attempt.outcome in ("running", "interrupted"):
            store.fail_run(rec.run_id, WORKER_DIED, attempt=attempt.attempt, overrule_reaper=True)
        remaining.remove(p)
        job.report(p, outcome_of(store.get(rec.run_id), job.metric))


def _run_of(store: ResultsStore, p: PlannedRun, experiment: str) -> RunRecord | None:
    return next((r for r in store.runs(experiment=experiment) if r.config_hash == p.config_hash), None)


def _attempt_outcome(
    store: ResultsStore, p: PlannedRun, experiment: str, metric: str, since: float
) -> RunOutcome | None:
    """The outcome of the attempt this sweep made for ``p`` (None when it never started one)."""
    rec = _run_of(store, p, experiment)
    if rec is None or not rec.attempts or rec.attempts[-1].started_at < since:
        return None
    return outcome_of(rec, metric)


def import_ray():
    try:
        import ray
    except ImportError:
        raise ConfigError(
            "the ray executor needs Ray: pip install 'mixerzoo[ray]' (or pip install 'ray[default]')"
        ) from None
    return ray


@contextmanager
def ray_session(ray, address: str | None) -> Iterator[None]:
    """Ray initialised for the block: a private local instance sized to this machine, or the
    cluster at ``address`` (its workers need mixerzoo and torch installed); shut down after the
    block when it was started here (an instance the caller started is left running)."""
    if ray.is_initialized():
        yield
        return
    if address is None:
        ray.init(num_cpus=os.cpu_count() or 1, include_dashboard=False, log_to_driver=False)
    else:
        try:
            ray.init(address=address)
        except ConnectionError as err:
            reason = (str(err).splitlines() or [type(err).__name__])[0][:200]
            raise ConfigError(f"--address {address!r}: cannot reach a Ray cluster there ({reason})") from None
    try:
        yield
    finally:
        ray.shutdown()


def import_run(store: ResultsStore, payload: dict[str, Any], experiment: str, metric: str) -> RunOutcome:
    """Record a run trained elsewhere (a Ray worker) in this store: start, evals, checkpoint, end."""
    rec = payload["record"]
    if rec is None:
        return payload["outcome"]
    made = rec["attempts"][-1] if rec.get("attempts") else {}
    run_id = store.start_run(
        rec["config"],
        rec["config_hash"],
        rec["name"],
        experiment,
        payload["package_version"],
        code=made.get("code"),
        overrides=made.get("overrides"),
    )
    attempt = store.current_attempt(run_id)
    for h in payload["history"]:
        metrics = {k: v for k, v in h.items() if k not in ("step", "epoch", "wall_s")}
        store.log_eval(run_id, h["step"], h["epoch"], h["wall_s"] or 0.0, metrics, attempt=attempt)
    if rec["status"] == "finished":
        ckpt = None
        if payload["checkpoint"] is not None:
            ckpt = store.checkpoint_path(run_id, attempt)
            tmp = ckpt.with_suffix(".pt.tmp")
            try:
                tmp.write_bytes(payload["checkpoint"])
                os.replace(tmp, ckpt)
            except BaseException:
                tmp.unlink(missing_ok=True)
                store.fail_run(run_id, "could not write the checkpoint sent back by Ray", attempt=attempt)
                raise
        store.finish_run(
            run_id, rec["metrics"], rec["wall_s"] or 0.0, rec["params"] or 0, ckpt, attempt=attempt
        )
    else:
        outcome = "interrupted" if rec["status"] == "interrupted" else "failed"
        store.fail_run(run_id, rec["error"] or outcome, rec["wall_s"], outcome=outcome, attempt=attempt)
    record = store.get(run_id)
    record.made_attempt = attempt
    return outcome_of(record, metric)
