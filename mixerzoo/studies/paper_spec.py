"""Paper specs: every setting a paper states for a study's ``paper`` preset, checked against its runs.

Each shipped study has a table in ``mixerzoo/studies/paper_specs/<study>.yaml`` (data, never code)::

    settings:
      - {path: train.batch_size, value: 32, source: "ICLL App. B, Table 3"}
      - {path: model.n_layers, value: [1, 2, 4, 8, 12], source: "ICLL App. B, Table 3"}
      - {path: model.mixer.conv_width, value: 3, where: {variant: [cat, lincat]}, source: "CAT-ws Sec. 4"}
      - {path: data.n_test, value: 500, source: project, note: "the paper states no size"}
    known_deviations:
      - {path: train.epochs, paper: [200, 400], ours: 200, source: "...", reason: "..."}

``path`` is a dotted run-config path or a grid axis such as ``variant`` (``sweep`` and ``mad``
studies; read from every planned run of the ``paper`` preset, ``model.position`` resolved) or a
parameter name (``computed``, ``lm`` and ``probe`` studies: the one run's parameters). A scalar
``value`` must hold in every run (that ``where`` selects); a list is the set of values the paper
sweeps, and the runs' set of values must equal it (a list-valued
setting, such as AdamW's betas, is written as a set of one: ``[[0.9, 0.99]]``). ``source`` names
the paper and section, or ``project`` for a setting the paper does not state. A known deviation
names what the paper says, what the preset does (checked the same way) and why; one without a
``path`` (e.g. a panel the study does not plan) is stated only.
"""

from __future__ import annotations

import json
import math
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml
from pydantic import Field, field_validator

from mixerzoo.params import StrictModel, validate
from mixerzoo.registry import ConfigError

SPEC_DIR = Path(__file__).resolve().parent / "paper_specs"
PRESET = "paper"
PROJECT = "project"
#: how a source starts: a paper's key (as the study files cite them), the authors' code, or project
SOURCES = (
    "CAT",
    "Zoology",
    "zoology",
    "LaS",
    "ICLL",
    "MAD",
    "mad-lab",
    "DeltaNet",
    "LRA",
    "MNIST",
    "authors'",
)


def _check_source(source: str) -> str:
    if source != PROJECT and not source.startswith(SOURCES):
        raise ValueError(
            f"source {source!r}: start with a paper key ({', '.join(SOURCES)}) or say {PROJECT!r}"
        )
    return source


class Setting(StrictModel):
    """One setting of a paper preset: where it is read, its value (or swept values), its source."""

    path: str = Field(min_length=1, description="dotted run-config path, or a study parameter name")
    value: Any = Field(description="a scalar (every run has it) or a list (the set of swept values)")
    source: str = Field(min_length=1, description="paper key and section/table/figure, or 'project'")
    where: dict[str, Any] = Field(default_factory=dict, description="axis -> value(s): the runs it covers")
    note: str = ""

    @field_validator("source")
    @classmethod
    def _known_source(cls, v: str) -> str:
        return _check_source(v)


class Deviation(StrictModel):
    """A setting where the preset knowingly differs from the paper, with the reason; without a
    ``path`` it is something no run-config field expresses (stated, not checked)."""

    path: str | None = Field(None, min_length=1)
    paper: Any = Field(description="what the paper states")
    ours: Any = Field(description="what the preset runs (checked like a setting's value when path is given)")
    source: str = Field(min_length=1)
    where: dict[str, Any] = Field(default_factory=dict)
    reason: str = Field(min_length=1)

    @field_validator("source")
    @classmethod
    def _known_source(cls, v: str) -> str:
        return _check_source(v)

    @field_validator("reason")
    @classmethod
    def _said(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("a known deviation says why")
        return v


class PaperSpec(StrictModel):
    settings: list[Setting] = Field(min_length=1)
    known_deviations: list[Deviation] = Field(default_factory=list)


def spec_studies() -> list[str]:
    """The shipped studies that carry a spec table: every study of the grid and computed families.
    A study of the ``other`` family (the scorecard) reproduces no figure of its own: its cells are
    cells of other studies, whose tables check them."""
    from mixerzoo.studies.dispatch import shipped_studies
    from mixerzoo.studies.files import shipped_kind
    from mixerzoo.studies.kinds import family

    return sorted(n for n, path in shipped_studies().items() if family(shipped_kind(path)) != "other")


def spec_path(study: str) -> Path:
    return SPEC_DIR / f"{study}.yaml"


@lru_cache(maxsize=64)
def load_spec(study: str) -> PaperSpec:
    """The spec table of a shipped study; a missing or malformed one is one ConfigError line."""
    path = spec_path(study)
    if not path.is_file():
        raise ConfigError(f"{study}: no paper spec table ({path.name} in mixerzoo/studies/paper_specs/)")
    try:
        raw = yaml.safe_load(path.read_text())
    except yaml.YAMLError as err:
        raise ConfigError(f"{path.name}: not valid YAML ({str(err).splitlines()[0]})") from None
    return validate(PaperSpec, raw, where=path.stem)


# -- the runs of a paper preset -------------------------------------------------------------
def paper_runs(study: str) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(point, values) for every run of the study's ``paper`` preset, without training: a grid
    study's planned run configs (as JSON), or a computed study's one set of parameters."""
    from mixerzoo.studies.dispatch import find_study

    found = find_study(study)
    from mixerzoo.studies.kinds import family

    if family(found.kind) == "grid":
        return [(p.point, run_values(p.config)) for p in found.load(PRESET).expand()]
    from mixerzoo.studies.computed.files import resolve_params

    params = resolve_params(found.exp, PRESET, {})[1].model_dump(mode="json")
    return [({}, params)]


def run_values(config) -> dict[str, Any]:
    """A run config as JSON, with ``model.position`` resolved (``auto`` -> learned or none)."""
    values = config.model_dump(mode="json")
    values["model"]["position"] = config.model.resolved_position()
    return values


def read_path(values: dict[str, Any], path: str) -> Any:
    """The value at a dotted path, as study files write it (``model.mixer.conv_width``: a spec's
    parameters sit beside its name; a per-layer list takes an index, ``model.mixer.0.name``); a flat
    parameter name is looked up first. Missing -> None."""
    if path in values:
        return values[path]
    node: Any = values
    for key in path.split("."):
        if isinstance(node, list) and key.isdigit() and int(key) < len(node):
            node = node[int(key)]
        elif isinstance(node, dict):
            spec_params = node.get("params") if "name" in node and key not in node else None
            node = spec_params.get(key) if isinstance(spec_params, dict) else node.get(key)
        else:
            return None
    return node


def same(a: Any, b: Any) -> bool:
    """Equal values; numbers within a relative 1e-9; lists and tuples element-wise."""
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=0.0)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return a == b


def lookup(point: dict[str, Any], values: dict[str, Any], key: str) -> Any:
    """A run's value at ``key``: its config (where a rule may have rewritten an axis value), else
    its grid point (``variant``, ``seed``)."""
    found = read_path(values, key)
    return point.get(key) if found is None else found


def selects(point: dict[str, Any], values: dict[str, Any], where: dict[str, Any]) -> bool:
    for key, wanted in where.items():
        have = lookup(point, values, key)
        allowed = wanted if isinstance(wanted, list) else [wanted]
        if not any(same(have, w) for w in allowed):
            return False
    return True


def _show(v: Any) -> str:
    return json.dumps(v, default=str)


def mismatch(study: str, path: str, expected: Any, where: dict[str, Any], runs) -> str | None:
    """None when the selected runs hold ``expected`` (scalar: every run; list: the set of values),
    else one line saying what the runs hold instead."""
    chosen = [(point, values) for point, values in runs if selects(point, values, where)]
    at = f" where {_show(where)}" if where else ""
    if not chosen:
        return f"{study}: {path}{at}: no run of the paper preset matches"
    seen: list[Any] = []
    for point, values in chosen:
        v = lookup(point, values, path)
        if not any(same(v, s) for s in seen):
            seen.append(v)
    if isinstance(expected, list):
        missing = [e for e in expected if not any(same(e, s) for s in seen)]
        extra = [s for s in seen if not any(same(s, e) for e in expected)]
        if missing or extra:
            return (
                f"{study}: {path}{at}: the paper sweeps {_show(expected)}; the preset runs {_show(seen)}"
                + (f" (missing {_show(missing)})" if missing else "")
                + (f" (not in the paper {_show(extra)})" if extra else "")
            )
        return None
    wrong = [s for s in seen if not same(s, expected)]
    if wrong:
        return f"{study}: {path}{at}: the paper states {_show(expected)}; the preset runs {_show(seen)}"
    return None


def check_spec(study: str, runs=None) -> list[str]:
    """Every mismatch between the study's spec table and its paper preset, one line each."""
    spec = load_spec(study)
    runs = paper_runs(study) if runs is None else runs
    out = [mismatch(study, s.path, s.value, s.where, runs) for s in spec.settings]
    for d in spec.known_deviations:
        if d.path is None:
            continue
        found = mismatch(study, d.path, d.ours, d.where, runs)
        out.append(found and f"known deviation {found}")
        if same(d.paper, d.ours):
            out.append(f"{study}: known deviation {d.path}: paper and ours are both {_show(d.ours)}")
    return [line for line in out if line]


def deviation_lines(study: str) -> list[str]:
    """The study's known deviations as readable lines (what the paper says, what we run, why)."""
    return [
        f"{study}: {d.path or 'not a config field'}: paper {_show(d.paper)} ({d.source}), "
        f"ours {_show(d.ours)}: {d.reason}"
        for d in load_spec(study).known_deviations
    ]
