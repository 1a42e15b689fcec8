"""The levels of the MAD protocol (MAD: Poli et al. 2024, *Mechanistic Design and Scaling of
Hybrid Architectures*): an experiment file with ``--set`` overrides, its task axis expanded into
one ``data`` value per (task, difficulty level).

The levels are mad-lab's (``tasks/mad_levels.py``: MAD's task baseline plus one change at a time
of sequence length, vocabulary, training-set size, noise ratio, ...); each level is trained over
MAD's grid of learning rate {1e-4, 5e-4, 1e-3} x weight decay {0, 0.1}. A level's training-set
size (``data.n_train``) travels with its task parameters.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from mixerzoo.config import load_config_file
from mixerzoo.model.accounting import count_params
from mixerzoo.params import validate
from mixerzoo.registry import ConfigError, short_repr
from mixerzoo.studies.mad.normalise import REFERENCE_VARIANT, normalise_experiment, variant_models
from mixerzoo.studies.sweep.config import (
    VARIANT,
    ExperimentConfig,
    load_experiment,
    resolve_experiment_path,
)

MAD_TASKS = (
    "mad_in_context_recall",
    "mad_fuzzy_recall",
    "mad_noisy_recall",
    "mad_selective_copy",
    "mad_compression",
    "mad_memorization",
)
LEARNING_RATES = (1e-4, 5e-4, 1e-3)  # mad/configs.py make_benchmark_mad_configs
WEIGHT_DECAYS = (0.0, 0.1)
TASK_AXIS = "data.task.name"
LEVEL_AXIS = "data"  # after expansion: one data section per (task, level)
#: levels per task in each preset: the first n of ``MAD_LEVELS[task]`` (baseline first); None = all
PRESET_LEVELS: dict[str, int | None] = {"quick": 2, "paper": None}
#: presets whose variants are brought to MAD's iso-state / iso-parameter setting (mad_experiment)
PRESET_NORMALISE: dict[str, bool] = {"quick": False, "paper": True}
#: keys of a level that belong to the data section, not to the task's parameters
DATA_KEYS = {
    "n_train": "n_train",
    "num_train_examples": "n_train",
    "n_test": "n_test",
    "num_test_examples": "n_test",
}


def default_levels() -> dict[str, list[dict[str, Any]]]:
    """``MAD_LEVELS`` of ``tasks/mad_levels.py``: task -> its levels (baseline first)."""
    from mixerzoo.tasks.mad_levels import MAD_LEVELS

    return MAD_LEVELS


def level_data(base_data: dict[str, Any], task: str, level: dict[str, Any]) -> dict[str, Any]:
    """A level -> a data section: training/test-set sizes to ``data``, the rest to the task spec."""
    data = copy.deepcopy(base_data)
    params = {k: v for k, v in level.items() if k not in DATA_KEYS and k != "name"}
    data["task"] = {"name": task, **params}
    for key, value in level.items():
        if key in DATA_KEYS:
            data[DATA_KEYS[key]] = value
    return data


def level_label(task_levels: list[dict[str, Any]], i: int) -> str:
    """``baseline`` for the first level, else the keys where level i differs from it (``seq_len=256``)."""
    if i == 0:
        return "baseline"
    base, level = task_levels[0], task_levels[i]
    changed = [f"{k}={v}" for k, v in level.items() if base.get(k) != v]
    return " ".join(changed) or f"level {i}"


# -- --set: overrides of an experiment ---------------------------------------------------
def load_with_sets(
    name_or_path: str | Path | dict[str, Any], preset: str, sets: dict[str, Any] | None = None
) -> ExperimentConfig:
    """An experiment with a preset and ``--set`` overrides (any experiment, not only MAD's).

    * ``model=NAME``: keep only the variant NAME, or, when the file has no such variant and NAME
      is a registered sequence mixer, one variant NAME that sets ``model.mixer`` to it;
    * ``model={...}`` (a YAML mapping): one variant ``custom`` merging it into ``base.model``;
    * ``PATH=VALUE`` (a dotted run-config path, e.g. ``model.d_model=64``): set at every run,
      after the preset, variants, grid and rules.
    """
    raw = (
        copy.deepcopy(name_or_path)
        if isinstance(name_or_path, dict)
        else load_config_file(resolve_experiment_path(name_or_path))
    )
    sets = dict(sets or {})
    if "model" in sets:
        raw = with_model(raw, sets.pop("model"))
    for key in sets:
        if "." not in key:
            raise ConfigError(
                f"--set {short_repr(key)}: expected model=NAME, model={{...}} or a dotted run-config "
                "path such as model.d_model or train.epochs"
            )
    exp = load_experiment(raw, preset=preset)
    if not sets:
        return exp
    out = exp.model_dump(mode="json")
    out["rules"] = [*out["rules"], *({"when": {}, "set": {k: v}} for k, v in sets.items())]
    out["presets"] = {p: {} for p in out["presets"]}  # applied already
    exp = validate(ExperimentConfig, out)
    try:
        exp.expand()  # a bad path or value is reported now, naming the --set
    except ConfigError as err:
        raise ConfigError(f"--set: {err}") from None
    return exp


def with_model(raw: dict[str, Any], value: Any) -> dict[str, Any]:
    """``--set model=...`` on an experiment file's raw dict (see :func:`load_with_sets`): the
    chosen variant (added when new) becomes every preset's only variant, so the file's claims
    still name its own variants."""
    out = copy.deepcopy(raw)
    variants: dict[str, Any] = dict(out.get("variants") or {})
    if isinstance(value, str):
        name = value
        if value not in variants:
            from mixerzoo.mixers import SEQUENCE_MIXERS
            from mixerzoo.registry import is_import_path

            if is_import_path(value):
                SEQUENCE_MIXERS.get(value)  # a bad import path is its own one-line error
            elif value not in SEQUENCE_MIXERS:
                allowed = ", ".join([*variants, *SEQUENCE_MIXERS.names()])
                raise ConfigError(
                    f"--set model={short_repr(value)}: not a variant of {out.get('name')!r} "
                    f"nor a sequence mixer; allowed: {allowed}"
                )
            variants[value] = {"model": {"mixer": value}}
    elif isinstance(value, dict):
        name = "custom"
        variants[name] = {"model": value}
    else:
        raise ConfigError(f"--set model={short_repr(value)}: expected a variant or mixer name, or a mapping")
    out["variants"] = variants
    presets = out.get("presets") if isinstance(out.get("presets"), dict) else {}
    for preset in presets.values():
        if isinstance(preset, dict):
            preset["variants"] = [name]
    return out


# -- the expanded experiment -----------------------------------------------------------
def is_mad(name_or_path: str | Path) -> bool:
    """True for the shipped ``mad`` experiment and files named ``mad*.yaml`` whose task axis is MAD's."""
    try:
        raw = load_config_file(resolve_experiment_path(name_or_path))
    except ConfigError:
        return False
    tasks = (raw.get("grid") or {}).get(TASK_AXIS) if isinstance(raw, dict) else None
    return str(raw.get("name", "")).startswith("mad") and isinstance(tasks, list) and bool(tasks)


def mad_experiment(
    name_or_path: str | Path | dict[str, Any] = "mad",
    preset: str = "quick",
    sets: dict[str, Any] | None = None,
    levels: dict[str, list[dict[str, Any]]] | None = None,
    n_levels: int | None | str = "preset",
    normalise: bool | None = None,
) -> ExperimentConfig:
    """The MAD experiment with ``preset`` and ``--set`` overrides, its task axis expanded into levels.

    ``levels``: task -> levels (default ``MAD_LEVELS``); ``n_levels``: keep the first n levels of
    each task (default: :data:`PRESET_LEVELS` of the preset; None: all). ``normalise``: bring every
    variant to MAD's iso-state / iso-parameter setting (:func:`normalise_experiment`; default:
    :data:`PRESET_NORMALISE` of the preset, i.e. the ``paper`` preset only), against the
    parameter count of the file's :data:`REFERENCE_VARIANT` under the same preset and ``--set``
    paths. It acts last, after the preset's rules and the ``--set`` paths, so in the paper preset
    a ``--set`` of a normalised knob (``model.mixer.d_state``, a state mixer's ``hidden_mult``) is
    normalised over; use the quick preset or ``normalise=False`` to score a hand-set width.
    """
    exp = load_with_sets(name_or_path, preset, sets)
    keep = PRESET_LEVELS.get(preset) if n_levels == "preset" else n_levels
    expanded = expand_levels(exp, default_levels() if levels is None else levels, keep)
    if not (PRESET_NORMALISE.get(preset, False) if normalise is None else normalise):
        return expanded
    reference = load_with_sets(name_or_path, preset, {k: v for k, v in (sets or {}).items() if k != "model"})
    ref_model = variant_models(reference).get(REFERENCE_VARIANT)
    target = count_params(ref_model) if ref_model is not None else None
    return normalise_experiment(expanded, target_params=target)[0]


def expand_levels(
    exp: ExperimentConfig, levels: dict[str, list[dict[str, Any]]], keep: int | None
) -> ExperimentConfig:
    """``exp`` with its task axis replaced by one ``data`` value per (task, level), the first
    ``keep`` levels of each task (None: all), plotted against the variant."""
    if TASK_AXIS not in exp.grid:
        raise ConfigError(f"{exp.name}: a MAD experiment sweeps {TASK_AXIS!r} over MAD tasks (grid)")
    out = exp.model_dump(mode="json", exclude_defaults=False)
    base_data = out["base"].get("data", {})
    values = []
    for task in exp.grid[TASK_AXIS]:
        if task not in levels:
            raise ConfigError(
                f"{exp.name}: task {task!r} has no MAD levels; tasks with levels: {', '.join(levels)}"
            )
        task_levels = levels[task] if keep is None else levels[task][:keep]
        values += [level_data(base_data, task, lv) for lv in task_levels]
    out["grid"] = {LEVEL_AXIS: values, **{k: v for k, v in out["grid"].items() if k != TASK_AXIS}}
    out["figure"] = {
        "x": VARIANT if exp.variants else "train.lr",
        "panels": None,
        "rows": None,
        "lines": None,
    }
    out["presets"] = {p: {} for p in out["presets"]}  # applied already
    try:
        return validate(ExperimentConfig, out)
    except ConfigError as err:
        raise ConfigError(f"{exp.name} (MAD levels): {err}") from None
