"""The levels of the MAD protocol (MAD: Poli et al. 2024, *Mechanistic Design and Scaling of
Hybrid Architectures*): an experiment file with ``--set`` overrides (``studies/sweep/overrides.py``),
its task axis expanded into one ``data`` value per (task, difficulty level).

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
from mixerzoo.registry import ConfigError
from mixerzoo.studies.mad.normalise import REFERENCE_VARIANT, normalise_experiment, variant_models
from mixerzoo.studies.sweep.config import VARIANT, ExperimentConfig, resolve_experiment_path
from mixerzoo.studies.sweep.overrides import load_with_sets

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
