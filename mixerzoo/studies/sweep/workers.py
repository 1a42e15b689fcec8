"""The processes of a sweep: the results directory's lock, workers that die with their sweep,
the CUDA device and the threads of each local worker.

``studies/sweep/runner.py`` uses them (and re-exports them).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from mixerzoo.registry import ConfigError

LOCK_NAME = "sweep.lock"


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


def pin_gpu(slots) -> int | None:
    """Take this worker's device from ``slots`` (a queue of :func:`gpu_slots`) and make it the current
    CUDA device: a run with ``train.device`` auto or cuda trains there (an explicit cuda:N is kept)."""
    if slots is None:
        return None
    import torch

    gpu = slots.get(timeout=60)
    torch.cuda.set_device(gpu)
    return gpu


def threads_per_worker(workers: int) -> int:
    """Cores split evenly between workers, so N processes do not oversubscribe the machine."""
    return max(1, (os.cpu_count() or 1) // max(1, workers))
