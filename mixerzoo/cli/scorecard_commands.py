"""``mixerzoo scorecard``: one mixer placed among the zoo's shipped reference results.

mixerzoo scorecard gla                               # a registered mixer
mixerzoo scorecard mymod:MyMixer --out sc/           # a mixer defined outside the package
mixerzoo scorecard --set model='{mixer: {name: gla, num_heads: 2}}' --name gla-2h
mixerzoo scorecard mymod:MyMixer --dry-run           # what it would train, and how long
mixerzoo scorecard --rebuild-references [--only gla,mamba] [--dry-run]   # re-make the shipped references
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from mixerzoo.cli.common import RESULTS_HELP, parse_sets, text_echo
from mixerzoo.cli.paths import OutputPath
from mixerzoo.outputs import check_output_path, write_json
from mixerzoo.registry import ConfigError
from mixerzoo.store.lookup import results_root


def _names(value: str | None, what: str) -> list[str] | None:
    if value is None:
        return None
    names = [v.strip() for v in value.split(",") if v.strip()]
    if not names:
        raise ConfigError(f"{what}: expected comma-separated mixer names")
    return names


def _spec(mixer: str | None, sets: tuple[str, ...]):
    given = parse_sets(sets)
    extra = sorted(k for k in given if k != "model")
    if extra:
        raise ConfigError(
            f"--set {extra[0]}: the scorecard takes only --set model=... (the battery fixes the rest)"
        )
    if mixer is not None and "model" in given:
        raise ConfigError("give the mixer once: MIXER or --set model=..., not both")
    if mixer is None and "model" not in given:
        raise ConfigError(
            "name the mixer to score: mixerzoo scorecard MIXER (a name, pkg.mod:Class or --set model=...)"
        )
    return mixer if mixer is not None else given["model"]


@click.command()
@click.argument("mixer", required=False)
@click.option(
    "--set", "sets", multiple=True, metavar="model=...", help="the model as a mapping: model='{mixer: {...}}'"
)
@click.option("--name", default=None, help="the scored mixer's row name (default: its name or class)")
@click.option("--preset", default="quick", show_default=True, help="quick (2 CPU cores) or paper (GPU-sized)")
@click.option("--against", default=None, help="comma-separated references to show (default: all shipped)")
@click.option("--results", default=None, help=RESULTS_HELP)
@click.option("--out", default=None, help="folder for table.md, scorecard.html, figures, scorecard.json")
@click.option(
    "--json", "json_out", default=None, type=OutputPath(stdout=True), help="the table as JSON (- for stdout)"
)
@click.option(
    "--items",
    default=None,
    help="comma-separated columns or groups to score (default: all), e.g. recall,icll or mqar-L64-d64,mad",
)
@click.option("--dry-run", is_flag=True, help="print what would be trained and the expected wall time")
@click.option("--no-train", is_flag=True, help="read what the results folder holds; train nothing")
@click.option("--rebuild-references", is_flag=True, help="re-make the shipped references (resumable)")
@click.option("--only", default=None, help="with --rebuild-references: these references only")
@click.option("--references-dir", default=None, help="read/write references here instead of the package's")
@click.option(
    "--battery", "battery_file", default=None, help="a battery YAML file (default: the shipped one)"
)
@click.option("--quiet", is_flag=True, help="no progress bars (shown while an item trains, on a terminal)")
@click.option(
    "--workers",
    type=click.IntRange(min=1),
    default=None,
    help="training processes, each with its share of the cores; the battery's runs are shared out, "
    "the longest first (default: one per CPU core on a machine without a GPU, 1 with one)",
)
def scorecard(
    mixer,
    sets,
    name,
    preset,
    against,
    results,
    out,
    json_out,
    items,
    dry_run,
    no_train,
    rebuild_references,
    only,
    references_dir,
    battery_file,
    quiet,
    workers,
) -> None:
    """Place MIXER among the zoo on recall, copying, in-context learning, long-range tasks and cost.

    MIXER is a registered mixer name or an import path ``pkg.mod:Class``; ``--set model={...}`` gives
    a model mapping. Each column is a cell of a shipped study (``mixerzoo study show scorecard``),
    trained with the study's own recipe into the results folder (resumable: run it again to go on)
    and ranked against the shipped references, ties within noise. Writes the table, an HTML page and
    two figures (recall against state, throughput against length) to --out.
    """
    from mixerzoo.studies.scorecard.battery import load_battery
    from mixerzoo.studies.scorecard.card import default_workers

    echo = text_echo(json_out)
    workers = workers or default_workers()
    battery = load_battery(battery_file) if battery_file else load_battery()
    folder = Path(references_dir) if references_dir else None
    progress = not quiet and sys.stderr.isatty()
    if rebuild_references:
        if items:
            raise ConfigError("--rebuild-references makes whole references: --items is for a scored mixer")
        how = (dry_run, progress, workers)
        _rebuild(battery, preset, results, _names(only, "--only"), folder, echo, mixer or sets, how)
        return
    spec = _spec(mixer, sets)
    wanted = _names(items, "--items")
    if dry_run:
        part = battery.narrowed(preset, wanted) if wanted else battery
        _dry_run(spec, preset, part, name, folder, results, echo, workers)
        return
    output = (out, json_out, echo, progress, workers)  # where the table goes; how the training runs
    _score(spec, preset, battery, name, folder, results, against, not no_train, wanted, output)


def _store(results: str | None, train: bool):
    """The results store: created to train into; read only (None when absent) otherwise."""
    from mixerzoo.store.results import DB_NAME, ResultsStore

    root = results_root(results)
    check_output_path(str(root), "--results", "dir")
    if train:
        return ResultsStore(root)
    return ResultsStore(root, create=False, read_only=True) if (root / DB_NAME).is_file() else None


def _dry_run(spec, preset, battery, name, folder, results, echo, workers) -> None:
    from mixerzoo.studies.scorecard.scoring import dry_run_lines

    store = _store(results, train=False)
    for line in dry_run_lines(spec, preset, battery, name, folder, store, workers=workers):
        echo(line)


def _score(spec, preset, battery, name, folder, results, against, train, items, output):
    """Score ``spec`` among the references; ``output``: (--out folder, --json, echo, progress bars,
    worker processes). ``--out`` and ``--against`` are checked before anything trains."""
    from mixerzoo.studies.scorecard.scoring import score, write_outputs

    out, json_out, echo, progress, workers = output
    target = Path(check_output_path(out, "--out", "dir")) if out else None
    against = _names(against, "--against")
    store = _store(results, train)
    outcome = score(
        spec,
        preset,
        store,
        battery,
        against,
        name,
        echo,
        train,
        folder=folder,
        items=items,
        progress=progress,
        workers=workers,
    )
    label = outcome.highlight or "scorecard"
    paths = write_outputs(outcome, target or results_root(results) / "scorecard" / f"{label}-{preset}")
    echo(outcome.markdown)
    for note in outcome.notes:
        echo(f"note: {note}")
    echo(f"wrote {paths[0].parent} (scorecard.html, table.md, scorecard.json, figures)")
    if json_out:
        write_json(json_out, outcome.as_json())


def _rebuild(battery, preset, results, only, folder, echo, given, how=(False, False, 1)) -> None:
    """``how``: (--dry-run, progress bars, worker processes)."""
    from mixerzoo.store.results import ResultsStore
    from mixerzoo.studies.scorecard.references import rebuild

    dry_run, progress, workers = how
    if given:
        raise ConfigError("--rebuild-references takes no MIXER or --set; --only narrows the references")
    if dry_run:  # plan only: nothing is trained and no results folder is created
        from mixerzoo.studies.scorecard.scoring import rebuild_dry_run_lines

        store = _store(results, train=False)
        for line in rebuild_dry_run_lines(battery, preset, only, folder, store, workers=workers):
            echo(line)
        return
    root = results_root(results)
    check_output_path(str(root), "--results", "dir")
    store = ResultsStore(root)
    cards = rebuild(
        battery, preset, store, log=echo, only=only, folder=folder, progress=progress, workers=workers
    )
    echo(f"{len(cards)} references for the {preset} preset")


COMMANDS = [scorecard]
