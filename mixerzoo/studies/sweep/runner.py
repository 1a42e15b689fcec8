"""Run an experiment's grid: sequentially, in N local worker processes, or as Ray tasks (one
module each in ``executors/``, the runs trained by ``workers.py: run_one``).

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
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

from mixerzoo.registry import ConfigError
from mixerzoo.runs.task import sigterm_as_interrupt
from mixerzoo.runs.tracking import ProgressBoard
from mixerzoo.store.results import ResultsStore
from mixerzoo.studies.sweep.config import ExperimentConfig, PlannedRun
from mixerzoo.studies.sweep.executors.base import Job
from mixerzoo.studies.sweep.executors.inline import run_inline
from mixerzoo.studies.sweep.executors.local import run_pool, run_pools
from mixerzoo.studies.sweep.executors.ray_cluster import import_ray, run_on_ray
from mixerzoo.studies.sweep.plan import SweepSummary, plan_lines, plan_sweep

Executor = Literal["local", "ray"]
LOCK_NAME = "sweep.lock"


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
    planned = exp.expand()
    with sweep_lock(store.root), sigterm_as_interrupt():
        store.reap()  # attempts a killed sweep left `running` become `interrupted`
        plan = plan_sweep(planned, store, tag, skip_failed, reuse_stale)
        summary, todo = plan.summary, plan.todo
        bar, emit = _console(summary, progress, log)
        for line in plan_lines(plan, executor, workers):
            emit(line)
        job = Job(
            store,
            tag,
            exp.aggregate.metric,
            summary,
            bar,
            emit,
            overrides,
            tracking=tracking.check() if tracking else None,
            board=ProgressBoard(bar) if progress else None,
        )
        try:
            if executor == "ray":
                run_on_ray(longest_first(todo), job, address, num_cpus, num_gpus)
            elif workers == 1:
                run_inline(todo, job)
            else:
                run_pool(longest_first(todo), job, workers)
        except KeyboardInterrupt:  # Ctrl-C or SIGTERM (runs.Terminated): say where things stand
            emit(f"{tag}: stopped; {summary.line()}; run it again to resume")
            raise
        finally:
            bar.close()
    summary.wall_s = time.perf_counter() - t0
    return summary


def run_sweeps(
    sweeps: list[tuple[ExperimentConfig, str]],
    store: ResultsStore,
    workers: int = 1,
    log: Callable[[str], None] | None = None,
    reuse_stale: bool = False,
    order: Callable[[PlannedRun], float] | None = None,
) -> list[SweepSummary]:
    """The runs of several experiments, each ``(experiment, tag)`` recorded under its own tag and
    counted in its own summary, trained together: one after another with one worker, else in one
    local pool of ``workers`` processes (each with its share of the cores), where a worker freed by
    one experiment's run takes the next run of any. ``order``: a key; runs with the largest go
    first (the longest first packs a pool best). Resumable as :func:`run_sweep`; no progress bar
    (a line per run, through ``log``)."""
    _check_executor("local", workers)
    t0 = time.perf_counter()
    with sweep_lock(store.root), sigterm_as_interrupt():
        store.reap()
        jobs = [_job(exp, tag, store, workers, log, reuse_stale) for exp, tag in sweeps]
        tasks = [(job, p) for job, todo in jobs for p in todo]
        if order is not None:
            tasks.sort(key=lambda task: -order(task[1]))
        try:
            if workers == 1:
                for job, p in tasks:
                    run_inline([p], job)
            else:
                run_pools(tasks, workers)
        except KeyboardInterrupt:
            for job, _ in jobs:
                if job.summary.total > job.summary.skipped + len(job.summary.outcomes):
                    job.emit(f"{job.experiment}: stopped; {job.summary.line()}; run it again to resume")
            raise
        finally:
            for job, _ in jobs:
                job.bar.close()
    for job, _ in jobs:
        job.summary.wall_s = time.perf_counter() - t0
    return [job.summary for job, _ in jobs]


def longest_first(todo: list[PlannedRun]) -> list[PlannedRun]:
    """``todo`` with the runs of most training FLOPs first (planned order among equals): handed out
    so to a pool, the longest run does not start last and leave the other workers idle at the end
    (the order ``study run --dry-run --workers N`` estimates with). A run whose cost cannot be
    computed here keeps its place after the others."""
    from mixerzoo.studies.sweep.cost import planned_flops

    def cost(p: PlannedRun) -> float:
        try:
            return planned_flops(p.config)
        except Exception:  # noqa: BLE001 - a run that fails to build fails when it runs, with its error
            return -1.0

    costs = {id(p): cost(p) for p in todo}
    return sorted(todo, key=lambda p: -costs[id(p)])


def _job(exp: ExperimentConfig, tag: str, store: ResultsStore, workers: int, log, reuse_stale: bool):
    """The :class:`Job` of one experiment of :func:`run_sweeps`, and its runs still to train."""
    plan = plan_sweep(exp.expand(), store, tag, False, reuse_stale)
    bar, plain = _console(plan.summary, False, log)

    def emit(line: str) -> None:  # the runs of several experiments interleave: name each one's
        plain(line if line.startswith(tag) else f"{tag} {line}")

    for line in plan_lines(plan, "local", workers):
        emit(line)
    return Job(store, tag, exp.aggregate.metric, plan.summary, bar, emit), plan.todo


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


# -- the lock: one sweep per results directory --------------------------------------------
@contextmanager
def sweep_lock(root: Path) -> Iterator[None]:
    """An exclusive ``flock`` on ``<root>/sweep.lock``; the OS releases it when the process dies."""
    try:
        import fcntl
    except ImportError:  # no flock (Windows): one sweep per store is then the user's responsibility
        yield
        return
    path = root / LOCK_NAME
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "?"
            raise ConfigError(
                f"another sweep (pid {holder}) is writing to {str(root)!r};"
                " wait for it or use another --results"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        yield
    finally:
        os.close(fd)
