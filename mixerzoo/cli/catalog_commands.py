"""``mixerzoo mixers [NAME]`` and ``mixerzoo tasks [NAME]``: the registries, or one entry in detail;
``mixerzoo curves RUN_ID...``: what stored runs learned, evaluation by evaluation.

    mixerzoo mixers                 # every sequence and state mixer, one line each
    mixerzoo mixers cat             # its parameters: type, default, allowed values; its paper
    mixerzoo mixers my_pkg.mixers:MyMixer   # a class outside the package, by import path
    mixerzoo tasks mqar --json      # the same as JSON
    mixerzoo curves RUN_ID --out curves.png # learning curves (also --json)

The detail comes from the entry's pydantic ``Params`` model (types, defaults, bounds) and its
docstrings (summary, the paper it cites). A task's detail also gives the chance level of each
metric its runs record, at the default parameters (``mixerzoo.evaluation.chance``); a level
that needs data is measured on a small generated test split, and says so.
"""

from __future__ import annotations

import difflib
import inspect
import json
import re
import types
import typing
from typing import Any

import click

from mixerzoo.registry import ConfigError, short_repr

BOUNDS = {"ge": ">=", "gt": ">", "le": "<=", "lt": "<", "min_length": "length >=", "max_length": "length <="}


def type_name(annotation: Any) -> str:
    """``int``, ``float | None``, ``list[int]``, ``'a' | 'b'`` for a Literal."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Literal:
        return " | ".join(repr(a) for a in args)
    if origin in (typing.Union, types.UnionType):
        return " | ".join(type_name(a) for a in args)
    if origin is not None:
        name = getattr(origin, "__name__", str(origin))
        return f"{name}[{', '.join(type_name(a) for a in args)}]" if args else name
    if annotation is type(None):
        return "None"
    return getattr(annotation, "__name__", str(annotation).replace("typing.", ""))


def allowed(field) -> str:
    """The field's bounds (``>= 1``, ``> 0``) or its Literal choices; ``-`` when any value of its type."""
    parts = []
    for item in field.metadata:
        for attr, sign in BOUNDS.items():
            value = getattr(item, attr, None)
            if value is not None:
                parts.append(f"{sign} {value}")
    if typing.get_origin(field.annotation) is typing.Literal:
        parts.append(", ".join(map(str, typing.get_args(field.annotation))))
    return ", ".join(parts) or "-"


def parameters(model) -> list[dict[str, Any]]:
    """Every field of a Params model: name, type, default (``required`` without one), allowed, description."""
    rows = []
    for name, field in model.model_fields.items():
        default = "required" if field.is_required() else field.get_default(call_default_factory=True)
        rows.append(
            {
                "name": name,
                "type": type_name(field.annotation),
                "default": default,
                "allowed": allowed(field),
                "description": field.description or "",
            }
        )
    return rows


def reference(cls) -> str:
    """The paper a class cites: the last parenthesis with a year, a section or an arXiv id in the
    first paragraph of its module's docstring (else of its own); ``-`` without one."""
    for doc in (inspect.getmodule(cls).__doc__, cls.__doc__):
        paragraph = " ".join((doc or "").strip().split("\n\n")[0].split())
        found = [
            g for g in re.findall(r"\(([^()]*(?:\([^()]*\)[^()]*)*)\)", paragraph) if re.search(r"\d", g)
        ]
        if found:
            return found[-1]
    return "-"


def summary(cls) -> str:
    doc = (cls.__doc__ or "").strip().splitlines()
    return doc[0] if doc else ""


def unknown(kind: str, name: str, names: list[str]) -> ConfigError:
    close = difflib.get_close_matches(name, names, n=3, cutoff=0.5)
    hint = f"; close matches: {', '.join(close)}" if close else ""
    return ConfigError(f"unknown {kind} {short_repr(name)}{hint} (`mixerzoo {kind}s` lists them)")


def echo_detail(info: dict[str, Any]) -> None:
    click.echo(f"{info['name']} ({info['kind']}): {info['description']}")
    click.echo(f"paper: {info['reference']}")
    for key, label in (("params_d64", "parameters at d_model=64"), ("output", "output")):
        if key in info:
            click.echo(f"{label}: {info[key]:,}" if isinstance(info[key], int) else f"{label}: {info[key]}")
    rows = info["parameters"]
    if not rows:
        click.echo("no parameters")
    else:
        width = {
            k: max(len(k), *(len(str(r[k])) for r in rows)) for k in ("name", "type", "default", "allowed")
        }
        click.echo("  ".join(k.ljust(width[k]) for k in width) + "  description")
        for r in rows:
            click.echo("  ".join(str(r[k]).ljust(width[k]) for k in width) + f"  {r['description']}")
    if "chance" in info:
        echo_chance(info["chance"])


def format_level(value: float | None) -> str:
    """A chance value: 4 significant digits, scientific notation below 1e-4; ``-`` when unknown."""
    if value is None:
        return "-"
    return f"{value:.4g}" if value == 0 or abs(value) >= 1e-4 else f"{value:.3e}"


def echo_chance(rows: list[dict[str, Any]]) -> None:
    """One line per metric: ``chance METRIC = VALUE  (why[, measured on N generated test examples])``."""
    click.echo("chance levels (at the default parameters; what a model that learned nothing scores):")
    width = max(len(r["metric"]) for r in rows)
    for r in rows:
        where = (
            f"; measured on {r['measured_on']} generated test examples, seed {r['seed']}"
            if r["measured_on"]
            else ""
        )
        click.echo(f"  chance {r['metric'].ljust(width)} = {format_level(r['value'])}  ({r['basis']}{where})")


def mixer_rows() -> list[dict[str, Any]]:
    from mixerzoo.mixers import SEQUENCE_MIXERS, STATE_MIXERS
    from mixerzoo.params import defaults_of

    rows = []
    for kind, reg in (("sequence", SEQUENCE_MIXERS), ("state", STATE_MIXERS)):
        for name in reg.names():
            rows.append(_mixer_row(name, kind, reg.get(name), defaults_of))
    return rows


def _mixer_row(name: str, kind: str, cls, defaults_of) -> dict[str, Any]:
    row: dict[str, Any] = {
        "name": name,
        "kind": kind,
        "description": summary(cls),
        "defaults": defaults_of(cls.Params),
    }
    module = cls(64, 256) if kind == "sequence" else cls(64)
    row["params_d64"] = sum(p.numel() for p in module.parameters())
    if kind == "sequence":
        row["recurrent"] = bool(cls.recurrent)
        row["state_size_d64"] = module.state_size()
        row["needs_input_ids"] = bool(cls.needs_input_ids)
    return row


def mixer_detail(name: str) -> dict[str, Any]:
    """A registered mixer's detail, or that of a class named by import path (``pkg.mod:Class``)
    or offered by an installed plugin: whichever registry (sequence, state) takes it."""
    from mixerzoo.mixers import SEQUENCE_MIXERS, STATE_MIXERS
    from mixerzoo.params import defaults_of
    from mixerzoo.registry import is_import_path

    registries = (("sequence", SEQUENCE_MIXERS), ("state", STATE_MIXERS))
    for kind, reg in registries:
        if name in reg.names():
            return _mixer_detail(name, kind, reg.get(name), defaults_of)
    outside = is_import_path(name) or any(name in reg.plugin_names() for _, reg in registries)
    errors = []
    for kind, reg in registries if outside else ():
        try:
            return _mixer_detail(name, kind, reg.get(name), defaults_of)
        except ConfigError as err:
            errors.append(str(err))
    if errors and not any(": not a " in e for e in errors[:1]):
        raise ConfigError(errors[0])  # the import itself failed: say why
    if errors:
        raise ConfigError(
            f"mixer {short_repr(name)}: neither a sequence mixer nor a state mixer ({errors[0]})"
        )
    raise unknown("mixer", name, [*SEQUENCE_MIXERS.names(), *STATE_MIXERS.names()])


def _mixer_detail(name: str, kind: str, cls, defaults_of) -> dict[str, Any]:
    row = _mixer_row(name, f"{kind} mixer", cls, defaults_of)
    return {**row, "reference": reference(cls), "parameters": parameters(cls.Params)}


def _show(detail, rows, name: str | None, as_json: bool) -> list[dict[str, Any]]:
    """Print NAME's detail or, with --json, every row; return the rows left for a table (or none)."""
    if name is not None:
        info = detail(name)
        if as_json:
            click.echo(json.dumps(info, indent=2, default=str))
        else:
            echo_detail(info)
        return []
    if as_json:
        click.echo(json.dumps(rows(), indent=2, default=str))
        return []
    return rows()


@click.command()
@click.argument("name", required=False)
@click.option("--json", "as_json", is_flag=True)
def mixers(name: str | None, as_json: bool) -> None:
    """The registered mixers; with NAME, one in detail.

    NAME's detail: its summary and paper, every parameter with its type, default and allowed values."""
    rows = _show(mixer_detail, mixer_rows, name, as_json)
    for r in rows:
        extra = f" (params at d=64: {r['params_d64']:,})"
        click.echo(f"{r['name']:<22} {r['kind']:<9} {r['description']}{extra}")


def task_rows() -> list[dict[str, Any]]:
    from mixerzoo.params import defaults_of
    from mixerzoo.tasks import TASKS

    rows = []
    for name in TASKS.names():
        cls = TASKS.get(name)
        params = {
            k: {"default": f.get_default(call_default_factory=True), "description": f.description}
            for k, f in cls.Params.model_fields.items()
        }
        row = {"name": name, "description": summary(cls), "defaults": defaults_of(cls.Params)}
        rows.append({**row, "parameters": params, "output": cls.output})
    return rows


def task_detail(name: str) -> dict[str, Any]:
    from mixerzoo.params import defaults_of
    from mixerzoo.tasks import TASKS

    if name not in TASKS.names():
        raise unknown("task", name, list(TASKS.names()))
    from mixerzoo.evaluation.chance import chance_table

    cls = TASKS.get(name)
    return {
        "name": name,
        "kind": "task",
        "description": summary(cls),
        "reference": reference(cls),
        "output": cls.output,
        "defaults": defaults_of(cls.Params),
        "parameters": parameters(cls.Params),
        "chance": chance_table(cls()),
    }


@click.command()
@click.argument("name", required=False)
@click.option("--json", "as_json", is_flag=True)
def tasks(name: str | None, as_json: bool) -> None:
    """The registered tasks; with NAME, one in detail.

    NAME's detail: its summary and paper, every parameter with its type, default and allowed values,
    and the chance level of each metric its runs record (at the defaults; a level that needs data is
    measured on 200 generated test examples)."""
    rows = _show(task_detail, task_rows, name, as_json)
    for r in rows:
        click.echo(f"{r['name']:<16} {r['description']}")


@click.command()
@click.argument("run_ids", nargs=-1, required=True, metavar="RUN_ID...")
@click.option("--results", default=None, help="results directory (default: $MIXERZOO_RESULTS or ./results)")
@click.option("--metric", "metrics", multiple=True, help="only this metric (repeatable; default: every one)")
@click.option(
    "--json", "as_json", is_flag=True, help="print {run_id: [{step, epoch, wall_s, split, metric, value}]}"
)
@click.option("--out", default=None, help="write the curves as a figure (PNG, SVG or PDF by the suffix)")
def curves(
    run_ids: tuple[str, ...], results: str | None, metrics: tuple[str, ...], as_json: bool, out
) -> None:
    """Learning curves of stored runs: every evaluation's metrics by step, per split.

    RUN_ID is a run ID (`mixerzoo results`) or a config hash prefix (`study run --dry-run`)."""
    from mixerzoo.evaluation.learning_curves import plot_curves
    from mixerzoo.outputs import check_output_path
    from mixerzoo.studies.listing import run_curves

    target = None if out is None else check_output_path(out, "--out")
    found = run_curves(results, list(run_ids))
    if metrics:
        found = {run: [r for r in rows if r["metric"] in metrics] for run, rows in found.items()}
    if as_json:
        click.echo(json.dumps(found, indent=2))
    else:
        _echo_curves(found)
    if target is not None:
        click.echo(f"wrote {plot_curves(found, target, metrics)}", err=as_json)


def _echo_curves(found: dict[str, list[dict[str, Any]]]) -> None:
    """One line per run, split and metric: ``step:value`` at each evaluation."""
    for run, rows in found.items():
        if not rows:
            click.echo(f"{run}: no evaluations recorded")
        for split, metric in dict.fromkeys((r["split"], r["metric"]) for r in rows):
            points = [
                f"{r['step']}:{r['value']:.4g}" for r in rows if (r["split"], r["metric"]) == (split, metric)
            ]
            click.echo(f"{run} {split:<5} {metric}: {' '.join(points)}")


COMMANDS: list[click.Command] = [mixers, tasks, curves]
