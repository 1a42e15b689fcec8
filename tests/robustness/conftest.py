"""Shared by the probe suite: run the ``mixerzoo`` command in-process and classify the outcome.

A probe passes only with a clear outcome: exit code 0 with the right result, or exit code 2
with one line on stderr naming the problem. An uncaught exception (a traceback) fails it.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from mixerzoo.cli.main import main


@dataclass
class Outcome:
    code: int
    out: str
    err: str

    def clear_error(self, *needles: str) -> str:
        """Assert exit code 2 and one short stderr line containing every needle; return that line."""
        lines = [line for line in self.err.strip().splitlines() if line.strip()]
        assert self.code == 2, f"exit {self.code}, stderr: {self.err[-2000:]!r}"
        assert "Traceback" not in self.err
        message = lines[-1] if lines else ""
        assert len(lines) == 1, self.err[-2000:]
        assert len(message) < 1000, f"{len(message)}-character message"
        for needle in needles:
            assert needle in message, f"{needle!r} not in {message!r}"
        return message


@pytest.fixture
def run_cli(capsys):
    """``run_cli(*args) -> Outcome``; an exception escaping ``main`` (a traceback) fails the test."""

    def run(*args: str) -> Outcome:
        try:
            main([str(a) for a in args])
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 1
        captured = capsys.readouterr()
        return Outcome(code, captured.out, captured.err)

    return run


def mount(*args: str) -> None:
    """``mount ARGS``, or skip the test where mounting is not allowed (not root, no CAP_SYS_ADMIN)."""
    try:
        done = subprocess.run(["mount", *args], capture_output=True, text=True)
    except OSError as err:
        pytest.skip(f"mount cannot run here: {err}")
    if done.returncode != 0:
        pytest.skip(f"mounting is not allowed here: {done.stderr.strip()[:200]}")


@contextmanager
def tmpfs(where: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` mounted on the folder ``where`` (created) for the block, then unmounted."""
    where.mkdir()
    mount("-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where))
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)
