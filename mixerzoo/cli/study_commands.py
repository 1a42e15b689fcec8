"""``mixerzoo study``: every kind of study behind one set of verbs.

    mixerzoo study list                                   # sweeps, MAD, computed, LM and probe studies
    mixerzoo study show cat-mqar                          # presets and run counts, axes, the paper's claims
    mixerzoo study run cat-mqar --preset quick            # the CAT MQAR figure on a laptop (minutes)
    mixerzoo study run cat-mqar --preset paper --executor ray --address ray://head:10001 --num-gpus 1
    mixerzoo study run cat-fig4 --set trials=100          # a computed result (Props. 1-2, Fig. 4)
    mixerzoo study plot cat-mqar --out figures/           # PNG + SVG in the paper's layout
    mixerzoo study plot cat-mqar --format pdf --no-title --band std   # for a paper: PDF, mean +- std
    mixerzoo study report cat-mqar [--json]               # one HTML page; --json: the claims' verdicts
    mixerzoo study check cat-mqar                         # exit 1 when a claim is not reproduced
    mixerzoo study check cat-mqar --template cells.json   # the planned cells, to fill in with any numbers
    mixerzoo study check cat-mqar --cells cells.json      # judge the claims on them (no results store)
    mixerzoo study run mad --preset quick --set model=attention   # the MAD protocol for one architecture
    mixerzoo study run icll-fig2 --add-model mypkg.mixers:MyMixer   # yours beside the paper's models
    mixerzoo study run --all --preset quick --results all/   # every study, checked; the verdict table

``--set`` (repeatable) overrides the study. For a sweep: ``model=NAME`` runs only that model: one
variant of the file, or a registered sequence mixer or import path ``pkg.mod:Class`` as the only
variant; ``model={d_model: 64, mixer: gla}`` (YAML) is the only variant, ``custom``, merged into
``base.model``; ``PATH=VALUE`` (a dotted run-config path) is set at every run, after the preset.
For a computed study: one of its parameters. ``--add-model X`` (repeatable; sweeps and MAD) takes
the same values as ``model=`` but adds X beside the preset's own variants, planned with the same
grid and rules, so a new mixer is trained and shown beside the paper's models; the claims still
read the file's own variants only (the Python API: ``sets={"+model": X}`` or a list). Give plot /
report / check the same ``--set`` and ``--add-model`` as the run: their report and figure are
marked "modified preset" where their numbers differ from the preset's, and written beside the
study's own files as ``NAME-modified`` (unless ``--out`` names the file).

NAME is a shipped name (``mixerzoo study list``) or a path to a study YAML file. ``plot``,
``report`` and ``check`` read what ``run`` stored; without ``--preset`` a sweep uses the preset
with the most finished runs there. Which implementation serves NAME is decided below the command
line, by :func:`mixerzoo.studies.dispatch.find_study`.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

import click

from mixerzoo.cli.common import RESULTS_HELP, parse_sets, track_options
from mixerzoo.cli.paths import OutputPath
from mixerzoo.outputs import check_output_path, write_json
from mixerzoo.registry import ConfigError
from mixerzoo.store.lookup import results_root


class Resource(click.FloatRange):
    """Ray resources per run (``--num-cpus``, ``--num-gpus``): a finite count or fraction, at least 0."""

    def __init__(self) -> None:
        super().__init__(min=0, max=1_000_000)

    def convert(self, value, param, ctx):
        value = super().convert(value, param, ctx)
        if value != value:  # NaN passes every range comparison
            self.fail("nan is not a number of devices", param, ctx)
        return value


RESOURCE = Resource()
SET_OPTION = click.option(
    "--set",
    "sets",
    multiple=True,
    metavar="KEY=VALUE",
    help="override (repeatable): model=NAME runs ONLY that model (a variant of the study, a mixer name "
    "or pkg.mod:Class; model={...} a YAML mapping); a dotted path (model.d_model=64) sets every run; "
    "or a computed study's parameter",
)
ADD_MODEL_OPTION = click.option(
    "--add-model",
    "add_models",
    multiple=True,
    metavar="MODEL",
    help="train MODEL BESIDE the study's own models, same grid and rules (repeatable; sweeps and MAD): "
    "a variant of the study, a mixer name, pkg.mod:Class, or a YAML mapping such as "
    "'{mixer: {name: gla}, d_model: 64}' (named custom, custom2, ...); the claims still read the "
    "study's own models",
)
PRESET_OPTION = click.option(
    "--preset", default=None, help="quick or paper (default: the preset with most finished runs)"
)
RESULTS_OPTION = click.option("--results", default=None, help=RESULTS_HELP)
NAME = click.argument("name", metavar="NAME")


def console():
    """Where a study's text and JSON go: click's stdout / stderr and the CLI's checked paths."""
    from mixerzoo.studies.base import Console

    return Console(
        echo=click.echo,
        write_json=write_json,
        check_dir=lambda path, what: check_output_path(str(path), what, "dir"),
    )


def where(results: str | None):
    from mixerzoo.studies.base import ResultsDir

    return ResultsDir(results_root(results), explicit=results is not None)


def find(name: str):
    from mixerzoo.studies.dispatch import find_study

    return find_study(name)


def overrides_of(chosen, sets: tuple[str, ...], add_models: tuple[str, ...]) -> dict:
    """``--set`` and ``--add-model`` as one dict of overrides: the added models (each read as YAML,
    so a mapping is a mapping) under :data:`~mixerzoo.studies.sweep.overrides.ADD_MODEL`."""
    from mixerzoo.config import parse_yaml
    from mixerzoo.studies import kinds
    from mixerzoo.studies.sweep.overrides import ADD_MODEL

    overrides = parse_sets(tuple(sets))
    if not add_models:
        return overrides
    if chosen.kind not in kinds.of_family("grid"):
        raise ConfigError(f"--add-model: for sweep and MAD studies; {chosen.name} is a {chosen.kind} study")
    given = overrides.pop(ADD_MODEL, [])
    values = [*(given if isinstance(given, list) else [given])]
    values += [parse_yaml(v, f"--add-model {v!r}") for v in add_models]
    overrides[ADD_MODEL] = values[0] if len(values) == 1 else values
    return overrides


@click.group(name="study")
def study() -> None:
    """Every kind of study: list, show, run, plot, report, check.

    Kinds: sweep (a grid of runs), mad (the MAD protocol), computed (constructions and bounds),
    lm (language-model studies), probe (probe and pairwise studies)."""


@study.command(name="list")
@click.option("--json", "as_json", is_flag=True, help="print [{name, kind, paper_ref, runs, claims, ...}]")
def list_cmd(as_json: bool) -> None:
    """List every shipped study: name, kind, paper reference, runs per preset, claims, and the
    quick preset's measured wall time on the project machine (2 CPU cores; ``<=``: measured beside
    other work; ``after X``: measured after study X in one results folder, reusing its runs; ``-``:
    not timed yet), then the sum over the studies ``study run --all`` runs and those over the
    20-minute goal."""
    from mixerzoo.studies import kinds
    from mixerzoo.studies.quick_times import quick_time_text, quick_times, quick_total_text
    from mixerzoo.studies.study_list import study_rows_cached

    rows = study_rows_cached()
    if as_json:
        timed = quick_times()
        rows = [{**r, "quick_wall_time": timed.get(r["name"])} for r in rows]
        click.echo(json.dumps(rows, indent=2, default=str))
        return
    times = {r["name"]: _quick_time(r, quick_time_text) for r in rows}
    wide = max(20, *map(len, times.values()))
    click.echo(
        f"{'name':<38} {'kind':<9} {'runs per preset':<26} {'claims':>6}  {'quick, 2 cores':<{wide}} paper"
    )
    for r in rows:
        runs = ", ".join(f"{k} {v}" for k, v in r["runs"].items())
        when, claims = times[r["name"]], len(r["claims"])
        click.echo(f"{r['name']:<38} {r['kind']:<9} {runs:<26} {claims:>6}  {when:<{wide}} {r['paper_ref']}")
    click.echo(quick_total_text([r["name"] for r in rows if kinds.KINDS[r["kind"]].study_class().in_run_all]))


def _quick_time(row: dict[str, Any], measured: Callable[[str], str]) -> str:
    """The quick-time column: "paper preset only" where the quick preset plans no runs for a
    measured reason (``study show`` gives it), else the measured time."""
    return "paper preset only" if "quick" in row.get("paper_only", {}) else measured(row["name"])


def _battery_lines(info: dict) -> list[str]:
    """A scorecard's battery per preset: each item's study cell and settings, and MAD's runs."""
    lines = []
    for preset, items in (info.get("items") or {}).items():
        lines.append(f"  {preset} battery:")
        for item in items:
            lines.append(f"    {item['key']}: {item['study']} ({item['where']})")
        mad = (info.get("mad") or {}).get(preset)
        if mad:
            narrowed = "".join(f", {k}={v}" for k, v in mad["grid"].items())
            levels = "all" if mad["n_levels"] is None else mad["n_levels"]
            lines.append(f"    mad: {mad['study']}'s six tasks (levels per task={levels}{narrowed})")
    return lines


@study.command(name="show")
@NAME
@click.option("--json", "as_json", is_flag=True, help="print the study's description as JSON")
def show(name: str, as_json: bool) -> None:
    """Describe study NAME: what it measures, its presets with run counts, axes, the paper's claims."""
    from mixerzoo.claims.base import PAPER_ONLY_EVIDENCE

    info = find(name).describe()
    if as_json:
        click.echo(json.dumps(info, indent=2, default=str))
        return
    click.echo(f"{info['name']} ({info['kind']}): {info['paper_ref']}")
    for text in (info.get("description"), info.get("claim"), info.get("details")):
        if text:
            click.echo(f"  {' '.join(str(text).split())}")
    click.echo("presets: " + ", ".join(f"{k} ({v} run{'s' * (v != 1)})" for k, v in info["runs"].items()))
    for preset, why in (info.get("paper_only") or {}).items():
        click.echo(f"  {preset}: {PAPER_ONLY_EVIDENCE}{' '.join(why.split())}")
    for preset, why in (info.get("claims_paper_only") or {}).items():
        click.echo(f"  {preset}: runs; its claims are for the paper preset only: {' '.join(why.split())}")
    for axis, values in (info.get("axes") or {}).items():
        click.echo(f"  axis {axis}: {', '.join(map(str, values))}")
    for preset, params in (info.get("parameters") or {}).items():
        click.echo(f"  {preset}: " + ", ".join(f"{k}={v}" for k, v in params.items()))
    for line in _battery_lines(info):
        click.echo(line)
    click.echo(f"claims ({len(info['claims'])}):")
    for c in info["claims"]:
        click.echo(f'  "{c["claim"]}" ({c["paper_ref"]})')
        for preset, why in (c.get("paper_only") or {}).items():
            click.echo(f"    {preset}: {PAPER_ONLY_EVIDENCE}{' '.join(why.split())}")
    click.echo(f"file: {info['path']}")


@study.command(name="run")
@click.argument("name", metavar="NAME", required=False)
@click.option(
    "--preset", default=None, help="quick (CPU, minutes; the default) or paper (the paper's settings)"
)
@click.option(
    "--all",
    "run_every",
    is_flag=True,
    help="every shipped study's preset (default quick), one after another in one results folder, "
    "each checked; resumable; writes the verdict table to <results>/run-all/",
)
@click.option("--again", is_flag=True, help="--all: run the studies that finished before too")
@RESULTS_OPTION
@click.option("--executor", type=click.Choice(["local", "ray"]), default="local", show_default=True)
@click.option(
    "--workers",
    default=1,
    show_default=True,
    type=click.IntRange(min=1),
    help="local: worker processes (torch threads = cores // workers; one GPU each, round robin)",
)
@click.option(
    "--runs-per-gpu",
    default=None,
    type=click.IntRange(min=1),
    help="local: K runs share each visible GPU (workers = GPUs x K); instead of --workers",
)
@click.option("--address", default=None, help="ray: cluster address (default: start a local Ray instance)")
@click.option("--num-cpus", default=1.0, show_default=True, type=RESOURCE, help="ray: CPUs per run")
@click.option("--num-gpus", default=0.0, show_default=True, type=RESOURCE, help="ray: GPUs per run")
@click.option("--skip-failed", is_flag=True, help="do not retry configs that failed before")
@click.option(
    "--reuse-stale",
    is_flag=True,
    help="reuse finished runs made by other code (a mixer, task or mixerzoo version changed since) "
    "instead of training them again; the report says how many",
)
@click.option(
    "--dry-run",
    is_flag=True,
    help="list the planned runs, which are finished, and their tokens, FLOPs and GPU-hours; run nothing",
)
@click.option("--gpu", default="h100", show_default=True, help="--dry-run: GPU-hours on h100, h200, a100, l4")
@click.option(
    "--utilisation",
    default=0.4,
    show_default=True,
    type=float,
    help="--dry-run: the share of the GPU's dense bf16 peak a run reaches",
)
@track_options
@click.option("--quiet", is_flag=True, help="no progress bar")
@click.option(
    "--json",
    "json_out",
    default=None,
    type=OutputPath(stdout=True),
    help="computed studies: also write the result JSON here (- for stdout)",
)
@SET_OPTION
@ADD_MODEL_OPTION
def run(name, preset, results, sets, add_models, run_every, again, **options) -> None:
    """Run every not-yet-finished run of study NAME (resumable: finished configs are skipped).

    A sweep's run that fails is recorded with its error and the sweep goes on; a full disk stops
    it (exit 1). A computed study prints what the statement predicts beside what was measured;
    exit 1 when one of its claims is not reproduced. With ``--all`` instead of NAME: every
    shipped study's preset, then its check; exit 1 when a study failed to run.
    """
    if run_every:
        run_every_study(name, preset, results, (*sets, *add_models), again, options)
        return
    if name is None:
        raise ConfigError("give a study NAME (see 'mixerzoo study list') or --all")
    if again:
        raise ConfigError("--again: for --all")
    run_study(name, preset, results, sets, add_models, options)


def run_every_study(name, preset, results, sets, again: bool, options: dict) -> None:
    """``study run --all``: :func:`mixerzoo.studies.run_all.run_all`."""
    from mixerzoo.studies.base import RunOptions
    from mixerzoo.studies.run_all import run_all

    if name is not None:
        raise ConfigError(f"--all runs every shipped study; drop {name!r} (or drop --all)")
    allowed = {"executor", "workers", "runs_per_gpu", "address", "num_cpus", "num_gpus", "quiet", "track"}
    given = RunOptions(**{**options, "track": tuple(options.get("track", ()))})
    extra = [o for o in given.changed(*(k for k in options if k not in allowed))]
    if sets or extra:
        raise ConfigError(
            f"{', '.join([*(['--set / --add-model'] if sets else []), *extra])}: not with --all "
            "(one study at a time)"
        )
    code = run_all(preset or "quick", where(results), given, console(), again=again)
    if code:
        sys.exit(code)


def run_study(name, preset, results, sets, add_models, options: dict) -> None:
    """``study run``: :func:`find` picks the implementation of study NAME."""
    import shlex

    from mixerzoo.studies.base import RunOptions

    chosen = find(name)
    overrides = overrides_of(chosen, sets, add_models)
    again = "".join(f" --set {shlex.quote(item)}" for item in sets)
    again += "".join(f" --add-model {shlex.quote(item)}" for item in add_models)
    again += "" if results is None else f" --results {results}"
    opts = RunOptions(**{**options, "track": tuple(options.get("track", ()))}, again=again)
    code = chosen.run(preset, overrides, where(results), opts, console())
    if code:
        sys.exit(code)


@study.command(name="plot")
@NAME
@PRESET_OPTION
@click.option(
    "--out",
    "out_dir",
    default=None,
    type=OutputPath("dir"),
    help="output directory (default: <results>/figures); a modified preset's figure is NAME-modified",
)
@RESULTS_OPTION
@SET_OPTION
@ADD_MODEL_OPTION
@click.option("--title", default=None, help="the figure's title (default: the study's, in words)")
@click.option("--no-title", is_flag=True, help="draw no title (a paper's caption carries it)")
@click.option(
    "--format",
    "formats",
    multiple=True,
    type=click.Choice(["png", "pdf", "svg"]),
    help="file format, repeatable (default: png and svg)",
)
@click.option("--dpi", default=200, show_default=True, type=click.IntRange(min=10, max=2400))
@click.option(
    "--band",
    default="minmax",
    show_default=True,
    type=click.Choice(["minmax", "std", "none"]),
    help="spread over seeds around their mean: min to max, one standard deviation, or no mean line",
)
def plot(name, preset, out_dir, results, sets, add_models, title, no_title, formats, dpi, band) -> None:
    """Draw study NAME's figure (PNG and SVG) from the results store, and print its numbers.

    With --set or --add-model the figure is NAME-modified.png / .svg, marked where its points
    differ from the preset's."""
    from mixerzoo.studies.sweep.plots import FigureStyle

    chosen = find(name)
    style = FigureStyle(
        title=title,
        show_title=not no_title,
        formats=tuple(formats) or ("png", "svg"),
        dpi=dpi,
        band=None if band == "none" else band,
    )
    given = title is not None or no_title or formats or dpi != 200 or band != "minmax"
    if given and chosen.kind != "sweep":
        raise ConfigError(
            f"--title, --no-title, --format, --dpi and --band style a sweep's figure; {name} is a "
            f"{chosen.kind}"
        )
    extra = {"style": style} if chosen.kind == "sweep" else {}
    chosen.plot(preset, overrides_of(chosen, sets, add_models), where(results), out_dir, console(), **extra)


@study.command(name="report")
@NAME
@PRESET_OPTION
@click.option(
    "--out",
    "out_file",
    default=None,
    type=OutputPath(),
    help="HTML file (default: <results>/reports/<name>.html; with --set or --add-model <name>-modified.html)",
)
@RESULTS_OPTION
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help='print {"claims": [{claim, paper_ref, source, verdict, evidence, premise, stand_ins}], "runs", '
    '"cells", ...} instead of text',
)
@SET_OPTION
@ADD_MODEL_OPTION
def report(name, preset, out_file, results, as_json, sets, add_models) -> None:
    """Write a self-contained HTML report: the paper's claims checked, figure, table, run configs."""
    chosen = find(name)
    overrides = overrides_of(chosen, sets, add_models)
    chosen.report(preset, overrides, where(results), out_file, as_json, console())


@study.command(name="check")
@NAME
@PRESET_OPTION
@RESULTS_OPTION
@click.option(
    "--template",
    "template_out",
    default=None,
    type=OutputPath(stdout=True),
    help="write the preset's planned cells with every metric the claims read (null), to fill in",
)
@click.option(
    "--cells",
    "cells_file",
    default=None,
    metavar="FILE.json",
    help="judge the claims on this filled-in template instead of the results store",
)
@click.option(
    "--json",
    "json_out",
    default=None,
    type=OutputPath(stdout=True),
    help="also write {study, preset, counts, claims} here (- for stdout)",
)
@SET_OPTION
@ADD_MODEL_OPTION
def check(name, preset, results, sets, add_models, template_out, cells_file, json_out) -> None:
    """Check study NAME's claims against what was run: exit 1 when one is not reproduced.

    Only cells whose runs have all finished decide a verdict; a claim with none is "not run" and
    one whose premise does not hold is "inconclusive" (both printed, exit 0). Usable in CI:
    `mixerzoo study run NAME --preset quick && mixerzoo study check NAME`. `--template FILE.json`
    writes the planned cells to fill in with numbers from anywhere; `--cells FILE.json` judges them.
    """
    chosen = find(name)
    overrides = overrides_of(chosen, sets, add_models)
    if template_out is not None or cells_file is not None:
        code = check_without_store(chosen, preset, overrides, results, template_out, cells_file, json_out)
    else:
        code = chosen.check(preset, overrides, where(results), console(), json_out=json_out)
    if code:
        sys.exit(code)


def check_without_store(chosen, preset, overrides, results, template_out, cells_file, json_out) -> int:
    """``check --template`` / ``--cells``: no results store is read."""
    from mixerzoo.registry import ConfigError

    if template_out is not None and cells_file is not None:
        raise ConfigError("--template and --cells: give one (write a template, or judge a filled one)")
    if results is not None:
        raise ConfigError("--results: --template and --cells do not read a results store")
    if template_out is not None:
        if json_out is not None:
            raise ConfigError("--json: with --template the template itself is the JSON")
        table = chosen.template(preset, overrides)
        write_json(template_out, table)
        if template_out != "-":
            click.echo(
                f"wrote {template_out}: {len(table['cells'])} cells, metrics {', '.join(table['metrics'])}"
            )
        return 0
    return chosen.check_cells(preset, overrides, read_cells_file(cells_file), console(), json_out=json_out)


def read_cells_file(path: str):
    """The JSON of a ``--cells`` file; a missing or malformed one is one ConfigError line."""
    from pathlib import Path

    from mixerzoo.registry import ConfigError

    try:
        return json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise ConfigError(f"--cells {path!r}: no such file") from None
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigError(
            f"--cells {path!r}: cannot read ({getattr(err, 'strerror', None) or err})"
        ) from None
    except ValueError as err:
        raise ConfigError(f"--cells {path!r}: not JSON ({str(err).splitlines()[0]})") from None


COMMANDS: list[click.Command] = [study]
