"""Reading verdicts (labels, counts, the exit code) and reading a filled-in cells table."""

from __future__ import annotations

from typing import Any

from mixerzoo.claims.base import (
    INCONCLUSIVE,
    NOT_REPRODUCED,
    NOT_RUN,
    ON_STAND_IN,
    PAPER,
    PROJECT,
    REPRODUCED,
)
from mixerzoo.registry import ConfigError, short_repr

# -- reading verdicts ---------------------------------------------------------------------
#: the counts a summary shows, in order; a verdict on stand-in data is counted on its own
COUNTED = (REPRODUCED, f"{REPRODUCED} {ON_STAND_IN}", NOT_REPRODUCED, INCONCLUSIVE, NOT_RUN)


def verdict_label(result: dict[str, Any]) -> str:
    """``reproduced``, or ``reproduced on stand-in data`` for a verdict judged on stand-ins."""
    verdict = result["verdict"]
    return f"{verdict} {ON_STAND_IN}" if result.get("stand_ins") and verdict != NOT_RUN else verdict


def count_verdicts(results: list[dict[str, Any]], source: str = PAPER) -> dict[str, int]:
    """``{reproduced, reproduced on stand-in data, not reproduced, inconclusive, not run}`` counts of
    the claims from ``source`` (the paper's by default: the project's own predicates count apart)."""
    counts = dict.fromkeys(COUNTED, 0)
    for r in results:
        if r.get("source", PAPER) != source:
            continue
        label = verdict_label(r)
        key = label if label in counts else r["verdict"]
        counts[key] = counts.get(key, 0) + 1
    return counts


def _counted(counts: dict[str, int]) -> str:
    return ", ".join(f"{n} {v}" for v, n in counts.items() if n)


def count_line(results: list[dict[str, Any]]) -> str:
    """``2 reproduced, 1 inconclusive; the project's own predicates: 1 reproduced`` (zero counts left
    out; never empty)."""
    paper, project = _counted(count_verdicts(results)), _counted(count_verdicts(results, PROJECT))
    if project:
        return f"{paper or 'no claims of the paper'}; the project's own predicates: {project}"
    return paper or "no claims"


def exit_code(results: list[dict[str, Any]]) -> int:
    """1 when a claim is not reproduced (inconclusive and not run exit 0)."""
    return int(any(r["verdict"] == NOT_REPRODUCED for r in results))


def read_cells_table(
    table: Any, axes: list[str], where: str = "--cells", shapes: list[list[str]] | None = None
) -> list[dict[str, Any]]:
    """The cells of a ``{"metrics": {...}, "cells": [{axis: value, metric: number | null}]}`` table,
    each checked to name every axis (or, given ``shapes``, the axes of one planned cell: a result
    whose cells differ in their axes, e.g. model cells and gap cells); a malformed table is one
    ConfigError line."""
    if not isinstance(table, dict) or not isinstance(table.get("cells"), list):
        raise ConfigError(f'{where}: expected {{"metrics": {{...}}, "cells": [{{...}}, ...]}}')
    if not isinstance(table.get("metrics", {}), dict):
        raise ConfigError(f"{where}: `metrics` must map each metric to higher or lower")
    cells = table["cells"]
    for i, cell in enumerate(cells):
        if not isinstance(cell, dict):
            raise ConfigError(f"{where}: cells[{i}] is not a mapping of axis and metric names to values")
        missing = _missing_axes(cell, axes, shapes)
        if missing:
            raise ConfigError(f"{where}: cells[{i}] has no value for axis {missing[0]!r}")
        for key, value in cell.items():
            if key in axes or value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ConfigError(f"{where}: cells[{i}].{key} = {short_repr(value)}: not a number or null")
    return cells


def _missing_axes(cell: dict[str, Any], axes: list[str], shapes: list[list[str]] | None) -> list[str]:
    """The axes ``cell`` lacks: of ``axes``, or of the planned shape it is closest to."""
    if not shapes:
        return [a for a in axes if a not in cell]
    gaps = [[a for a in shape if a not in cell] for shape in shapes]
    return [] if any(not g for g in gaps) else min(gaps, key=len)
