"""Errors of the results store that are not a user's mistake: a full disk, a fenced attempt.

Owns the classification of an error as "out of disk space" (``ENOSPC``, ``EDQUOT``, or what SQLite
and safetensors say about it), the error text recorded for such an attempt (:data:`NO_SPACE`),
and the free-space check that tells a full disk from another SQLite I/O error.
"""

from __future__ import annotations

import errno
import shutil
from pathlib import Path

from mixerzoo.registry import ConfigError

#: the error of an attempt that ran out of disk space (a checkpoint or store write)
NO_SPACE = "no space left on device"
#: below this many free bytes, a write that failed without saying why is taken for a full disk
LOW_SPACE = 1 << 20


class StaleAttempt(RuntimeError):
    """A write from an attempt that is no longer running (it was reaped as interrupted)."""


class NoSpace(ConfigError):
    """The disk holding the results store is full: a failed run (exit code 1), not a user mistake."""

    exit_code = 1


def out_of_space(err: BaseException | None) -> bool:
    """Whether ``err``, or an error it was raised from, says the disk is full (``ENOSPC``)."""
    for _ in range(8):
        if err is None:
            return False
        if isinstance(err, NoSpace) or getattr(err, "errno", None) in (errno.ENOSPC, errno.EDQUOT):
            return True
        text = str(err).lower()
        if any(s in text for s in ("no space left on device", "disk is full", "os error 28")):
            return True
        err = err.__cause__ or err.__context__
    return False


def _free_bytes(path: Path) -> int:
    """Free bytes on the file system holding ``path`` (its nearest existing ancestor)."""
    for p in (path, *path.absolute().parents):
        try:
            return shutil.disk_usage(p).free
        except OSError:
            continue
    return LOW_SPACE
