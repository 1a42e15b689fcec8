"""Dotted paths into nested config data (``train.lr``, ``data.task.seq_len``, ``model.mixer.0.num_heads``).

One implementation for every command and study file: writing a value at a path (:func:`set_path`,
and :func:`apply_sets` for the ``--set PATH=VALUE`` overrides that ``config.parse_sets`` reads),
reading one (:func:`get_path`), and merging nested mappings (:func:`deep_merge`, a study's presets
and variants). A path is a chain of mapping keys; an integer segment indexes a list, and a spec
written as a bare name (``mixer: cat``) reads as ``{name: cat}``.

Which paths name a field of a run config is the schema's knowledge (``config.check_path``); what
a sweep's grid point matches is the sweep's (``studies/sweep/config.py``).
"""

from __future__ import annotations

import copy
from typing import Any

from mixerzoo.registry import ConfigError, short_repr


def apply_sets(raw: dict[str, Any], sets: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``raw`` with each ``--set`` override written at its dotted path (:func:`set_path`):
    ``{"train.lr": 0.01}`` sets ``raw["train"]["lr"]``. Validating the result names any bad field."""
    if not sets:
        return raw
    out = copy.deepcopy(raw)
    for key, value in sets.items():
        try:
            set_path(out, key, value)
        except ConfigError as err:
            raise ConfigError(f"--set {err}") from None
    return out


def set_path(raw: dict[str, Any], path: str, value: Any) -> None:
    """Set ``a.b.c`` in nested dicts; a spec written as a bare name becomes ``{name: ...}`` first
    (``model.mixer.conv_width`` on ``mixer: cat``); an integer segment indexes a list."""
    from pydantic import BaseModel

    parts = path.split(".")
    node: Any = raw
    for i, key in enumerate(parts[:-1]):
        child = _child(node, key, path)
        if child is None or isinstance(child, str):  # "cat" -> {name: cat} so params can be added
            child = {} if child is None else {"name": child}
            _put(node, key, child)
        elif isinstance(child, BaseModel):
            child = child.model_dump()
            _put(node, key, child)
        if not isinstance(child, (dict, list)):
            raise ConfigError(f"{path!r}: {'.'.join(parts[: i + 1])} is {short_repr(child)}, not a mapping")
        node = child
    _put(node, parts[-1], value, path)


def get_path(raw: dict[str, Any], path: str) -> Any:
    """The value at ``path`` (None where the path leads nowhere); ``name`` of a spec written as a
    bare name is that name."""
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


def drop_path(raw: dict[str, Any], path: str) -> None:
    """Delete the key at ``path`` from nested mappings, if it is there."""
    *parents, last = path.split(".")
    node: Any = raw
    for key in parents:
        node = node.get(key) if isinstance(node, dict) else None
    if isinstance(node, dict):
        node.pop(last, None)


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


def _child(node: dict | list, key: str, path: str = "") -> Any:
    if isinstance(node, list):
        return node[_index(node, key, path)]
    return node.get(key)


def _put(node: dict | list, key: str, value: Any, path: str = "") -> None:
    if isinstance(node, list):
        node[_index(node, key, path)] = value
    else:
        node[key] = value


def _index(node: list, key: str, path: str) -> int:
    if not key.isdigit() or int(key) >= len(node):
        raise ConfigError(f"{path!r}: {key!r} is not an index of a list of {len(node)}")
    return int(key)
