"""Selecting cells for a claim, naming them in its evidence, and telling complete cells from
pending ones (``runs_finished`` / ``runs_planned``)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from mixerzoo.claims.base import AXIS_NAMES, METRIC, RUNS_FINISHED, RUNS_PLANNED, Selector


# -- selection --------------------------------------------------------------------------
def _same(a: Any, b: Any) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return math.isclose(a, b, rel_tol=1e-9)
    return a == b


def matches(cell: dict[str, Any], selector: Selector) -> bool:
    """True when the cell has every axis of ``selector`` with one of its allowed values."""
    for axis, wanted in selector.items():
        if axis not in cell:
            return False
        allowed = wanted if isinstance(wanted, list) else [wanted]
        if not any(_same(cell[axis], w) for w in allowed):
            return False
    return True


def select(cells: Iterable[dict[str, Any]], selectors: list[Selector]) -> list[dict[str, Any]]:
    return [c for c in cells if any(matches(c, s) for s in selectors)]


def cell_axes(cell: dict[str, Any], axes: Iterable[str] | None = None) -> list[str]:
    """The axis keys of a cell: ``axes`` if given, else ``variant``, ``seed`` and dotted paths."""
    if axes is not None:
        return [a for a in axes if a in cell]
    return [k for k in cell if k in AXIS_NAMES or "." in k]


def group_key(cell: dict[str, Any], axes: Iterable[str] | None, skip: Iterable[str]) -> tuple:
    """The cell's values on every axis but ``skip``: cells with equal keys are compared together."""
    skip = set(skip)
    return tuple((a, repr(cell[a])) for a in cell_axes(cell, axes) if a not in skip)


def describe_cell(cell: dict[str, Any], axes: list[str], skip: Iterable[str] = ()) -> str:
    """``cat-1L d_model=64 seq_len=128`` (a spec's ``name`` shows as the spec: ``task=mqar``)."""
    skip = set(skip)
    parts = []
    for a in axes:
        if a in skip:
            continue
        if a in ("variant", METRIC):
            parts.append(str(cell[a]))
        else:
            segments = a.split(".")
            short = segments[-2] if segments[-1] == "name" and len(segments) > 1 else segments[-1]
            parts.append(f"{short}={cell[a]}")
    return " ".join(parts) or "(the cell)"


def _value(cell: dict[str, Any], metric: str) -> float | None:
    v = cell.get(metric)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or math.isnan(v):
        return None
    return float(v)


def _complete(cell: dict[str, Any], metric: str) -> bool:
    if _value(cell, metric) is None:
        return False
    finished, planned = cell.get(RUNS_FINISHED), cell.get(RUNS_PLANNED)
    return finished is None or planned is None or finished >= planned


def _pending(cell: dict[str, Any], metric: str, label: str) -> str:
    v = _value(cell, metric)
    finished, planned = cell.get(RUNS_FINISHED), cell.get(RUNS_PLANNED)
    runs = f" ({finished}/{planned} runs)" if finished is not None and planned is not None else ""
    return f"{label} {'not run' if v is None else f'{v:.4f} so far'}{runs}"


def _pending_tail(pending: list[tuple[str, list[dict[str, Any]]]], metric: str, what: str = "cells") -> str:
    """``; pending: ...`` naming each item with a partial result; items with none are counted."""
    if not pending:
        return ""
    started = [
        f"{label} ({', '.join(_pending(c, metric, '').strip() for c in group)})"
        for label, group in pending
        if any(_value(c, metric) is not None or c.get(RUNS_FINISHED) for c in group)
    ]
    idle = len(pending) - len(started)
    parts = started + ([f"{idle} {what if idle > 1 else what[:-1]} not run yet"] if idle else [])
    return f"; pending: {', '.join(parts)}"
