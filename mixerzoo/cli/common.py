"""What every ``mixerzoo`` command shares: the ``--results`` option's help, the store, JSON output."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

RESULTS_HELP = "results directory (default: $MIXERZOO_RESULTS or ./results)"


def open_store(results: str | None, create: bool = True):
    """The results store; read-only commands pass ``create=False`` so a directory that does not
    exist is reported instead of being created."""
    from mixerzoo.experiments.results_store import ResultsStore

    return ResultsStore(results, create=create)


def write_json(path: str, payload: Any) -> None:
    """Write ``payload`` as indented JSON to ``path``, or to stdout when ``path`` is ``-``."""
    text = json.dumps(payload, indent=2, default=float)
    if path == "-":
        click.echo(text)
    else:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(text + "\n")
