"""What every ``mixerzoo`` command shares: the ``--results`` option's help, the store, JSON output."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

RESULTS_HELP = "results directory (default: $MIXERZOO_RESULTS or ./results)"


def open_store(results: str | None, create: bool = True):
    """The results store; reading commands pass ``create=False``: the store is then opened
    read-only (never created, migrated or written), so a directory that does not exist is
    reported instead of being created."""
    from mixerzoo.experiments.results_store import ResultsStore

    return ResultsStore(results_root(results), create=create, read_only=not create)


def results_root(results: str | None) -> Path:
    """The ``--results`` directory (default: ``$MIXERZOO_RESULTS`` or ``./results``); an empty
    path is refused rather than read as the current directory."""
    from mixerzoo.experiments.results_store import default_results_dir
    from mixerzoo.registry import ConfigError

    if results is None:
        return default_results_dir()
    if not results.strip():
        raise ConfigError("--results '': an empty path; name a directory (or leave --results out)")
    return Path(results)


def write_json(path: str, payload: Any) -> None:
    """Write ``payload`` as indented JSON to ``path``, or to stdout when ``path`` is ``-``."""
    from mixerzoo.cli.paths import write_text

    text = json.dumps(payload, indent=2, default=float)
    if path == "-":
        click.echo(text)
    else:
        write_text(path, text + "\n")


def text_echo(json_out: str | None):
    """``click.echo`` for a command's text: to stderr when its JSON goes to stdout (``--json -``),
    so that stdout holds nothing but the JSON."""
    to_stderr = json_out == "-"

    def echo(message: str = "") -> None:
        click.echo(message, err=to_stderr)

    return echo


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
