"""Experiment files: a base run config, grid axes, variants, presets -> a list of planned runs.

An experiment file is YAML validated by pydantic (data, never executed); its ``kind:`` (``sweep``,
or ``mad`` for the MAD protocol) is checked and removed before validation (``study_files.py``)::

    kind: sweep
    name: cat-mqar
    claim: "paper: 1-layer CAT reaches 100% in every cell"       # quoted beside ours in reports
    base:                                                         # a RunConfig (mixerzoo/config.py)
      data: {task: {name: mqar_cat, vocab_size: 8192, seq_len: 64}, n_train: 100000, n_test: 3000}
      model: {d_model: 64}
      train: {epochs: 64, batch_size: 64}
    variants:                                                     # named models, merged into base
      cat-1L: {model: {n_layers: 1, mixer: cat}}
      attention-2L: {model: {n_layers: 2, mixer: attention}}
    grid:                                                         # axes over any field, dotted paths
      model.d_model: [32, 64, 128]
      data.task.seq_len: [64, 128, 256, 512]                      # into the flat {name: ..., **params}
      train.lr: [1.0e-3, 1.0e-2, 1.0e-1]
    seeds: [0]                                                    # an axis over train.seed
    test: {seq_lens: [32, 64, 128]}                               # -> data.test_seq_lens (accuracy@<L>)
    rules:                                                        # per-point overrides, in order
      - when: {data.task.name: mqnar}
        set: {data.n_train: 200000}
    exclude:                                                      # points dropped from the grid
      - {data.task.name: mqnar, data.task.seq_len: 512}
    aggregate: {metric: accuracy_per_query, reduce: max, over: [train.lr, seed]}
    figure: {x: data.task.seq_len, panels: model.d_model, rows: data.task.name}
    presets:                                                      # deep-merged into the file first
      quick: {grid: {model.d_model: [64]}, variants: [cat-1L]}
      paper: {seeds: [0, 1, 2]}
    claims:                                                       # the paper's claims, checked (claims/)
      - {claim: "...", paper_ref: "CAT-ws Fig. 3", where: {variant: cat-1L}, test: {op: ">=", value: 0.99}}

Grid expansion is the product of the axes (plus ``variant`` and ``seed``); each point becomes a
validated :class:`~mixerzoo.config.RunConfig`. A point's *cell* is its axis values without the
``aggregate.over`` axes: the runs of a cell are reduced to one number per metric (papers CAT-ws App.
C.1 and Zoology Sec. 4.3 report the maximum over learning rates).

Presets are deep-merged into the file before expansion: mappings merge key by key, lists and
scalars replace, ``null`` deletes a key (e.g. a grid axis), and ``variants`` given as a list of
names keeps only those variants. A preset other than ``paper`` that can decide none of the claims
(its models cannot learn within its budget, measured) says ``paper_only: REASON``: it plans no
runs, ``study run`` prints the reason, and every claim reads "not run" there with it. A preset
that still runs (a one-architecture check, a scorecard item) but whose cells cannot decide the
claims (measured) says ``claims_paper_only: REASON``: it plans its runs, and every claim reads "not
run" there with the reason.

A grid axis or rule over a mixer's parameter (``model.mixer.num_heads``, ``model.state_mixer.X``)
applies to the variants whose mixer has that parameter; a run of any other mixer keeps its
mixer's default, and the points that then give one config are one run. A parameter that no
variant of the file has is an error (a misspelt name).
"""

from __future__ import annotations

import copy
import functools
import itertools
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from mixerzoo.claims import Claim, StandIn, check_claims
from mixerzoo.config import RunConfig, check_path, load_config_file
from mixerzoo.config_paths import deep_merge, get_path, set_path
from mixerzoo.model.config import MixerSpec
from mixerzoo.params import StrictModel, check_path_component, validate
from mixerzoo.registry import ConfigError, close_matches, short_repr
from mixerzoo.studies import files as study_files
from mixerzoo.studies import kinds

VARIANT = "variant"
SEED = "seed"  # the seed axis, over train.seed
SEED_PATH = "train.seed"
TEST_LENGTH = "test_seq_len"  # figure x-axis for length generalization: the accuracy@<L> metrics
PRESETS = ("quick", "paper")
MAX_GRID_POINTS = 25_000  # each point is a validated RunConfig: a 10^6-point grid would take hours
#: the run-config fields holding a flat ``{name, **params}`` mixer spec: which parameters it has
#: depends on the mixer it names
MIXER_SPECS = (("model", "mixer"), ("model", "state_mixer"))
ADDED = "added_variants"


def mixer_param(path: str) -> tuple[str, str] | None:
    """``model.mixer.num_heads`` -> ``("mixer", "num_heads")``: a parameter that only some mixers
    have; None for any other path (``model.mixer`` itself, ``model.mixer.name``, ``train.lr``)."""
    parts = path.split(".")
    if len(parts) == 3 and tuple(parts[:2]) in MIXER_SPECS and parts[2] != "name":
        return parts[1], parts[2]
    return None


def has_param(raw: dict[str, Any], path: str) -> bool:
    """False when ``path`` is a mixer parameter (:func:`mixer_param`) that the mixer ``raw``
    names does not have: a grid axis or rule over it leaves such a run at its mixer's default.
    True for every other path, and where the mixer is unset, per layer or unknown (validation
    reports those)."""
    found = mixer_param(path)
    if found is None:
        return True
    field, param = found
    spec = (raw.get("model") or {}).get(field)
    if spec is None or isinstance(spec, list):
        return True
    try:
        name = MixerSpec.model_validate(spec).name
    except ValueError:
        return True
    params = _mixer_params(field, name)
    return params is None or param in params


@functools.lru_cache(maxsize=256)
def _mixer_params(field: str, name: str) -> frozenset[str] | None:
    """The parameters of the mixer ``name`` (``field``: ``mixer`` or ``state_mixer``); None when
    no such mixer resolves."""
    from mixerzoo.mixers import SEQUENCE_MIXERS, STATE_MIXERS

    registry = SEQUENCE_MIXERS if field == "mixer" else STATE_MIXERS
    try:
        return frozenset(registry.get(name).Params.model_fields)
    except (ConfigError, AttributeError):
        return None


@functools.lru_cache(maxsize=64)
def _some_mixer_has(field: str, param: str) -> bool:
    """Whether any registered mixer of ``field`` has the parameter ``param``."""
    from mixerzoo.mixers import SEQUENCE_MIXERS, STATE_MIXERS

    registry = SEQUENCE_MIXERS if field == "mixer" else STATE_MIXERS
    return any(param in (_mixer_params(field, name) or ()) for name in registry.names())


def matches(point: dict[str, Any], when: dict[str, Any], experiment: str, raw: dict | None = None) -> bool:
    """True when every ``path: value`` (or ``path: [values]``) holds at this point (or in its config)."""
    for path, wanted in when.items():
        if path in point:
            have = point[path]
        elif path == SEED_PATH:
            have = point.get(SEED)
        elif raw is not None:
            have = get_path(raw, path)
        else:
            raise ConfigError(f"{experiment}: exclude: {path!r} is not an axis; axes: {', '.join(point)}")
        allowed = wanted if isinstance(wanted, list) else [wanted]
        if not any(_same(have, w) for w in allowed):
            return False
    return True


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return math.isclose(a, b, rel_tol=1e-9)
    return a == b


class Rule(StrictModel):
    """Set fields at the grid points that match ``when`` (each value a scalar or a list of allowed values)."""

    when: dict[str, Any] = Field(default_factory=dict, description="dotted path -> value or list of values")
    set: dict[str, Any] = Field(description="dotted path -> value, applied where `when` matches")


class TestSpec(StrictModel):
    seq_lens: list[int] = Field(default_factory=list, description="also evaluate at these lengths")
    n: int | None = Field(None, ge=1, description="test examples per length (data.n_test)")


class Aggregate(StrictModel):
    """How a cell's runs give its numbers (``studies/sweep/cells.py``, ``docs/claims.md``).

    Within the ``over`` axes other than ``seed``, the run best on the *validation* value of
    ``metric`` is selected (direction: ``claims.metric_direction``; ICLL App. B picks one setting on
    a validation set). ``reduce`` max or min: the seeds are selected among the same way, one run per
    cell; mean or median: each seed's selected run is kept and every metric is reduced over them.
    Every metric of a cell is then a test number of the selected run(s).
    """

    metric: str = Field(
        "accuracy_per_query",
        description="the metric tables and figures show, and whose validation value selects a cell's run",
    )
    reduce: Literal["max", "min", "mean", "median"] = Field(
        "max",
        description="max or min: one run per cell, selected over the seeds too; mean or median: one "
        "selected run per seed, every metric reduced over the seeds",
    )
    over: list[str] = Field(
        default_factory=list, description="axes selected over within a cell, e.g. train.lr, seed"
    )

    @model_validator(mode="before")
    @classmethod
    def _per_metric_is_gone(cls, raw: Any) -> Any:
        """``per_metric`` once reduced each metric on its own (best accuracy and best TVD from two
        different runs); every metric now comes from the run(s) selected on ``metric``."""
        if isinstance(raw, dict) and "per_metric" in raw:
            raise ValueError(
                "per_metric is no longer read: every metric of a cell comes from the run(s) selected "
                "on the validation value of aggregate.metric (one run gives a cell's accuracy and TVD); "
                "remove it (a metric's direction goes under `metrics:`)"
            )
        return raw

    def reducer_for(self, metric: str) -> str:
        """The reducer over seeds, the same for every metric (``metric`` is kept for callers)."""
        return self.reduce


class Figure(StrictModel):
    x: str = Field("data.task.seq_len", description=f"axis on the x-axis, or {TEST_LENGTH!r} (accuracy@<L>)")
    panels: str | None = Field("model.d_model", description="one panel per value of this axis (columns)")
    rows: str | None = Field(None, description="one row of panels per value of this axis")
    lines: str | None = Field(VARIANT, description="one line per value of this axis")
    log_x: bool = True
    train_length: int | None = Field(None, description="dashed vertical line at the training length")
    title: str | None = None


class ExperimentConfig(StrictModel):
    """A declarative sweep: base config x variants x grid x seeds, with rules, presets and a figure."""

    name: str = Field(description="experiment name (results tag, file names)")
    description: str = ""
    claim: str = Field("", description="the paper's own statement of the result, shown in reports")
    paper: str = Field("", description="where the figure comes from, e.g. 'CAT-ws Fig. 3'")
    base: dict[str, Any] = Field(description="a run config (same schema as `mixerzoo train` files)")
    variants: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="name -> partial run config deep-merged into base"
    )
    grid: dict[str, list[Any]] = Field(default_factory=dict, description="dotted path -> values")
    seeds: list[int] = Field(default_factory=lambda: [0], min_length=1, description="values of train.seed")
    test: TestSpec | None = None
    rules: list[Rule] = Field(default_factory=list)
    exclude: list[dict[str, Any]] = Field(default_factory=list, description="grid points to drop")
    aggregate: Aggregate = Field(default_factory=Aggregate)
    figure: Figure = Field(default_factory=Figure)
    presets: dict[str, dict[str, Any]] = Field(default_factory=dict)
    paper_only: str = Field(
        "",
        description="set under a preset other than paper: why that preset can decide none of the "
        "claims (measured); it then plans no runs, `study run` says so, and every claim reads "
        "'not run' there with this reason",
    )
    claims_paper_only: str = Field(
        "",
        description="set under a preset other than paper that runs but cannot decide the claims "
        "(measured): its runs are planned as usual, and every claim reads 'not run' there with this reason",
    )
    claims: list[Claim] = Field(
        default_factory=list, description="the paper's claims as predicates over cells (claims/)"
    )
    metrics: dict[str, Literal["higher", "lower"]] = Field(
        default_factory=dict, description="direction of a metric the claims read (claims.metric_direction)"
    )
    stand_ins: list[StandIn] = Field(
        default_factory=list, description="data the runs use in place of the paper's, named on verdicts"
    )
    added_variants: list[str] = Field(
        default_factory=list,
        description="variants added beside the file's own with --add-model; the claims never read "
        "them (set by the command, never written in a study file)",
    )

    @field_validator("name")
    @classmethod
    def _name_is_a_file_name(cls, name: str) -> str:
        return check_path_component(name, "name")  # reports and figures are written as <name>.html/.png

    @field_validator("grid")
    @classmethod
    def _axes_not_empty(cls, grid: dict[str, list[Any]]) -> dict[str, list[Any]]:
        for path, values in grid.items():
            if not values:
                raise ValueError(f"grid axis {path!r} has no values")
            if path in (VARIANT, SEED, SEED_PATH):
                raise ValueError(f"grid axis {path!r}: use `variants:` / `seeds:` instead")
        return grid

    @model_validator(mode="after")
    def _check_presets(self) -> ExperimentConfig:
        missing = [p for p in PRESETS if p not in self.presets]
        if missing:
            raise ValueError(
                f"presets: every experiment ships {', '.join(PRESETS)}; missing {', '.join(missing)}"
            )
        for field in ("paper_only", "claims_paper_only"):
            if isinstance(self.presets.get("paper"), dict) and field in self.presets["paper"]:
                raise ValueError(
                    f"presets.paper.{field}: the paper preset is the one that decides the claims"
                )
        for name, override in self.presets.items():
            if isinstance(override, dict) and "claims" in override:
                raise ValueError(
                    f"presets.{name}.claims: a preset runs fewer cells of the file's claims and "
                    "cannot redefine them; state each claim once, under the file's `claims:`"
                )
        return self

    @model_validator(mode="after")
    def _default_figure_axes(self) -> ExperimentConfig:
        """Unset ``panels`` / ``lines`` that are not axes of this grid mean one panel / one line;
        an unset ``x`` that is not an axis becomes the first axis that is neither variant nor reduced."""
        if "x" not in self.figure.model_fields_set and self.figure.x not in self.axes():
            candidates = [a for a in self.cell_axes() if a != VARIANT] or [
                a for a in self.axes() if a != VARIANT
            ]
            self.figure.x = candidates[0]
        for which in ("panels", "lines"):
            value = getattr(self.figure, which)
            if which not in self.figure.model_fields_set and value not in self.axes():
                setattr(self.figure, which, None)
        return self

    # -- expansion ----------------------------------------------------------------------
    def axes(self) -> dict[str, list[Any]]:
        """Every axis of the grid, in expansion order: variant, the grid's axes, seed."""
        out: dict[str, list[Any]] = {}
        if self.variants:
            out[VARIANT] = list(self.variants)
        out.update(self.grid)
        out[SEED] = list(self.seeds)
        return out

    def cell_axes(self) -> list[str]:
        """The axes that identify a cell (all axes but those reduced by ``aggregate.over``)."""
        over = {SEED if o == SEED_PATH else o for o in self.aggregate.over}
        return [a for a in self.axes() if a not in over]

    def check_paths(self, file_level: bool = False) -> None:
        """Every grid and rule path names a run-config field. A mixer parameter
        (``model.mixer.num_heads``) must be one of some variant's mixer, or (a chosen or added
        model lacks a parameter the file's grid sweeps: its runs keep their default) of some
        registered mixer; ``file_level``: only the mixer parameters, each of some variant of the
        file (a parameter no variant has is misspelt)."""
        for path in self.grid:
            self._check_path(path, "grid", file_level)
        for i, rule in enumerate(self.rules):
            for path in [*rule.when, *rule.set]:
                if path not in self.axes():
                    self._check_path(path, f"rules[{i}]", file_level)

    def _check_path(self, path: str, where: str, file_level: bool) -> None:
        found = mixer_param(path)
        if found is None and file_level:
            return
        if found is None:
            first = next(iter(self.variants.values()), {}) if where == "grid" else None
            check_path(path, self.base if first is None else self._base_with(first), where=where)
            return
        error: ConfigError | None = None
        for variant in [*self.variants.values()] or [{}]:
            try:
                check_path(path, self._base_with(variant), where=where)
                return
            except ConfigError as err:
                error = error or err
        if not file_level and _some_mixer_has(*found):
            return
        raise error  # type: ignore[misc]

    def expand(self) -> list[PlannedRun]:
        """Every grid point as a validated RunConfig; errors name the point and the bad path/value.
        None under a preset that is ``paper_only``."""
        if self.paper_only:
            return []
        self.check_paths()
        for path in self.aggregate.over:
            if path not in self.axes() and path != SEED_PATH:
                raise ConfigError(
                    f"aggregate.over: {path!r} is not an axis of {self.name}; axes: {', '.join(self.axes())}"
                )
        for which, path in (
            ("x", self.figure.x),
            ("panels", self.figure.panels),
            ("rows", self.figure.rows),
            ("lines", self.figure.lines),
        ):
            if path is None or path == TEST_LENGTH or (path == VARIANT and not self.variants):
                continue
            if path not in self.axes():
                raise ConfigError(
                    f"figure.{which}: {path!r} is not an axis of {self.name}; axes: {', '.join(self.axes())}"
                )
        axes = self.axes()
        n_points = math.prod(len(values) for values in axes.values())
        if n_points > MAX_GRID_POINTS:
            sizes = " x ".join(f"{len(v)} {a}" for a, v in axes.items())
            raise ConfigError(
                f"{self.name}: the grid has {n_points:,} points ({sizes}); at most {MAX_GRID_POINTS:,} "
                "are expanded (split the experiment or use a preset)"
            )
        cell_axes = self.cell_axes()
        runs: list[PlannedRun] = []
        seen: dict[str, PlannedRun] = {}
        for point, raw in self._raw_points():
            raw["name"] = run_name(point)
            try:
                cfg = validate(RunConfig, raw)
            except ConfigError as err:
                raise ConfigError(f"{self.name} point {describe_point(point)}: {err}") from None
            planned = PlannedRun(point=point, cell={a: point[a] for a in cell_axes}, config=cfg)
            if planned.config_hash in seen:  # two points giving one config would be one run
                continue
            seen[planned.config_hash] = planned
            runs.append(planned)
        return runs

    def _raw_points(self):
        """``(point, raw run config)`` for every grid point the exclusions leave, rules applied."""
        axes = self.axes()
        for values in itertools.product(*axes.values()):
            point = dict(zip(axes, values))
            if any(matches(point, ex, self.name) for ex in self.exclude):
                continue
            raw = self._base_with(self.variants.get(point.get(VARIANT), {}))
            # a mixer's parameters last, once the point has set which mixer it is
            paths = sorted((p for p in point if p != VARIANT), key=lambda p: mixer_param(p) is not None)
            for path in paths:
                if has_param(raw, path):
                    set_path(raw, SEED_PATH if path == SEED else path, point[path])
            for rule in self.rules:
                if matches(point, rule.when, self.name, raw):
                    for path, value in rule.set.items():
                        if has_param(raw, path):
                            set_path(raw, path, copy.deepcopy(value))
            yield point, raw

    def count_runs(self) -> int:
        """How many runs :meth:`expand` plans, without validating each one (``study list``):
        distinct raw configs. A shipped study's counts equal ``len(expand())`` (a test checks)."""
        if self.paper_only:
            return 0
        return len({json.dumps(raw, sort_keys=True, default=str) for _, raw in self._raw_points()})

    def _base_with(self, variant: dict[str, Any]) -> dict[str, Any]:
        raw = deep_merge(copy.deepcopy(self.base), copy.deepcopy(variant))
        if self.test is not None:
            data = raw.setdefault("data", {})
            if self.test.seq_lens:
                data["test_seq_lens"] = list(self.test.seq_lens)
            if self.test.n is not None:
                data["n_test"] = self.test.n
        return raw


@dataclass(frozen=True)
class PlannedRun:
    """One grid point: its axis values, its cell (the point minus the reduced axes), its config."""

    point: dict[str, Any]
    cell: dict[str, Any]
    config: RunConfig

    @property
    def config_hash(self) -> str:
        return self.config.config_hash()

    @property
    def cell_key(self) -> str:
        return cell_key(self.cell)


def cell_key(cell: dict[str, Any]) -> str:
    return json.dumps(cell, sort_keys=False, default=str)


def short_axis(path: str) -> str:
    """``model.d_model`` -> ``d_model``; ``data.task.name`` -> ``task`` (a spec's name is the spec)."""
    parts = path.split(".")
    return parts[-2] if parts[-1] == "name" and len(parts) > 1 else parts[-1]


def describe_point(point: dict[str, Any]) -> str:
    return " ".join(f"{short_axis(k)}={v}" for k, v in point.items())


def run_name(point: dict[str, Any]) -> str:
    """A readable label: the variant, then the other axis values (``cat-1L d_model=64 seq_len=128``)."""
    parts = [str(point[VARIANT])] if VARIANT in point else []
    parts += [f"{short_axis(k)}={v}" for k, v in point.items() if k != VARIANT]
    return " ".join(parts)


# -- loading ----------------------------------------------------------------------------
def shipped_experiments() -> dict[str, Path]:
    """Shipped grid studies (``kind: sweep`` or ``mad``) -> files."""
    return study_files.shipped_of_kind(*kinds.of_family("grid"))


def resolve_experiment_path(name_or_path: str | Path) -> Path:
    p = Path(name_or_path)
    if p.suffix in (".yaml", ".yml", ".json") or p.is_file():
        if not p.is_file():
            raise ConfigError(f"experiment file {str(p)!r} does not exist")
        return p
    shipped = shipped_experiments()
    if str(name_or_path) not in shipped:
        every = study_files.shipped_files()
        if str(name_or_path) in every:  # a computed, LM or probe study
            path = every[str(name_or_path)]
            kind = study_files.shipped_kind(path)
            study_files.check_kind(kind, "grid", study_files.label(path), str(name_or_path))
        guess = close_matches(str(name_or_path), shipped)
        hint = f" (did you mean {guess!r}?)" if guess else ""
        raise ConfigError(
            f"unknown experiment {short_repr(str(name_or_path))}{hint}; shipped: {', '.join(shipped)}"
            " (or give a YAML path)"
        )
    return shipped[str(name_or_path)]


def read_experiment_file(path: Path) -> dict[str, Any]:
    """A grid study file's mapping, its ``kind:`` checked (sweep or mad) and removed."""
    raw = load_config_file(path)
    kind = study_files.file_kind(raw, path)
    study_files.check_kind(kind, "grid", study_files.label(path), path.stem)
    study_files.check_content(kind, raw, study_files.label(path))
    if isinstance(raw, dict) and ADDED in raw:
        raise ConfigError(f"{study_files.label(path)}: {ADDED} is set by --add-model, not in a study file")
    return study_files.without_kind(raw)


def load_experiment(name_or_path: str | Path | dict[str, Any], preset: str | None = None) -> ExperimentConfig:
    """Read and validate an experiment (a shipped name, a YAML path or a dict), with a preset applied.

    A file needs ``kind: sweep`` or ``kind: mad``; a dict may carry one (it is checked the same way)."""
    if isinstance(name_or_path, dict):
        raw = name_or_path
        if "kind" in raw:
            kind = study_files.file_kind(raw, None)
            study_files.check_kind(kind, "grid", "study", str(raw.get("name", "")))
            study_files.check_content(kind, raw, "study")
            raw = study_files.without_kind(raw)
    else:
        raw = read_experiment_file(resolve_experiment_path(name_or_path))
    exp = validate(ExperimentConfig, raw)
    _check_claims(exp, exp.claims, "claims")
    exp.check_paths(file_level=True)
    if preset is None:
        return exp
    return apply_preset(exp, raw, preset)


def apply_preset(exp: ExperimentConfig, raw: dict[str, Any], preset: str) -> ExperimentConfig:
    if preset not in exp.presets:
        raise ConfigError(
            f"unknown preset {preset!r} of experiment {exp.name!r}; allowed: {', '.join(exp.presets)}"
        )
    override = copy.deepcopy(exp.presets[preset])
    merged = copy.deepcopy(dict(raw))
    keep = override.pop("variants", None)
    if isinstance(keep, list):
        unknown = [v for v in keep if v not in exp.variants]
        if unknown:
            raise ConfigError(
                f"presets.{preset}.variants: unknown variant {unknown[0]!r};"
                f" allowed: {', '.join(exp.variants)}"
            )
        merged["variants"] = {v: exp.variants[v] for v in keep}
    elif keep is not None:
        override["variants"] = keep
    merged = deep_merge(merged, override)
    if "presets" in override:
        raise ConfigError(f"presets.{preset}: a preset cannot define presets")
    try:
        out = validate(ExperimentConfig, merged)
    except ConfigError as err:
        raise ConfigError(f"{exp.name} with preset {preset!r}: {err}") from None
    return out


def _check_claims(exp: ExperimentConfig, claims: list[Claim], where: str) -> None:
    """Claims select on the file's axes (before a preset trims them) or on run-config fields."""
    base = exp._base_with(next(iter(exp.variants.values()), {}))
    check_claims(claims, exp.axes(), lambda path, at: check_path(path, base, where=at), where=where)
