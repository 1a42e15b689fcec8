"""Owners of running attempts: who runs an attempt, and whether they are still alive.

A running attempt records its process (pid and start time, so a reused pid is not mistaken for
it), the sweep that spawned it, its host and a heartbeat. :func:`owner_dead` decides when such an
owner is gone: on this host by pid, elsewhere by a lease of :data:`LEASE_S` seconds.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from pathlib import Path

#: how often a running attempt refreshes its heartbeat, and how long an attempt on another host
#: may go without one before it counts as dead (same-host owners are checked by pid instead)
HEARTBEAT_S = 30.0
LEASE_S = 600.0

OWNER_DEAD = "interrupted: the process running it ({owner}) ended before the run finished"


def _proc_stat(pid: int) -> list[str] | None:
    """Fields of ``/proc/<pid>/stat`` after the command name (Linux), or None."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text.rsplit(")", 1)[-1].split()


def process_start(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (Linux), to tell a reused pid apart."""
    fields = _proc_stat(pid)
    return fields[19] if fields is not None and len(fields) > 19 else None


def pid_alive(pid: int, start: str | None = None) -> bool:
    """Whether process ``pid`` (started at ``start``, when known) exists and is not a zombie."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # exists, owned by someone else
    except OSError:
        return False
    fields = _proc_stat(pid)
    if fields is None:
        return True  # no /proc (macOS): the signal test is all we have
    if fields[0] in ("Z", "X"):
        return False
    return start is None or fields[19] == start


@dataclass(frozen=True)
class Owner:
    """The process that runs an attempt, and the sweep that spawned it (if any)."""

    pid: int
    host: str
    pid_start: str | None = None
    parent_pid: int | None = None

    @classmethod
    def current(cls, parent_pid: int | None = None) -> Owner:
        return cls(os.getpid(), socket.gethostname(), process_start(os.getpid()), parent_pid)

    def describe(self) -> str:
        return f"pid {self.pid} on {self.host}"


def owner_dead(
    pid: int | None,
    pid_start: str | None,
    parent_pid: int | None,
    host: str | None,
    heartbeat_at: float | None,
    now: float,
) -> bool:
    """Dead: on this host, the pid or its spawning sweep is gone; elsewhere, the lease expired."""
    if host == socket.gethostname() and pid is not None:
        if not pid_alive(pid, pid_start):
            return True
        return parent_pid is not None and not pid_alive(parent_pid)
    return heartbeat_at is None or now - heartbeat_at > LEASE_S
