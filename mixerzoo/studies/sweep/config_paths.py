"""Dotted field paths into a run config (``model.d_model``, ``data.task.seq_len``,
``model.mixer.0.num_heads``): checking that one names a field, reading one, matching a grid point
against ``path: value`` conditions, and merging nested mappings.

``studies/sweep/config.py`` uses them (and re-exports them).
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import BaseModel

from mixerzoo.config import DataConfig, RunConfig, TrainConfig
from mixerzoo.model.config import MixerSpec, ModelConfig
from mixerzoo.registry import ConfigError

SEED = "seed"
SEED_PATH = "train.seed"


# -- dotted paths -------------------------------------------------------------------------
SPEC_FIELDS = {
    ("data", "task"): "task",
    ("model", "mixer"): "sequence mixer",
    ("model", "state_mixer"): "state mixer",
}
SECTION_MODELS: dict[str, type[BaseModel]] = {"data": DataConfig, "model": ModelConfig, "train": TrainConfig}


def _registry(kind: str):
    if kind == "task":
        from mixerzoo.tasks import TASKS

        return TASKS
    from mixerzoo.mixers import SEQUENCE_MIXERS, STATE_MIXERS

    return SEQUENCE_MIXERS if kind == "sequence mixer" else STATE_MIXERS


def check_path(path: str, base: dict[str, Any], where: str) -> None:
    """Raise a one-line ConfigError unless ``path`` names a field of a run config.

    Into ``data.task`` / ``model.mixer`` / ``model.state_mixer`` (flat ``{name, **params}``
    specs) the allowed keys are ``name`` plus the parameters of the entry named in ``base``.
    """
    parts = path.split(".")
    top = [f for f in RunConfig.model_fields if f != "name"]
    if parts[0] not in top:
        raise ConfigError(
            f"{where}: unknown field path {path!r}; {parts[0]!r} is not one of {', '.join(top)}"
        )
    if len(parts) == 1:
        return
    model = SECTION_MODELS[parts[0]]
    field = parts[1]
    if field not in model.model_fields:
        allowed = ", ".join(model.model_fields)
        raise ConfigError(
            f"{where}: unknown field path {path!r}; {parts[0]} has no {field!r} (allowed: {allowed})"
        )
    kind = SPEC_FIELDS.get((parts[0], field))
    if kind is None or len(parts) == 2:
        return
    rest = parts[2:]
    spec = base.get(parts[0], {}).get(field)
    if isinstance(spec, list):  # one spec per layer: the next segment is the layer index
        if not rest[0].isdigit() or int(rest[0]) >= len(spec):
            raise ConfigError(
                f"{where}: {path!r}: {parts[0]}.{field} is a list of {len(spec)} per-layer specs; "
                f"address one as {parts[0]}.{field}.<index>.<param>"
            )
        spec, rest = spec[int(rest[0])], rest[1:]
        if not rest:
            return
    if len(rest) != 1:
        raise ConfigError(f"{where}: unknown field path {path!r}; a {kind} spec is flat: {{name, **params}}")
    if spec is None:
        raise ConfigError(
            f"{where}: {path!r}: {parts[0]}.{field} is not set in base, so it has no parameters"
        )
    name = MixerSpec.model_validate(spec).name
    cls = _registry(kind).get(name)
    allowed = ["name", *cls.Params.model_fields]
    if rest[0] not in allowed:
        raise ConfigError(
            f"{where}: unknown field path {path!r}; {kind} {name!r} has no parameter {rest[0]!r} "
            f"(allowed: {', '.join(allowed)})"
        )


def get_path(raw: dict[str, Any], path: str) -> Any:
    node: Any = raw
    for key in path.split("."):
        if isinstance(node, str) and key == "name":
            return node
        if isinstance(node, list):
            node = node[int(key)]
        elif isinstance(node, dict):
            node = node.get(key)
        else:
            return None
    return node


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


def deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """Mappings merge key by key; anything else replaces; ``None`` deletes the key."""
    out = dict(base)
    for key, value in over.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = value
    return out
