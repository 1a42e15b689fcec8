"""Shared by the probe suite: run the ``mixerzoo`` command in-process and classify the outcome.

A probe passes only with a clear outcome: exit code 0 with the right result, or exit code 2
with one line on stderr naming the problem. An uncaught exception (a traceback) fails it.
"""

from __future__ import annotations

from dataclasses import dataclass

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
