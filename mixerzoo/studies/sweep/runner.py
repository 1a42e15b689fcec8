"""Run an experiment's grid: sequentially, in N local worker processes, or as Ray tasks.

    from mixerzoo.studies.sweep.config import load_experiment
    exp = load_experiment("cat-mqar", preset="quick")
    run_sweep(exp, ResultsStore("results"), executor="local", workers=2)

Resumable by construction: a run whose config hash is already ``finished`` in the store, by the
code that would run it now (``fingerprint.py``), is skipped; one finished by other code (a mixer
or task edited since, another mixerzoo version) is *stale* and trained again, as a new attempt
that keeps the old one, unless ``reuse_stale``. Every run is recorded in its own short
transactions (``store/results.py``), so a sweep killed at any moment (SIGKILL included) loses no
finished run. On restart, the attempts the killed sweep left ``running`` are reaped as
``interrupted`` (their owner, the worker or the sweep that spawned it, is dead) and those runs
are tried again: the same run record, a second attempt. An attempt whose owner is alive (a
``mixerzoo train`` of the same config in another terminal) is never reaped and its config is not
trained twice: the sweep reports it as running elsewhere. Workers die with their sweep (Linux
``PR_SET_PDEATHSIG``, else a parent watchdog), and a reaped attempt is fenced in the store, so
no orphan can finish a run the restart is redoing. One sweep per results directory at a time (an
exclusive lock).

A failing run (exception, NaN loss) is recorded as ``failed`` with its error and the sweep goes
on; Ctrl-C or SIGTERM ends the running attempts as ``interrupted`` (retried by the next sweep,
also with ``--skip-failed``) and stops the sweep. A run that fails for a full disk stops the
sweep too (:class:`~mixerzoo.store.results.NoSpace`, exit code 1): the runs still in
progress end ``interrupted`` and are retried by the next sweep.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from mixerzoo.registry import ConfigError
from mixerzoo.runs.task import sigterm_as_interrupt
from mixerzoo.runs.tracking import ProgressBoard, ProgressSender
from mixerzoo.store.errors import NO_SPACE, NoSpace
from mixerzoo.store.results import ResultsStore
from mixerzoo.studies.sweep.config import ExperimentConfig, PlannedRun
from mixerzoo.studies.sweep.executors import (
    _attempt_outcome,
    _collect,
    _fail_dead_attempts,
    _Job,
    _Round,
    _stop_pool,
    import_ray,
    import_run,
    ray_session,
)
from mixerzoo.studies.sweep.plan import RunOutcome, SweepSummary, outcome_of, plan_lines, plan_sweep
from mixerzoo.studies.sweep.workers import (
    _die_with_parent,
    cuda_device_count,
    gpu_slots,
    pin_gpu,
    sweep_lock,
    threads_per_worker,
)

Executor = Literal["local", "ray"]


# -- running one config (in whichever process) ---------------------------------------------
#: in a pool worker, the sweep process that spawned it (set by ``_init_worker``), and whether the
#: sweep is stopping (Ctrl-C / SIGTERM seen): a stopping worker starts no further queued run
_PARENT_PID: int | None = None
_STOPPING = False
_IN_RUN = False
#: live tracking and step progress of the runs this process trains or spawns: (a tracking.TrackSpec
#: or None, a progress sink or None); set by ``run_sweep``, and in a pool worker by ``_init_worker``
_LIVE: tuple[Any, Any] = (None, None)


def run_one(
    config_json: str, store_root: str, experiment: str, metric: str, modules: tuple[str, ...] = ()
) -> RunOutcome:
    """Train one config into the store; errors are recorded in the store, never raised
    (an interrupt is recorded too, then re-raised). ``modules``: user modules that register the
    config's mixers or task, imported first (``user_code.py``)."""
    from mixerzoo.config import RunConfig
    from mixerzoo.runs.task import Terminated, execute_run
    from mixerzoo.runs.user_code import import_modules

    import_modules(modules)

    global _IN_RUN
    if _STOPPING:
        raise Terminated("the sweep was stopped before this run started")
    cfg = RunConfig.model_validate_json(config_json)
    tracking, sink = _LIVE
    sender = ProgressSender(sink, cfg.label()) if sink is not None else None
    _IN_RUN = True
    try:
        record = execute_run(
            cfg,
            ResultsStore(store_root),
            experiment=experiment,
            progress=False,
            raise_errors=False,
            parent_pid=_PARENT_PID,
            tracking=tracking,
            on_step=sender,
        )
    finally:
        _IN_RUN = False
        if sender is not None:
            sender.done()
    return outcome_of(record, metric)


def _init_worker(threads: int, parent_pid: int, slots=None, live=(None, None)) -> None:
    import signal

    import torch

    from mixerzoo.runs.task import Terminated

    global _PARENT_PID, _LIVE
    _PARENT_PID = parent_pid
    _LIVE = live
    _die_with_parent(parent_pid)
    torch.set_num_threads(threads)
    pin_gpu(slots)

    def on_stop(signum, frame):
        # Ctrl-C reaches the workers with the sweep; the sweep stops them with SIGTERM. The first
        # signal interrupts the run in progress (recorded as interrupted); later ones are ignored
        # so that recording is not cut short, and queued runs are refused (``run_one``).
        global _STOPPING
        if _STOPPING:
            return
        _STOPPING = True
        if not _IN_RUN:
            return  # idle, between runs: raising here would kill the worker with a traceback
        if signum == signal.SIGINT:
            raise KeyboardInterrupt
        raise Terminated(f"terminated by signal {signum} (SIGTERM): the sweep was stopped")

    signal.signal(signal.SIGTERM, on_stop)
    signal.signal(signal.SIGINT, on_stop)


# -- executors ----------------------------------------------------------------------------
def _local_sequential(todo, store, experiment, metric, report) -> None:
    for p in todo:
        since = time.time()
        try:
            outcome = run_one(p.config.model_dump_json(), str(store.root), experiment, metric)
        except KeyboardInterrupt:  # recorded as interrupted by execute_run: count it, then stop
            stopped = _attempt_outcome(store, p, experiment, metric, since)
            if stopped is not None:
                report(p, stopped)
            raise
        report(p, outcome)


def _local_pool(todo, store, experiment, metric, report, workers: int) -> None:
    """Train ``todo`` in ``workers`` spawned processes; a pool that a dead worker broke is replaced."""
    from mixerzoo.runs.user_code import worker_modules

    job = _Job(store, experiment, metric, report)
    remaining = list(todo)
    modules = worker_modules([p.config for p in todo], "local")
    while remaining:
        pool_started = time.time()
        if _pool_round(job, remaining, workers, modules, pool_started):
            _fail_dead_attempts(job, remaining, pool_started)


def _pool_round(job: _Job, remaining: list[PlannedRun], workers: int, modules, started: float) -> bool:
    """Run ``remaining`` in a fresh pool, removing each run as it ends; True when a dead worker broke it."""
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    slots = _device_queue(ctx, min(workers, len(remaining)))
    live, stop_progress = _worker_live(ctx)
    pool = ProcessPoolExecutor(
        max_workers=min(workers, len(remaining)),
        mp_context=ctx,
        initializer=_init_worker,
        initargs=(threads_per_worker(workers), os.getpid(), slots, live),
    )
    root = str(job.store.root)
    futures = {
        pool.submit(run_one, p.config.model_dump_json(), root, job.experiment, job.metric, modules): p
        for p in remaining
    }
    rnd = _Round(pool, futures, started)
    try:
        _collect(job, rnd, remaining)
    except BaseException:
        _stop_pool(job, rnd)
        raise
    finally:
        pool.shutdown(wait=not rnd.broken, cancel_futures=True)
        stop_progress()
    return rnd.broken


def _worker_live(ctx):
    """What pool workers get of :data:`_LIVE`: the tracking spec and a queue the sweep's progress
    board reads (a daemon thread); and the function that stops that reading."""
    tracking, board = _LIVE
    if board is None:
        return (tracking, None), lambda: None
    q = ctx.Queue()
    return (tracking, q), board.drain(q)


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


def ray_task(
    config_json: str,
    experiment: str,
    metric: str,
    threads: int,
    paths: tuple[str, ...] = (),
    modules: tuple[str, ...] = (),
    tracking=None,
) -> dict[str, Any]:
    """A Ray task: train into a private temporary store and ship the record + checkpoint back.

    The driver alone writes the real store, so the workers need no shared filesystem (remote
    clusters) and SQLite is never written over a network mount. ``paths`` (the driver's
    ``sys.path``) and ``modules`` let the worker import the user's mixers and tasks (``user_code.py``).
    """
    import torch

    from mixerzoo.runs.user_code import import_modules

    import_modules((), paths)

    global _LIVE
    _LIVE = (tracking, None)  # streamed from the worker; no step progress across a cluster
    torch.set_num_threads(max(1, threads))
    with tempfile.TemporaryDirectory(prefix="mixerzoo-ray-") as tmp:
        outcome = run_one(config_json, tmp, experiment, metric, modules)
        store = ResultsStore(tmp)
        rec = store.get(outcome.run_id) if outcome.run_id else None
        ckpt = Path(rec.checkpoint).read_bytes() if rec is not None and rec.checkpoint else None
        return {
            "outcome": outcome,
            "record": rec.to_json() if rec is not None else None,
            "history": store.history(rec.run_id) if rec is not None else [],
            "checkpoint": ckpt,
            "package_version": rec.package_version if rec is not None else None,
        }


def _ray(todo, store, experiment, metric, report, address, num_cpus, num_gpus) -> None:
    from mixerzoo.runs.user_code import worker_modules

    ray = import_ray()
    user_code = (tuple(sys.path), worker_modules([p.config for p in todo], "ray"))
    with ray_session(ray, address):
        remote = ray.remote(num_cpus=num_cpus, num_gpus=num_gpus, max_retries=0)(ray_task)
        refs = {
            remote.remote(
                p.config.model_dump_json(), experiment, metric, max(1, int(num_cpus)), *user_code, _LIVE[0]
            ): p
            for p in todo
        }
        while refs:
            done, _ = ray.wait(list(refs), num_returns=1)
            for ref in done:
                p = refs.pop(ref)
                try:
                    outcome = import_run(store, ray.get(ref), experiment, metric)
                except Exception as err:  # noqa: BLE001 - a lost worker must not stop the sweep
                    run_id = store.start_run(
                        p.config.model_dump(mode="json"), p.config_hash, p.config.label(), experiment
                    )
                    store.fail_run(run_id, f"ray task failed: {type(err).__name__}: {err}")
                    outcome = outcome_of(store.get(run_id), metric)
                report(p, outcome)


# -- the sweep ------------------------------------------------------------------------------
def run_sweep(
    exp: ExperimentConfig,
    store: ResultsStore,
    executor: Executor = "local",
    workers: int = 1,
    address: str | None = None,
    num_cpus: float = 1,
    num_gpus: float = 0,
    experiment_tag: str | None = None,
    skip_failed: bool = False,
    tracking=None,
    progress: bool = True,
    log: Callable[[str], None] | None = None,
    reuse_stale: bool = False,
    overrides: dict[str, Any] | None = None,
) -> SweepSummary:
    """Run every planned run of ``exp`` not yet finished in ``store``; returns what happened.

    ``tracking`` (a ``tracking.TrackSpec``) streams each run live to TensorBoard / W&B from the
    process that trains it; with ``progress`` the bar over runs shows each active run's step.
    A run finished by other code (stale, ``fingerprint.py``) is trained again unless
    ``reuse_stale``. ``overrides``: the ``--set`` overrides ``exp`` was made with, recorded with
    every attempt this sweep makes.
    """
    _check_executor(executor, workers)
    t0 = time.perf_counter()
    tag = experiment_tag or exp.name
    metric = exp.aggregate.metric
    planned = exp.expand()
    with sweep_lock(store.root), sigterm_as_interrupt():
        store.reap()  # attempts a killed sweep left `running` become `interrupted`
        plan = plan_sweep(planned, store, tag, skip_failed, reuse_stale)
        summary, todo = plan.summary, plan.todo
        bar, emit = _console(summary, progress, log)
        for line in plan_lines(plan, executor, workers):
            emit(line)
        report = _Reporter(summary, bar, emit, store, metric, overrides)

        global _LIVE
        _LIVE = (tracking.check() if tracking else None, ProgressBoard(bar) if progress else None)
        try:
            if executor == "ray":
                _ray(todo, store, tag, metric, report, address, num_cpus, num_gpus)
            elif workers == 1:
                _local_sequential(todo, store, tag, metric, report)
            else:
                _local_pool(todo, store, tag, metric, report, workers)
        except KeyboardInterrupt:  # Ctrl-C or SIGTERM (runs.Terminated): say where things stand
            emit(f"{tag}: stopped; {summary.line()}; run it again to resume")
            raise
        finally:
            _LIVE = (None, None)
            bar.close()
    summary.wall_s = time.perf_counter() - t0
    return summary


def _check_executor(executor: str, workers: int) -> None:
    """Refuse an unknown executor or fewer than one worker; without Ray installed, say how to get it."""
    if executor not in ("local", "ray"):
        raise ConfigError(f"executor {executor!r}: allowed: local, ray")
    if workers < 1:
        raise ConfigError(f"workers = {workers}: must be >= 1")
    if executor == "ray":
        import_ray()  # fail before planning, with the install hint


def _console(summary: SweepSummary, progress: bool, log: Callable[[str], None] | None):
    """The bar over the sweep's runs (on stderr; hidden without ``progress``) and the line printer."""
    from tqdm.auto import tqdm

    bar = tqdm(
        total=summary.total,
        initial=summary.skipped,
        desc=summary.experiment,
        unit="run",
        disable=not progress,
        dynamic_ncols=True,
        file=sys.stderr,
    )
    emit = log or (lambda s: tqdm.write(s, file=sys.stderr))
    return bar, emit


@dataclass
class _Reporter:
    """Takes each run's outcome: counts it in the summary, moves the bar, prints the run's line."""

    summary: SweepSummary
    bar: Any
    emit: Callable[[str], None]
    store: ResultsStore
    metric: str
    overrides: dict[str, Any] | None

    def __call__(self, p: PlannedRun, outcome: RunOutcome) -> None:
        summary = self.summary
        summary.outcomes.append(outcome)
        self.bar.update(1)
        if _LIVE[1] is not None:  # its worker may have died before saying so
            _LIVE[1].put((outcome.name, None, None))
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
