"""What every ``mixerzoo`` command shares: the ``--results`` option's help, the store, JSON output."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

RESULTS_HELP = "results directory (default: $MIXERZOO_RESULTS or ./results)"


def open_store(results: str | None, create: bool = True):
    """The results store; reading commands pass ``create=False``: the store is then opened
    read-only (never created, migrated or written), so a directory that does not exist is
    reported instead of being created."""
    from mixerzoo.store.lookup import results_root
    from mixerzoo.store.results import ResultsStore

    return ResultsStore(results_root(results), create=create, read_only=not create)


def text_echo(json_out: str | None):
    """``click.echo`` for a command's text: to stderr when its JSON goes to stdout (``--json -``),
    so that stdout holds nothing but the JSON."""
    to_stderr = json_out == "-"

    def echo(message: str = "") -> None:
        click.echo(message, err=to_stderr)

    return echo


def parse_sets(items: tuple[str, ...]) -> dict[str, Any]:
    """``--set`` options -> ``{key: value}`` (values read as YAML): :func:`mixerzoo.config.parse_sets`,
    the one implementation every command uses."""
    from mixerzoo.config import parse_sets as parse

    return parse(items)


def track_options(func):
    """``--track``, ``--track-dir``, ``--track-project``, ``--track-entity``, ``--track-mode``: live
    tracking of the runs a command trains (``runs/tracking.py``)."""
    from mixerzoo.cli.paths import OutputPath

    options = [
        click.option(
            "--track",
            multiple=True,
            type=click.Choice(["tensorboard", "wandb"]),
            help="stream each run live (step loss and lr, evaluations) to TensorBoard / W&B "
            "(extras; repeatable)",
        ),
        click.option(
            "--track-dir",
            default=None,
            type=OutputPath("dir"),
            help="tracker output directory (default: <results>/tracking)",
        ),
        click.option("--track-project", default="mixerzoo", show_default=True, help="W&B project"),
        click.option("--track-entity", default=None, help="W&B entity (team or user; default: yours)"),
        click.option(
            "--track-mode",
            default=None,
            type=click.Choice(["online", "offline"]),
            help="W&B mode (default: online when WANDB_API_KEY is set, else offline)",
        ),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def track_spec(options: dict[str, Any], default_dir: Path):
    """The :class:`~mixerzoo.runs.tracking.TrackSpec` of :func:`track_options`' values (None
    without ``--track``); a missing backend package is one ConfigError line, before any run starts."""
    from mixerzoo.runs.tracking import TrackSpec

    if not options.get("track"):
        return None
    return TrackSpec(
        backends=tuple(options["track"]),
        log_dir=str(options.get("track_dir") or default_dir),
        project=options.get("track_project") or "mixerzoo",
        entity=options.get("track_entity"),
        mode=options.get("track_mode"),
    ).check()
