"""How many runs a sweep plans, counted without building each run's config (``study list``).

:meth:`ExperimentConfig.expand` turns every grid point into a validated run config, and
:meth:`ExperimentConfig.count_runs` into a deep copy of the base config: thousands of copies for
a paper preset. Two points are one run when their raw configs are equal. A raw config is the
variant's base config with values written at a few dotted paths (the axes, the rules' ``set``);
outside the *touched roots* (the shortest of those paths) it is the variant's base. So a point is
identified by the base outside the touched roots (one per variant) and the values at the roots,
and only the nodes along a written path are copied (copy on write). Where a written path would
pass through a node that is not a plain mapping (a bare name, a list, a missing key), the
identity needs the whole config and the count falls back to :meth:`count_runs`.
"""

from __future__ import annotations

import copy
import itertools
import json
import math
from typing import Any

from mixerzoo.config_paths import set_path
from mixerzoo.studies.sweep.config import SEED, SEED_PATH, VARIANT, ExperimentConfig, matches

_ABSENT = "<absent>"  # the value at a touched root the config does not have


def count_planned(exp: ExperimentConfig) -> int:
    """The number of runs ``exp.expand()`` plans (equal to :meth:`count_runs`), fast."""
    if exp.paper_only:
        return 0
    axes = exp.axes()
    free = _independent(exp, axes)
    written = [SEED_PATH if a == SEED else a for a in axes if a != VARIANT]
    written += [path for rule in exp.rules for path in rule.set]
    roots = _roots(written)
    bases = {name: exp._base_with(variant) for name, variant in (exp.variants or {None: {}}).items()}
    if not all(_plain_above(base, root) for base in bases.values() for root in roots):
        return exp.count_runs()
    outside = {name: _dumps(_without(base, roots)) for name, base in bases.items()}
    seen: set[tuple[str, str]] = set()
    reduced = {a: values[:1] if a in free else values for a, values in axes.items()}
    for values in itertools.product(*reduced.values()):
        point = dict(zip(reduced, values))
        if any(matches(point, ex, exp.name) for ex in exp.exclude):
            continue
        variant = point.get(VARIANT)
        raw = _written(exp, point, bases[variant])
        seen.add((outside[variant], _dumps([_at(raw, root) for root in roots])))
    return len(seen) * math.prod(free.values())


def _independent(exp: ExperimentConfig, axes: dict[str, list[Any]]) -> dict[str, int]:
    """Axis -> its number of distinct values, for each axis that nothing else reads or writes: no
    other axis, rule or exclusion names a path over, at or under it. Each of its values is written
    where nothing else looks, so it multiplies the runs by its distinct values."""

    def path_of(name: str) -> str:
        return SEED_PATH if name == SEED else name

    others = [path_of(e) for ex in exp.exclude for e in ex]
    others += [path_of(p) for rule in exp.rules for p in [*rule.when, *rule.set]]
    free = {}
    for axis, values in axes.items():
        if axis == VARIANT:
            continue
        path = path_of(axis)
        near = [*others, *(path_of(a) for a in axes if a not in (axis, VARIANT))]
        if not any(_overlap(path, q) for q in near):
            free[axis] = len({_dumps(v) for v in values})
    return free


def _overlap(p: str, q: str) -> bool:
    return p == q or p.startswith(q + ".") or q.startswith(p + ".")


def _roots(paths: list[str]) -> list[str]:
    """The shortest of ``paths``: those with no other path as a prefix (each written path lies
    under exactly one root)."""
    unique = sorted(set(paths), key=len)
    roots: list[str] = []
    for path in unique:
        if not any(path == r or path.startswith(r + ".") for r in roots):
            roots.append(path)
    return roots


def _plain_above(base: dict[str, Any], root: str) -> bool:
    """Whether every node above ``root`` is a mapping that holds the next key (writing under the
    root then changes nothing above it)."""
    node: Any = base
    for key in root.split(".")[:-1]:
        if not isinstance(node, dict) or not isinstance(node.get(key), dict):
            return False
        node = node[key]
    return isinstance(node, dict)


def _without(base: dict[str, Any], roots: list[str]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for root in roots:
        *above, last = root.split(".")
        node = out
        for key in above:
            node = node[key]
        node.pop(last, None)
    return out


def _at(raw: dict[str, Any], root: str) -> Any:
    node: Any = raw
    for key in root.split("."):
        if not isinstance(node, dict) or key not in node:
            return _ABSENT
        node = node[key]
    return node


def _written(exp: ExperimentConfig, point: dict[str, Any], base: dict[str, Any]) -> dict[str, Any]:
    """The point's raw config as :meth:`ExperimentConfig._raw_points` writes it, sharing every node
    of ``base`` it does not write."""
    raw = dict(base)
    for path, value in point.items():
        if path != VARIANT:
            _write(raw, SEED_PATH if path == SEED else path, value)
    for rule in exp.rules:
        if matches(point, rule.when, exp.name, raw):
            for path, value in rule.set.items():
                _write(raw, path, copy.deepcopy(value))
    return raw


def _write(raw: dict[str, Any], path: str, value: Any) -> None:
    """``set_path`` after copying each container along ``path`` (``base`` is never changed)."""
    node: Any = raw
    for key in path.split(".")[:-1]:
        if isinstance(node, list) and key.isdigit() and int(key) < len(node):
            at: Any = int(key)
        elif isinstance(node, dict) and key in node:
            at = key
        else:
            break
        if not isinstance(node[at], (dict, list)):
            break
        node[at] = copy.copy(node[at])
        node = node[at]
    set_path(raw, path, value)


def _dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)
