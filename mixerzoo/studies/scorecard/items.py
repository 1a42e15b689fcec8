"""One scorecard item for one mixer: the study's cell with the mixer in place of the study's
variants, trained into the results store (resumable: finished runs are skipped) and read back.

The item's experiment is the study under the battery's preset with

* the study's variants replaced by one variant, the mixer (merged into the study's base model,
  whose own ``mixer`` is dropped so no parameter of it leaks into another mixer);
* rules and exclusions that name the study's own variants dropped (they tune those variants);
* grid axes and rule settings under ``model.mixer.<field>`` kept only for a mixer that has the
  field (ICLL's head counts are not forced on an LSTM);
* the grid narrowed to the item's ``cell``; the other axes (learning rates, seeds) stay, and the
  cell is selected over them as the study selects (validation split, ``aggregate``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from mixerzoo.params import validate
from mixerzoo.registry import ConfigError
from mixerzoo.store.results import ResultsStore
from mixerzoo.studies.scorecard.battery import Item
from mixerzoo.studies.scorecard.candidate import Candidate, mixer_fields
from mixerzoo.studies.sweep.config import VARIANT, ExperimentConfig, load_experiment

MIXER_PREFIX = "model.mixer."


@dataclass
class Score:
    """One item's score for one mixer, with its noise and what it rests on."""

    item: str
    group: str
    metric: str
    value: float | None = None
    se: float | None = None
    chance: float | None = None
    n_test: int | None = None
    seeds: int = 0
    extra: dict[str, float] = field(default_factory=dict)
    planned: int = 0
    finished: int = 0
    wall_s: float = 0.0
    fingerprints: list[str] = field(default_factory=list)
    configs: list[str] = field(default_factory=list)  # config hashes of the runs the item plans
    state: int | None = None  # floats held at the item's length (candidate.inference_state)
    fixed_state: bool | None = None

    @property
    def direction(self) -> str:
        from mixerzoo.claims.base import HIGHER, metric_direction

        return HIGHER if self.metric == "mad_score" else metric_direction(self.metric)

    @property
    def learned(self) -> bool | None:
        """Beyond chance by the noise margin, in the metric's direction (None: no value or no
        chance level)."""
        from mixerzoo.claims.base import HIGHER
        from mixerzoo.claims.noise import Z

        if self.value is None or self.chance is None:
            return None
        slack = Z * self.se if self.se else 0.0
        if self.direction == HIGHER:
            return self.value > self.chance + slack
        return self.value < self.chance - slack

    def as_dict(self) -> dict[str, Any]:
        out = dict(vars(self))
        out["learned"] = self.learned
        return out


def _has(fields: set[str] | None, path: str) -> bool:
    """Whether a setting at ``path`` applies to a mixer with these parameter ``fields``."""
    if not path.startswith(MIXER_PREFIX) or fields is None:
        return True
    return path[len(MIXER_PREFIX) :].split(".", 1)[0] in fields


def item_experiment(item: Item, preset: str, cand: Candidate) -> ExperimentConfig:
    """The study's experiment under ``preset`` narrowed to the item's cell, the mixer its one variant."""
    exp = load_experiment(item.study, preset)
    out = exp.model_dump(mode="json")
    fields = mixer_fields(cand.model)
    base_model = dict(out["base"].get("model") or {})
    base_model.pop("mixer", None)
    out["base"]["model"] = base_model
    out["variants"] = {cand.label: {"model": cand.model}}
    out["exclude"] = [ex for ex in out["exclude"] if VARIANT not in ex]
    rules = []
    for rule in out["rules"]:
        if VARIANT in rule["when"]:
            continue
        kept = {p: v for p, v in rule["set"].items() if _has(fields, p)}
        if kept:
            rules.append({**rule, "set": kept})
    rules += [{"when": {}, "set": {path: value}} for path, value in item.sets.items()]
    out["rules"] = rules
    grid = {a: v for a, v in out["grid"].items() if _has(fields, a)}
    for axis, value in item.cell.items():
        if axis == VARIANT:
            raise ConfigError(f"scorecard item {item.key!r}: cell names a variant; the mixer is the variant")
        grid[axis] = [value]
    out["grid"] = grid
    out["aggregate"]["over"] = [
        a for a in out["aggregate"]["over"] if a in grid or a in ("seed", "train.seed")
    ]
    out.update(name=f"{exp.name}", claims=[], presets={p: {} for p in out["presets"]})
    out["figure"] = {}
    scored = validate(ExperimentConfig, out, where=f"scorecard item {item.key}")
    _check_cell(item, exp, scored)
    return scored


def _check_cell(item: Item, study: ExperimentConfig, exp: ExperimentConfig) -> None:
    """The cell's axes are the study's axes (or run-config paths), and it plans one cell."""
    unknown = [a for a in item.cell if a not in study.axes()]
    if unknown:
        raise ConfigError(
            f"scorecard item {item.key!r}: {unknown[0]!r} is not an axis of {study.name}; "
            f"axes: {', '.join(a for a in study.axes() if a != VARIANT)}"
        )
    cells = {p.cell_key for p in exp.expand()}
    if len(cells) != 1:
        raise ConfigError(
            f"scorecard item {item.key!r}: narrows {study.name} to {len(cells)} cells, not one; "
            "name a value for each of its cell axes in `cell:`"
        )


def tag(item: Item, cand: Candidate) -> str:
    """The experiment a scorecard run is recorded under."""
    return f"scorecard/{item.key}/{cand.label}"


def run_item(item: Item, preset: str, cand: Candidate, store: ResultsStore, log=None, progress=False):
    """Train what the item needs and is not yet finished in ``store``; the sweep's summary."""
    from mixerzoo.studies.sweep.runner import run_sweep

    exp = item_experiment(item, preset, cand)
    return run_sweep(exp, store, experiment_tag=tag(item, cand), progress=progress, log=log)


def read_item(item: Item, preset: str, cand: Candidate, store: ResultsStore) -> Score:
    """The item's score from the runs in ``store`` (None where nothing finished)."""
    from mixerzoo.claims.noise import standard_error
    from mixerzoo.studies.sweep.cells import collect_results

    exp = item_experiment(item, preset, cand)
    (cell,) = collect_results(exp, store).cells
    metric = item.metric or exp.aggregate.metric
    score = Score(item.key, item.group, metric, planned=len(cell.planned), finished=cell.n_finished)
    score.configs = planned_hashes(exp)
    score.wall_s = round(sum(r.wall_s or 0.0 for r in cell.records if r is not None), 1)
    score.fingerprints = sorted({r.code for r in cell.selected if r.code})
    if metric not in cell.metrics:
        return score
    view = {metric: cell.metrics[metric], **cell.evidence}
    score.value, score.se = cell.metrics[metric], standard_error(view, metric)
    score.n_test, score.seeds = cell.evidence.get("n_test"), cell.evidence.get("seeds", 1)
    score.extra = {m: cell.metrics[m] for m in item.extra if m in cell.metrics}
    score.chance = _chance(cell, metric)
    return score


def _chance(cell, metric: str) -> float | None:
    from mixerzoo.evaluation.chance import cell_chance_levels, level_for

    data = cell.planned[0].config.data.model_dump(mode="json")
    try:
        return level_for(cell_chance_levels(json.dumps(data, sort_keys=True)), metric)
    except ConfigError:
        return None


def planned_hashes(exp: ExperimentConfig) -> list[str]:
    """The config hashes of the runs ``exp`` plans: the recipe a score was made with."""
    return sorted({p.config.config_hash() for p in exp.expand()})


def planned_configs(item: Item, preset: str, cand: Candidate) -> list[Any]:
    """The run configs the item plans (for a dry run's cost)."""
    return [p.config for p in item_experiment(item, preset, cand).expand()]
