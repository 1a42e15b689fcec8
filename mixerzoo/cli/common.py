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


def listed_runs(
    results: str | None, kind: str | None = None, study: str | None = None, lm_runs: tuple[str, ...] = ()
) -> tuple[Path, list]:
    """Every run that ``mixerzoo results`` lists, read only: the store's records, the result JSONs
    under ``<results>/theory/`` that no record holds (written before the store recorded computed
    results; a directory with only those needs no store), and the ``train-lm`` run folders named
    by ``lm_runs`` that no record holds. Oldest first, filtered by ``kind`` and ``study``."""
    from mixerzoo.experiments.recording import lm_folder_record, lm_folders
    from mixerzoo.experiments.results_store import DB_NAME
    from mixerzoo.theory.records import theory_file_records

    root = results_root(results)
    files = theory_file_records(root) if (root / "theory").is_dir() else []
    folders = [lm_folder_record(f) for given in lm_runs for f in lm_folders(given)]
    stored = []
    if not (files or folders) or (root / DB_NAME).exists():
        stored = open_store(results, create=False).runs(kind=kind, study=study)
        held = {
            str(Path(p).resolve()) for r in stored for a in r.attempts for p in (a.output, a.checkpoint) if p
        }
        files = [r for r in files if r.output not in held]
        folders = [r for r in folders if str(Path(r.run_id).resolve()) not in held]
    found = [r for r in files + folders if kind in (None, r.kind) and study in (None, r.study)]
    return root, sorted(stored + found, key=lambda r: r.created_at)


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
    """``--set`` options -> ``{key: value}`` (values read as YAML): :func:`mixerzoo.config.parse_sets`,
    the one implementation every command uses."""
    from mixerzoo.config import parse_sets as parse

    return parse(items)


#: an old command name -> its new form; the old names stay as aliases that print one note line
ALIASES = {
    "experiments": "study list",
    "run": "study run",
    "plot": "study plot",
    "report": "study report",
    "check": "study check",
    "theory list": "study list",
    "theory run": "study run",
    "train-lm": "lm train",
    "lm-eval": "lm eval",
    "bench --config": "lm bench",
}
_notes: dict[str, None] = {}


def note_alias(old: str) -> None:
    """Say, once the command has ended, that ``mixerzoo OLD`` is now ``mixerzoo NEW`` (one line on
    stderr, never stdout; printed once however often it is asked for)."""
    _notes[f"note: `mixerzoo {old}` is now `mixerzoo {ALIASES[old]}`"] = None


def note_if_called_as(old: str) -> None:
    """:func:`note_alias` when the running command was invoked by the old name ``old``."""
    ctx = click.get_current_context(silent=True)
    if ctx is not None and ctx.command_path.split()[1:] == old.split():  # `mixerzoo run`, not `study run`
        note_alias(old)


def flush_notes(show: bool = True) -> None:
    """Print the pending alias notes on stderr (``show=False``: drop them) and forget them."""
    if show:
        for note in _notes:
            click.echo(note, err=True)
    _notes.clear()


def track_options(func):
    """``--track``, ``--track-dir``, ``--track-project``, ``--track-entity``, ``--track-mode``: live
    tracking of the runs a command trains (``experiments/tracking.py``)."""
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
    """The :class:`~mixerzoo.experiments.tracking.TrackSpec` of :func:`track_options`' values (None
    without ``--track``); a missing backend package is one ConfigError line, before any run starts."""
    from mixerzoo.experiments.tracking import TrackSpec

    if not options.get("track"):
        return None
    return TrackSpec(
        backends=tuple(options["track"]),
        log_dir=str(options.get("track_dir") or default_dir),
        project=options.get("track_project") or "mixerzoo",
        entity=options.get("track_entity"),
        mode=options.get("track_mode"),
    ).check()
