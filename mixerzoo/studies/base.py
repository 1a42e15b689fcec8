"""What every kind of study offers, and what a study needs from its caller (output, results folder).

A :class:`Study` plans nothing itself here: each kind delegates to its existing implementation
(``experiments/sweep.py`` and ``mad.py``, ``theory/experiments.py``). The caller passes a
:class:`Console` (where text and JSON go, how an output folder is checked) and a
:class:`ResultsDir`, so that no study module knows the command line.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from mixerzoo.experiments.claims import NOT_REPRODUCED, NOT_RUN, REPRODUCED


@dataclass(frozen=True)
class Console:
    """``echo(text, err=False)`` prints a line; ``write_json(path, payload)`` writes JSON (``-``:
    stdout); ``check_dir(path, what)`` refuses, in one line, a folder that cannot be written."""

    echo: Callable[..., None]
    write_json: Callable[[str, Any], None]
    check_dir: Callable[[Path, str], None]

    def text(self, json_out: str | None) -> Callable[..., None]:
        """``echo`` for a command's text: to stderr when its JSON goes to stdout (``--json -``)."""
        to_stderr = json_out == "-"
        return lambda message="": self.echo(message, err=to_stderr)


@dataclass(frozen=True)
class ResultsDir:
    """The results folder; ``explicit`` when the user named it (a missing one is then an error)."""

    root: Path
    explicit: bool = False

    def open(self, create: bool = False):
        """The store; reading passes ``create=False``: opened read-only, never created."""
        from mixerzoo.experiments.results_store import ResultsStore

        return ResultsStore(self.root, create=create, read_only=not create)


@dataclass(frozen=True)
class RunOptions:
    """How ``run`` executes; the defaults are what a study that runs in this process accepts."""

    executor: str = "local"
    workers: int = 1
    address: str | None = None
    num_cpus: float = 1.0
    num_gpus: float = 0.0
    skip_failed: bool = False
    track: tuple[str, ...] = ()
    track_dir: str | None = None
    dry_run: bool = False
    quiet: bool = False
    json_out: str | None = None
    again: str = ""  # the options to repeat in the "next:" hint (``--set ...``, ``--results ...``)

    def changed(self, *names: str) -> list[str]:
        """Which of ``names`` differ from their defaults, as command-line options."""
        defaults = {f.name: f.default for f in fields(self)}
        return [f"--{n.replace('_', '-')}" for n in names if getattr(self, n) != defaults[n]]


class Study:
    """One study; subclasses implement the verbs for their kind."""

    kind = ""

    def __init__(self, name: str) -> None:
        self.name = name

    def row(self) -> dict[str, Any]:
        """``study list``: name, kind, paper_ref, runs per preset, claims, description, path."""
        raise NotImplementedError

    def describe(self) -> dict[str, Any]:
        """``study show``: the row, and the presets, axes (or parameters) a newcomer needs."""
        raise NotImplementedError

    def run(
        self, preset: str | None, sets: dict[str, Any], where: ResultsDir, opts: RunOptions, out: Console
    ):
        """Run what is not yet done; returns the exit code (1: a claim not reproduced)."""
        raise NotImplementedError

    def plot(self, preset, sets, where: ResultsDir, out_dir: str | None, out: Console) -> None:
        raise NotImplementedError

    def report(self, preset, sets, where: ResultsDir, out_file: str | None, as_json: bool, out: Console):
        raise NotImplementedError

    def verdicts(self, preset, sets, where: ResultsDir, out: Console) -> tuple[list[dict[str, Any]], str]:
        """The claims with their verdicts, and one line saying what they were judged on."""
        raise NotImplementedError

    def check(self, preset, sets, where: ResultsDir, out: Console) -> int:
        """Print each claim's verdict and a count; 1 when one is not reproduced, else 0."""
        claims, what = self.verdicts(preset, sets, where, out)
        echo_claims(claims, out.echo)
        counts = {v: sum(c["verdict"] == v for c in claims) for v in (REPRODUCED, NOT_REPRODUCED, NOT_RUN)}
        out.echo(f"{what}; claims: " + ", ".join(f"{n} {v}" for v, n in counts.items()))
        return 1 if counts[NOT_REPRODUCED] else 0


def echo_claims(claims: list[dict[str, Any]], echo: Callable[..., None]) -> None:
    for c in claims:
        echo(f"[{c['verdict']}] {c['claim']} ({c['paper_ref']})")
        echo(f"    {c['evidence']}")


def quoted_claims(claims) -> list[dict[str, str]]:
    """A file's claims as ``{"claim", "paper_ref"}`` (before anything is judged)."""
    return [{"claim": c.claim, "paper_ref": c.paper_ref} for c in claims]
