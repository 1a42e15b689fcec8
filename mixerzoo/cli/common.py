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


def parse_sets(items: tuple[str, ...]) -> dict[str, Any]:
    """``("seq_len=256", "power_a=0.01")`` -> ``{"seq_len": 256, "power_a": 0.01}`` (values read as YAML)."""
    from mixerzoo.config import parse_yaml
    from mixerzoo.registry import ConfigError, short_repr

    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError(f"--set {short_repr(item)}: expected key=value")
        if key in out:
            raise ConfigError(f"--set {key}: given twice")
        out[key] = parse_yaml(value, f"--set {short_repr(item)}")
    return out
