"""The process that trains a sweep's runs: :func:`run_one` (called in the sweep's own process, in a
local pool worker, or in a Ray task) and that process's state; and the setup of a local pool
worker (:func:`init_worker`): it dies with its sweep, takes its CUDA device, and stops at the
sweep's Ctrl-C / SIGTERM.

The local pool (``executors/local.py``) spawns its workers with :func:`init_worker` and submits
:func:`run_one` to them; a spawned worker imports this module to find both.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from mixerzoo.runs.tracking import ProgressSender
from mixerzoo.store.results import ResultsStore
from mixerzoo.studies.sweep.plan import RunOutcome, outcome_of

#: in a pool worker, the sweep process that spawned it (set by ``init_worker``), and whether the
#: sweep is stopping (Ctrl-C / SIGTERM seen): a stopping worker starts no further queued run
_PARENT_PID: int | None = None
_STOPPING = False
_IN_RUN = False
#: live tracking and step progress of the runs this process trains: (a tracking.TrackSpec or None,
#: a progress sink or None); set by :func:`streaming`, and in a pool worker by ``init_worker``
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


@contextmanager
def streaming(tracking, sink) -> Iterator[None]:
    """The runs this process trains in the block stream live to ``tracking`` (a checked
    ``tracking.TrackSpec`` or None) and send their steps to ``sink`` (anything with ``put``, or None)."""
    global _LIVE
    before = _LIVE
    _LIVE = (tracking, sink)
    try:
        yield
    finally:
        _LIVE = before


# -- a local pool worker --------------------------------------------------------------------
def init_worker(threads: int, parent_pid: int, slots=None, live=(None, None)) -> None:
    """The setup of a spawned pool worker: its sweep, its tracking and progress queue (``live``),
    its threads and its CUDA device (from ``slots``), and its answer to Ctrl-C / SIGTERM."""
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


def pin_gpu(slots) -> int | None:
    """Take this worker's device from ``slots`` (a queue of ``executors/local.py: gpu_slots``) and
    make it the current CUDA device: a run with ``train.device`` auto or cuda trains there (an
    explicit cuda:N is kept)."""
    if slots is None:
        return None
    import torch

    gpu = slots.get(timeout=60)
    torch.cuda.set_device(gpu)
    return gpu
