"""The predicates that compare cells: ``compare`` (pairs of cells, ties at the metric's floor) and
``trend`` (every consecutive step along an axis)."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

from mixerzoo.experiments.claims.cells import (
    _complete,
    _pending_tail,
    _value,
    cell_axes,
    describe_cell,
    group_key,
    matches,
    select,
)
from mixerzoo.experiments.claims.schema import (
    HIGHER,
    INCONCLUSIVE,
    METRIC,
    NOT_REPRODUCED,
    NOT_RUN,
    OPS,
    REPRODUCED,
    TIE_TOL,
    Claim,
    Compare,
    Trend,
    default_floor,
    metric_direction,
)


def _holds(op: str, left: float, right: float, margin: float) -> bool:
    if op == "==":
        return abs(left - right) <= margin
    return OPS[op](left, right + margin if op in (">", ">=") else right - margin)


def _rule(op: str, margin: float) -> str:
    """COMPARE_RULES with the margin filled in: ``left >= right - 0.01``."""
    if op == "==":
        return f"|left - right| <= {margin:g}"
    shift = margin if op in (">", ">=") else -margin
    return f"left {op} right {'+' if shift >= 0 else '-'} {abs(shift):g}"


FloorRule = Callable[[dict[str, Any], float, float], bool]


def _floor_rule(claim: Claim, metric: str | list[str], directions: dict[str, str] | None) -> FloorRule | None:
    """``tie(cell, left, right)``: both sides at the metric's floor (None: no floor applies).

    The floor is ``compare.floor``, else the metric's known worst value (accuracy: 0)."""
    cmp = claim.compare
    assert cmp is not None
    if cmp.op == "==":
        return None
    names = metric if isinstance(metric, list) else [metric]
    rules: dict[str, tuple[float, str]] = {}
    for name in names:
        floor = cmp.floor if cmp.floor is not None else default_floor(name)
        if floor is not None:
            rules[name] = (floor, metric_direction(name, directions))
    if not rules:
        return None

    def tie(cell: dict[str, Any], left: float, right: float) -> bool:
        rule = rules.get(cell.get(METRIC, metric) if isinstance(metric, list) else metric)
        if rule is None:
            return False
        floor, direction = rule
        at = (lambda v: v <= floor + TIE_TOL) if direction == HIGHER else (lambda v: v >= floor - TIE_TOL)
        return at(left) and at(right)

    return tie


def _evaluate_compare(
    claim: Claim, cells: list[dict[str, Any]], metric: str, axes: list[str] | None, tie: FloorRule | None
) -> tuple[str, str]:
    cmp = claim.compare
    assert cmp is not None
    chosen = select(cells, claim.selectors())
    if not chosen:
        return NOT_RUN, ": no cell of this run set matches the claim's selection"
    lefts = [c for c in chosen if matches(c, cmp.left)]
    rights = [c for c in chosen if matches(c, cmp.right)]
    if not lefts or not rights:
        side = "left" if not lefts else "right"
        return NOT_RUN, f": no cell of this run set matches compare.{side}"
    pairs, tail = _pairs(cmp, lefts, rights, metric, axes)
    if not pairs:
        return NOT_RUN, f": no complete (left, right) pair{tail}"
    rule = _rule(cmp.op, cmp.margin)
    tied = [p for p in pairs if tie is not None and tie(p[5], p[2], p[4])]
    listed = ", ".join(
        f"{where}: {ln} {lv:.4f} vs {rn} {rv:.4f}{' (tie at floor)' if p in tied else ''}"
        for p in pairs
        for where, ln, lv, rn, rv, _ in [p]
    )
    live = [p for p in pairs if p not in tied]
    ties = f"; {len(tied)} of {len(pairs)} pairs tie at the metric's floor (not a win)" if tied else ""
    if claim.quantifier == "mean":
        ok = bool(live) and _holds(
            cmp.op, statistics.fmean(p[2] for p in live), statistics.fmean(p[4] for p in live), cmp.margin
        )
        summary = f"mean left vs right over {len(live)} pairs{' holds' if ok else ' fails'}"
        verdict = INCONCLUSIVE if (ok or not live) and tied else (REPRODUCED if ok else NOT_REPRODUCED)
    else:
        hits = sum(_holds(cmp.op, p[2], p[4], cmp.margin) for p in live)
        summary = f"{hits} of {len(pairs)} pairs hold ({claim.quantifier} required)"
        if claim.quantifier == "all":
            verdict = NOT_REPRODUCED if hits < len(live) else (INCONCLUSIVE if tied else REPRODUCED)
        else:
            verdict = REPRODUCED if hits else (INCONCLUSIVE if tied else NOT_REPRODUCED)
    return verdict, f", {rule}: {summary}{ties}: {listed}{tail}"


def _pairs(
    cmp: Compare, lefts: list[dict[str, Any]], rights: list[dict[str, Any]], metric: str, axes
) -> tuple[list[tuple], str]:
    """Complete (where, left label, left value, right label, right value, left cell) pairs, and the
    evidence's tail naming pending and unpaired cells."""
    named = set(cmp.left) | set(cmp.right)

    right_by_key: dict[tuple, list[dict[str, Any]]] = {}
    for c in rights:
        right_by_key.setdefault(group_key(c, axes, named), []).append(c)

    def side(c: dict[str, Any]) -> str:  # the named axes of one side, e.g. "cat-1L"
        return describe_cell(c, [a for a in cell_axes(c, axes) if a in named])

    pairs, pending, unpaired = [], [], []
    for lc in lefts:
        label = describe_cell(lc, cell_axes(lc, axes), skip=named)
        partners = right_by_key.get(group_key(lc, axes, named), [])
        if not partners:
            unpaired.append(f"{label}: no right-hand cell")
            continue
        for rc in partners:
            if not (_complete(lc, metric) and _complete(rc, metric)):
                pending.append((f"{label}: {side(lc)} vs {side(rc)}", [lc, rc]))
                continue
            pairs.append((label, side(lc), _value(lc, metric), side(rc), _value(rc, metric), lc))
    return pairs, _pending_tail(pending, metric, "pairs") + "".join(f"; {u}" for u in unpaired)


def _sort_key(value: Any) -> tuple:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return (0, value, "")
    return (1, 0, str(value))


def _evaluate_trend(
    claim: Claim, cells: list[dict[str, Any]], metric: str, axes: list[str] | None
) -> tuple[str, str]:
    trend = claim.trend
    assert trend is not None
    chosen = [c for c in select(cells, claim.selectors()) if trend.axis in c]
    if not chosen:
        return NOT_RUN, f": no cell of this run set matches the claim's selection with axis {trend.axis}"
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for c in chosen:
        groups.setdefault(group_key(c, axes, [trend.axis]), []).append(c)
    judged, pending = [], []  # judged: (label, [(axis value, metric value)])
    for group in groups.values():
        label = describe_cell(group[0], cell_axes(group[0], axes), skip=[trend.axis])
        if len(group) < 2 or not all(_complete(c, metric) for c in group):
            pending.append((label, group))
            continue
        steps = sorted(((c[trend.axis], _value(c, metric)) for c in group), key=lambda s: _sort_key(s[0]))
        judged.append((label, steps))
    tail = _pending_tail(pending, metric, "groups")
    if not judged:
        return NOT_RUN, f": no complete group of two or more cells along {trend.axis}{tail}"
    if claim.quantifier == "mean":
        by_x: dict[Any, list[float]] = {}
        for _, steps in judged:
            for x, v in steps:
                by_x.setdefault(repr(x), []).append(v)
        xs = dict.fromkeys(repr(x) for _, steps in judged for x, _ in steps)
        judged = [("mean over groups", [(x, statistics.fmean(by_x[x])) for x in xs])]
    holds = [_steps_hold(trend, steps) for _, steps in judged]
    ok = all(holds) if claim.quantifier != "any" else any(holds)
    listed = ", ".join(
        f"{label}: {' -> '.join(f'{v:.4f}' for _, v in steps)}{'' if h else ' (a step fails)'}"
        for (label, steps), h in zip(judged, holds)
    )
    short = trend.axis.split(".")[-1]
    step = _rule(trend.op, trend.margin).replace("left", "next").replace("right", "prev")
    rule = f"every step along {short}: {step}"
    summary = f"{sum(holds)} of {len(judged)} groups hold ({claim.quantifier} required)"
    return (REPRODUCED if ok else NOT_REPRODUCED), f", {rule}: {summary}: {listed}{tail}"


def _steps_hold(trend: Trend, steps: list[tuple[Any, float]]) -> bool:
    return all(_holds(trend.op, b[1], a[1], trend.margin) for a, b in zip(steps, steps[1:]))
