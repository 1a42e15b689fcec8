"""The local executor: a sweep's runs trained in N spawned worker processes on this machine.

The sweep process's side of the pool: how many workers (``--workers N``, or ``--runs-per-gpu K``
per visible GPU), their threads and CUDA devices, and rounds of a process pool: each run reported
as it ends, the workers stopped at Ctrl-C / SIGTERM, and after a worker died (killed, out of
memory) and took its pool down, its attempts recorded as failed and the runs not yet started
given to a fresh pool. The workers themselves run ``studies/sweep/workers.py``.
"""

from __future__ import annotations

import os
import signal
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Any

from mixerzoo.registry import ConfigError
from mixerzoo.runs.task import signal_handlers
from mixerzoo.studies.sweep.config import PlannedRun
from mixerzoo.studies.sweep.executors.base import Job, attempt_outcome, run_of
from mixerzoo.studies.sweep.plan import outcome_of
from mixerzoo.studies.sweep.workers import init_worker, run_one

WORKER_DIED = "worker process died (killed or out of memory)"
#: one run of a pool, with the sweep it belongs to
Task = tuple[Job, PlannedRun]


# -- the workers: how many, their threads and devices --------------------------------------
def cuda_device_count() -> int:
    """CUDA devices visible to this process (0 without CUDA)."""
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def local_workers(workers: int, runs_per_gpu: int | None, gpus: int) -> int:
    """Worker processes of a local sweep: ``workers``, or with ``runs_per_gpu`` K, K per visible GPU."""
    if runs_per_gpu is None:
        return workers
    if workers != 1:
        raise ConfigError("--workers and --runs-per-gpu: give one of them (K runs per GPU sets the workers)")
    if gpus == 0:
        raise ConfigError("--runs-per-gpu: no CUDA device is visible here; use --workers N on the CPU")
    return gpus * runs_per_gpu


def gpu_slots(workers: int, gpus: int) -> list[int] | None:
    """The CUDA device of each local worker, round robin (worker i on cuda:i mod gpus); None without
    a GPU. With K runs per GPU (workers = gpus x K) every GPU takes K workers."""
    return [i % gpus for i in range(workers)] if gpus else None


def threads_per_worker(workers: int) -> int:
    """Cores split evenly between workers, so N processes do not oversubscribe the machine."""
    return max(1, (os.cpu_count() or 1) // max(1, workers))


# -- the pool ---------------------------------------------------------------------------------
@dataclass
class _Round:
    """One process pool of a local sweep: its futures (-> job, planned run), start time, whether it broke."""

    pool: ProcessPoolExecutor
    futures: dict[Any, Task]
    started: float
    broken: bool = False


def run_pool(todo: list[PlannedRun], job: Job, workers: int) -> None:
    """Train ``todo`` in ``workers`` spawned processes; a pool that a dead worker broke is replaced."""
    run_pools([(job, p) for p in todo], workers)


def run_pools(tasks: list[Task], workers: int) -> None:
    """Train the runs of several sweeps, each ``(job, run)`` reported to its own job (its store tag,
    its counts), in one pool of ``workers`` processes: a worker freed by one sweep's run takes the
    next run of any, in the order given. The first job's live tracking and progress board serve
    all (the scorecard's items share none)."""
    from mixerzoo.runs.user_code import worker_modules

    remaining = list(tasks)
    modules = worker_modules([p.config for _, p in tasks], "local")
    while remaining:
        pool_started = time.time()
        if _pool_round(remaining, workers, modules, pool_started):
            _fail_dead_attempts(remaining, pool_started)


def _pool_round(remaining: list[Task], workers: int, modules, started: float) -> bool:
    """Run ``remaining`` in a fresh pool, removing each run as it ends; True when a dead worker broke it."""
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    slots = _device_queue(ctx, min(workers, len(remaining)))
    first = remaining[0][0]
    live, stop_progress = _worker_live(ctx, first)
    pool = ProcessPoolExecutor(
        max_workers=min(workers, len(remaining)),
        mp_context=ctx,
        initializer=init_worker,
        initargs=(threads_per_worker(workers), os.getpid(), slots, live),
    )
    root = str(first.store.root)
    futures = {_submit(pool, task, root, modules): task for task in remaining}
    rnd = _Round(pool, futures, started)
    try:
        _collect(rnd, remaining)
    except BaseException:
        _stop_pool(rnd)
        raise
    finally:
        pool.shutdown(wait=not rnd.broken, cancel_futures=True)
        stop_progress()
    return rnd.broken


def _submit(pool: ProcessPoolExecutor, task: Task, root: str, modules):
    job, p = task
    return pool.submit(run_one, p.config.model_dump_json(), root, job.experiment, job.metric, modules)


def _worker_live(ctx, job: Job):
    """What pool workers stream to: the job's tracking spec and a queue the sweep's progress board
    reads (a daemon thread); and the function that stops that reading."""
    if job.board is None:
        return (job.tracking, None), lambda: None
    q = ctx.Queue()
    return (job.tracking, q), job.board.drain(q)


def _device_queue(ctx, workers: int):
    """A queue holding each worker's CUDA device (:func:`gpu_slots`), one taken as each starts; None
    without a GPU."""
    devices = gpu_slots(workers, cuda_device_count())
    if devices is None:
        return None
    slots = ctx.Queue()
    for gpu in devices:
        slots.put(gpu)
    return slots


def _collect(rnd: _Round, remaining: list[Task]) -> None:
    """Report each run of the round as it ends, until all have or the pool breaks."""
    while rnd.futures:
        done, _ = wait(list(rnd.futures), return_when=FIRST_COMPLETED)
        for fut in done:
            task = rnd.futures.pop(fut)
            job, p = task
            try:
                outcome = fut.result()
            except BrokenProcessPool:
                rnd.broken = True
                continue
            except KeyboardInterrupt:  # only this worker was stopped: recorded, go on
                outcome = attempt_outcome(job, p, rnd.started)
            remaining.remove(task)
            if outcome is not None:
                job.report(p, outcome)
        if rnd.broken:
            break


def _stop_pool(rnd: _Round) -> None:
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
        for job, p in rnd.futures.values():
            stopped = attempt_outcome(job, p, rnd.started)
            if stopped is not None:
                job.report(p, stopped)


def _fail_dead_attempts(remaining: list[Task], pool_started: float) -> None:
    """After a worker died (killed, out of memory) and took the pool down: the attempts that pool
    started and did not end are recorded as failed and reported; the runs not yet started remain."""
    for task in list(remaining):
        job, p = task
        store = job.store
        rec = run_of(job, p)
        attempt = rec.attempts[-1] if rec is not None and rec.attempts else None
        if attempt is None or attempt.started_at < pool_started:
            continue
        if attempt.outcome in ("running", "interrupted"):
            store.fail_run(rec.run_id, WORKER_DIED, attempt=attempt.attempt, overrule_reaper=True)
        remaining.remove(task)
        job.report(p, outcome_of(store.get(rec.run_id), job.metric))
