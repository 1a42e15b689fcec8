"""``--set`` on a sweep: an experiment with a preset and overrides (any experiment, MAD's included).

``model=NAME`` or ``model={...}`` picks the model (:func:`with_model`, on the file's raw dict);
a dotted run-config path sets a field of every run, after the preset, variants, grid and rules.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from mixerzoo.config import load_config_file
from mixerzoo.params import validate
from mixerzoo.registry import ConfigError, short_repr
from mixerzoo.studies.sweep.config import ExperimentConfig, load_experiment, resolve_experiment_path


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
