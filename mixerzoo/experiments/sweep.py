"""Run an experiment's grid: sequentially, in N local worker processes, or as Ray tasks.

    from mixerzoo.experiments.experiment_config import load_experiment
    exp = load_experiment("cat-mqar", preset="quick")
    run_sweep(exp, ResultsStore("results"), executor="local", workers=2)

Resumable by construction: a run whose config hash is already ``finished`` in the store is
skipped, and every run is recorded in its own short transactions (``results_store.py``), so a
sweep killed at any moment (SIGKILL included) loses no finished run. On restart, rows left
``running`` by the killed sweep are marked ``failed`` ("interrupted") and their configs run
again; this is safe because a sweep holds an exclusive lock on the results directory (one sweep
per store at a time) and its worker processes die with it (Linux ``PR_SET_PDEATHSIG``, else a
parent watchdog), so no orphan can finish a run that the restarted sweep is redoing.

A failing run (exception, NaN loss) is recorded as ``failed`` with its error; the sweep goes on.
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from mixerzoo.experiments.experiment_config import ExperimentConfig, PlannedRun
from mixerzoo.experiments.results_store import ResultsStore
from mixerzoo.registry import ConfigError

LOCK_NAME = "sweep.lock"
INTERRUPTED = "interrupted: the sweep running this config was killed before the run finished"

Executor = Literal["local", "ray"]


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
    experiment: str
    total: int
    skipped: int
    outcomes: list[RunOutcome] = field(default_factory=list)
    wall_s: float = 0.0

    @property
    def finished(self) -> int:
        return sum(o.status == "finished" for o in self.outcomes)

    @property
    def failed(self) -> int:
        return sum(o.status != "finished" for o in self.outcomes)


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


def mark_interrupted(store: ResultsStore, hashes: set[str]) -> int:
    """Rows of these configs left ``running`` by a killed sweep become ``failed`` (they are redone)."""
    stale = [r for r in store.runs(status="running") if r.config_hash in hashes]
    for rec in stale:
        store.fail_run(rec.run_id, INTERRUPTED)
    return len(stale)


def pending_runs(
    planned: list[PlannedRun], store: ResultsStore, skip_failed: bool = False
) -> list[PlannedRun]:
    """The planned runs not yet finished (by config hash); with ``skip_failed`` also not yet failed."""
    failed = (
        {r.config_hash for r in store.runs(status="failed") if r.error != INTERRUPTED}
        if skip_failed
        else set()
    )
    return [p for p in planned if store.finished(p.config_hash) is None and p.config_hash not in failed]


# -- running one config (in whichever process) ---------------------------------------------
def outcome_of(record, metric: str) -> RunOutcome:
    value = record.metrics.get(metric)
    error = (record.error or "").strip().splitlines()[0] if record.error else None
    return RunOutcome(
        config_hash=record.config_hash,
        name=record.name or "",
        status=record.status,
        run_id=record.run_id,
        metric=float(value) if isinstance(value, (int, float)) else None,
        wall_s=record.wall_s,
        error=error,
    )


def run_one(config_json: str, store_root: str, experiment: str, metric: str) -> RunOutcome:
    """Train one config into the store; errors are recorded in the store, never raised."""
    from mixerzoo.config import RunConfig
    from mixerzoo.experiments.runs import execute_run

    cfg = RunConfig.model_validate_json(config_json)
    record = execute_run(
        cfg, ResultsStore(store_root), experiment=experiment, progress=False, raise_errors=False
    )
    return outcome_of(record, metric)


def _die_with_parent(parent_pid: int) -> None:
    """Make this worker exit when the sweep process dies, so no orphan finishes a run twice."""
    if sys.platform.startswith("linux"):
        import ctypes
        import signal

        try:
            libc = ctypes.CDLL(None, use_errno=True)
            pr_set_pdeathsig = 1
            libc.prctl(pr_set_pdeathsig, signal.SIGKILL)
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent_pid:  # the parent died before prctl took effect
        os._exit(1)

    def watchdog() -> None:
        while True:
            time.sleep(0.5)
            if os.getppid() != parent_pid:
                os._exit(1)

    threading.Thread(target=watchdog, daemon=True, name="mixerzoo-parent-watchdog").start()


def _init_worker(threads: int, parent_pid: int) -> None:
    import torch

    _die_with_parent(parent_pid)
    torch.set_num_threads(threads)


def threads_per_worker(workers: int) -> int:
    """Cores split evenly between workers, so N processes do not oversubscribe the machine."""
    return max(1, (os.cpu_count() or 1) // max(1, workers))


# -- executors ----------------------------------------------------------------------------
def _local_sequential(todo, store, experiment, metric, report) -> None:
    for p in todo:
        report(p, run_one(p.config.model_dump_json(), str(store.root), experiment, metric))


def _local_pool(todo, store, experiment, metric, report, workers: int) -> None:
    import multiprocessing

    remaining = list(todo)
    while remaining:
        ctx = multiprocessing.get_context("spawn")
        pool = ProcessPoolExecutor(
            max_workers=min(workers, len(remaining)),
            mp_context=ctx,
            initializer=_init_worker,
            initargs=(threads_per_worker(workers), os.getpid()),
        )
        futures = {
            pool.submit(run_one, p.config.model_dump_json(), str(store.root), experiment, metric): p
            for p in remaining
        }
        broken = False
        try:
            while futures:
                done, _ = wait(list(futures), return_when=FIRST_COMPLETED)
                for fut in done:
                    p = futures.pop(fut)
                    try:
                        outcome = fut.result()
                    except BrokenProcessPool:
                        broken = True
                        continue
                    remaining.remove(p)
                    report(p, outcome)
                if broken:
                    break
        finally:
            pool.shutdown(wait=not broken, cancel_futures=True)
        if broken:
            # A worker died (killed, out of memory): its run is left `running`. Record it as
            # failed, report it, and go on with a fresh pool for the runs not yet started.
            started = {r.config_hash: r for r in store.runs(status="running")}
            for p in list(remaining):
                rec = started.get(p.config_hash)
                if rec is not None:
                    store.fail_run(rec.run_id, "worker process died (killed or out of memory)")
                    remaining.remove(p)
                    report(p, outcome_of(store.get(rec.run_id), metric))


def import_ray():
    try:
        import ray
    except ImportError:
        raise ConfigError(
            "the ray executor needs Ray: pip install 'mixerzoo[ray]' (or pip install 'ray[default]')"
        ) from None
    return ray


def ray_task(config_json: str, experiment: str, metric: str, threads: int) -> dict[str, Any]:
    """A Ray task: train into a private temporary store and ship the record + checkpoint back.

    The driver alone writes the real store, so the workers need no shared filesystem (remote
    clusters) and SQLite is never written over a network mount.
    """
    import torch

    torch.set_num_threads(max(1, threads))
    with tempfile.TemporaryDirectory(prefix="mixerzoo-ray-") as tmp:
        outcome = run_one(config_json, tmp, experiment, metric)
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


def import_run(store: ResultsStore, payload: dict[str, Any], experiment: str, metric: str) -> RunOutcome:
    """Record a run trained elsewhere (a Ray worker) in this store: start, evals, checkpoint, end."""
    rec = payload["record"]
    if rec is None:
        return payload["outcome"]
    run_id = store.start_run(
        rec["config"], rec["config_hash"], rec["name"], experiment, payload["package_version"]
    )
    for h in payload["history"]:
        metrics = {k: v for k, v in h.items() if k not in ("step", "epoch", "wall_s")}
        store.log_eval(run_id, h["step"], h["epoch"], h["wall_s"] or 0.0, metrics)
    if rec["status"] == "finished":
        ckpt = None
        if payload["checkpoint"] is not None:
            path = store.checkpoint_path(run_id)
            tmp = path.with_suffix(".pt.tmp")
            tmp.write_bytes(payload["checkpoint"])
            os.replace(tmp, path)
            ckpt = str(path)
        store.finish_run(run_id, rec["metrics"], rec["wall_s"] or 0.0, rec["params"] or 0, ckpt)
    else:
        store.fail_run(run_id, rec["error"] or "failed", rec["wall_s"])
    return outcome_of(store.get(run_id), metric)


def _ray(todo, store, experiment, metric, report, address, num_cpus, num_gpus) -> None:
    ray = import_ray()
    started_here = False
    if not ray.is_initialized():
        if address is None:  # a private local instance sized to this machine
            ray.init(num_cpus=os.cpu_count() or 1, include_dashboard=False, log_to_driver=False)
        else:  # an existing cluster (its workers need mixerzoo and torch installed)
            ray.init(address=address)
        started_here = True
    try:
        remote = ray.remote(num_cpus=num_cpus, num_gpus=num_gpus, max_retries=0)(ray_task)
        refs = {
            remote.remote(p.config.model_dump_json(), experiment, metric, max(1, int(num_cpus))): p
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
    finally:
        if started_here:
            ray.shutdown()


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
    trackers: list | None = None,
    progress: bool = True,
    log: Callable[[str], None] | None = None,
) -> SweepSummary:
    """Run every planned run of ``exp`` not yet finished in ``store``; returns what happened.

    ``trackers`` (``tracking.make_trackers``) mirror each run into TensorBoard / W&B as it ends.
    """
    from tqdm.auto import tqdm

    if executor not in ("local", "ray"):
        raise ConfigError(f"executor {executor!r}: allowed: local, ray")
    if workers < 1:
        raise ConfigError(f"workers = {workers}: must be >= 1")
    if executor == "ray":
        import_ray()  # fail before planning, with the install hint
    t0 = time.perf_counter()
    tag = experiment_tag or exp.name
    metric = exp.aggregate.metric
    planned = exp.expand()
    with sweep_lock(store.root):
        interrupted = mark_interrupted(store, {p.config_hash for p in planned})
        todo = pending_runs(planned, store, skip_failed)
        summary = SweepSummary(experiment=tag, total=len(planned), skipped=len(planned) - len(todo))
        bar = tqdm(
            total=len(planned),
            initial=summary.skipped,
            desc=tag,
            unit="run",
            disable=not progress,
            dynamic_ncols=True,
            file=sys.stderr,
        )
        emit = log or (lambda s: tqdm.write(s, file=sys.stderr))
        emit(
            f"{tag}: {len(planned)} runs, {summary.skipped} already finished, {len(todo)} to run"
            + (f" ({interrupted} interrupted runs will be redone)" if interrupted else "")
            + f" [{executor}, {workers} worker{'s' if workers != 1 else ''}]"
        )

        def report(p: PlannedRun, outcome: RunOutcome) -> None:
            summary.outcomes.append(outcome)
            bar.update(1)
            record = store.get(outcome.run_id) if outcome.run_id else None
            for tracker in trackers or []:
                if record is not None:
                    tracker.log_run(record, store.history(record.run_id))
            done = summary.skipped + len(summary.outcomes)
            wall = f"{outcome.wall_s:.1f} s" if outcome.wall_s is not None else "-"
            if outcome.status == "finished":
                value = f"{outcome.metric:.4f}" if outcome.metric is not None else "-"
                emit(f"[{done}/{len(planned)}] finished {outcome.name}: {metric} {value} ({wall})")
            else:
                emit(f"[{done}/{len(planned)}] FAILED {outcome.name}: {outcome.error} ({wall})")

        try:
            if executor == "ray":
                _ray(todo, store, tag, metric, report, address, num_cpus, num_gpus)
            elif workers == 1:
                _local_sequential(todo, store, tag, metric, report)
            else:
                _local_pool(todo, store, tag, metric, report, workers)
        finally:
            bar.close()
            for tracker in trackers or []:
                tracker.close()
    summary.wall_s = time.perf_counter() - t0
    return summary
