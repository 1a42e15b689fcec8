"""The predicates that compare cells: ``compare`` (pairs of cells) and ``trend`` (every
consecutive step along an axis). A difference inside the noise is a tie (``noise.py``), and so
is a pair whose two sides both sit at the metric's chance level: neither is ever a pass."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

from mixerzoo.claims.cells import (
    _complete,
    _pending_tail,
    _value,
    cell_axes,
    describe_cell,
    group_key,
    matches,
    select,
)
from mixerzoo.claims.noise import (
    FAILS,
    HOLDS,
    SE,
    TIE,
    at_floor,
    chance_of,
    describe_noise,
    difference_error,
    excess_of,
    judge_excess,
    mean_error,
    standard_error,
)
from mixerzoo.claims.schema import (
    INCONCLUSIVE,
    METRIC,
    NOT_REPRODUCED,
    NOT_RUN,
    REPRODUCED,
    Claim,
    Compare,
    Trend,
    default_floor,
    metric_direction,
)

TIE_WORDS = "tie (at chance or within noise: not a win)"
#: a judged predicate: (verdict, evidence, info); info: the cells read and each decision's margin
Judged = tuple[str, str, dict[str, Any]]


def _rule(op: str, margin: float) -> str:
    """The claim's rule with the margin filled in: ``left >= right - 0.01``."""
    if op == "==":
        return f"|left - right| <= {margin:g}"
    shift = margin if op in (">", ">=") else -margin
    return f"left {op} right {'+' if shift >= 0 else '-'} {abs(shift):g}"


#: ``tie(a, b, key)``: both cells at the metric's floor (chance level), within noise
FloorRule = Callable[[dict[str, Any], dict[str, Any], str], bool]


def floor_rule(
    op: str, floor: float | None, metric: str | list[str], directions: dict[str, str] | None
) -> FloorRule | None:
    """Both sides at the floor: a cell's ``chance:METRIC``, else ``floor``, else the metric's known
    worst value (accuracy: 0). None for ``==`` (a tie at chance is equality, not a failure)."""
    if op == "==":
        return None

    def at(cell: dict[str, Any], key: str) -> bool:
        name = str(cell.get(METRIC, key)) if isinstance(metric, list) else metric
        level = chance_of(cell, key)
        level = level if level is not None else (floor if floor is not None else default_floor(name))
        v = _value(cell, key)
        if level is None or v is None:
            return False  # no floor known: the direction is never asked for
        return at_floor(v, level, metric_direction(name, directions), standard_error(cell, key))

    return lambda a, b, key: at(a, key) and at(b, key)


def _verdict(outcomes: list[str], quantifier: str) -> str:
    """All: one failure fails, else one tie is inconclusive. Any: one hold holds, else a tie."""
    if quantifier == "any":
        return REPRODUCED if HOLDS in outcomes else (INCONCLUSIVE if TIE in outcomes else NOT_REPRODUCED)
    if FAILS in outcomes:
        return NOT_REPRODUCED
    return INCONCLUSIVE if TIE in outcomes or not outcomes else REPRODUCED


def _sigma_text(sig: float | None, outcome: str) -> str:
    if sig is None:
        return ""
    return f" ({sig:+.1f} SE{', within noise' if outcome == TIE else ''})"


def _evaluate_compare(
    claim: Claim, cells: list[dict[str, Any]], metric: str, axes: list[str] | None, tie: FloorRule | None
) -> Judged:
    cmp = claim.compare
    assert cmp is not None
    chosen = select(cells, claim.selectors())
    if not chosen:
        return NOT_RUN, ": no cell of this run set matches the claim's selection", {}
    lefts = [c for c in chosen if matches(c, cmp.left)]
    rights = [c for c in chosen if matches(c, cmp.right)]
    if not lefts or not rights:
        side = "left" if not lefts else "right"
        return NOT_RUN, f": no cell of this run set matches compare.{side}", {}
    pairs, tail = _pairs(cmp, lefts, rights, metric, axes)
    if not pairs:
        return NOT_RUN, f": no complete (left, right) pair{tail}", {}
    read = [c for p in pairs for c in p[5:]]
    info = {"cells": read, "sigmas": []}
    noise = describe_noise(read, metric)
    if claim.quantifier == "mean":
        outcome, listed, summary = _mean_pair(cmp, pairs, metric, tie, info)
        verdict = _verdict([outcome], "all")
    else:
        outcomes, texts = [], []
        for where, ln, lv, rn, rv, lc, rc in pairs:
            outcome, text = _one_pair(cmp, lv, rv, lc, rc, metric, tie, info)
            outcomes.append(outcome)
            texts.append(f"{where}: {ln} {lv:.4f} vs {rn} {rv:.4f}{text}")
        listed = ", ".join(texts)
        ties = outcomes.count(TIE)
        summary = f"{outcomes.count(HOLDS)} of {len(pairs)} pairs hold ({claim.quantifier} required)"
        summary += f"; {ties} of {len(pairs)} pairs {TIE_WORDS}" if ties else ""
        verdict = _verdict(outcomes, claim.quantifier)
    return verdict, f", {_rule(cmp.op, cmp.margin)}; {noise}: {summary}: {listed}{tail}", info


def _one_pair(cmp: Compare, lv, rv, lc, rc, metric: str, tie: FloorRule | None, info) -> tuple[str, str]:
    """One pair's outcome and its note: at chance, or its margin in standard errors."""
    if tie is not None and tie(lc, rc, metric):
        return TIE, " (both at chance: a tie)"
    excess = excess_of(cmp.op, lv, rv, cmp.margin)
    outcome, sig = judge_excess(cmp.op, excess, difference_error(lc, rc, metric), info["sigmas"])
    return outcome, _sigma_text(sig, outcome)


def _mean_pair(
    cmp: Compare, pairs: list[tuple], metric: str, tie: FloorRule | None, info
) -> tuple[str, str, str]:
    """``mean``: the mean of the left sides against the mean of the right sides (pairs at chance left out)."""
    live = [p for p in pairs if tie is None or not tie(p[5], p[6], metric)]
    if not live:
        return TIE, "every pair is at chance", "no pair above chance"
    mean = {"l": statistics.fmean(p[2] for p in live), "r": statistics.fmean(p[4] for p in live)}
    se = mean_error([difference_error(p[5], p[6], metric) for p in live])
    excess = excess_of(cmp.op, mean["l"], mean["r"], cmp.margin)
    outcome, sig = judge_excess(cmp.op, excess, se, info["sigmas"])
    listed = f"mean left {mean['l']:.4f} vs mean right {mean['r']:.4f}{_sigma_text(sig, outcome)}"
    summary = f"mean left vs right over {len(live)} pairs {'holds' if outcome == HOLDS else outcome}"
    if len(live) < len(pairs):
        summary += f"; {len(pairs) - len(live)} of {len(pairs)} pairs at chance (left out)"
    return outcome, listed, summary


def _pairs(
    cmp: Compare, lefts: list[dict[str, Any]], rights: list[dict[str, Any]], metric: str, axes
) -> tuple[list[tuple], str]:
    """Complete (where, left label, left value, right label, right value, left cell, right cell)
    pairs, and the evidence's tail naming pending and unpaired cells."""
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
            pairs.append((label, side(lc), _value(lc, metric), side(rc), _value(rc, metric), lc, rc))
    return pairs, _pending_tail(pending, metric, "pairs") + "".join(f"; {u}" for u in unpaired)


def _sort_key(value: Any) -> tuple:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return (0, value, "")
    return (1, 0, str(value))


def _evaluate_trend(
    claim: Claim,
    cells: list[dict[str, Any]],
    metric: str,
    axes: list[str] | None,
    tie: FloorRule | None = None,
) -> Judged:
    trend = claim.trend
    assert trend is not None
    chosen = [c for c in select(cells, claim.selectors()) if trend.axis in c]
    if not chosen:
        return NOT_RUN, f": no cell of this run set matches the claim's selection with axis {trend.axis}", {}
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for c in chosen:
        groups.setdefault(group_key(c, axes, [trend.axis]), []).append(c)
    judged, pending = [], []  # judged: (label, cells sorted along the axis)
    for group in groups.values():
        label = describe_cell(group[0], cell_axes(group[0], axes), skip=[trend.axis])
        if len(group) < 2 or not all(_complete(c, metric) for c in group):
            pending.append((label, group))
            continue
        judged.append((label, sorted(group, key=lambda c: _sort_key(c[trend.axis]))))
    tail = _pending_tail(pending, metric, "groups")
    if not judged:
        return NOT_RUN, f": no complete group of two or more cells along {trend.axis}{tail}", {}
    read = [c for _, group in judged for c in group]
    noise = describe_noise(read, metric)
    if claim.quantifier == "mean":
        judged = [("mean over groups", _mean_along(judged, trend.axis, metric))]
    info: dict[str, Any] = {"cells": read, "sigmas": []}
    outcomes = [_steps(trend, group, metric, tie, info) for _, group in judged]
    listed = ", ".join(
        f"{label}: {' -> '.join(f'{_value(c, metric):.4f}' for c in group)}{_group_note(o)}"
        for (label, group), o in zip(judged, outcomes)
    )
    short = trend.axis.split(".")[-1]
    step = _rule(trend.op, trend.margin).replace("left", "next").replace("right", "prev")
    summary = f"{outcomes.count(HOLDS)} of {len(judged)} groups hold ({claim.quantifier} required)"
    verdict = _verdict(outcomes, "all" if claim.quantifier == "mean" else claim.quantifier)
    return verdict, f", every step along {short}: {step}; {noise}: {summary}: {listed}{tail}", info


def _group_note(outcome: str) -> str:
    return {HOLDS: "", FAILS: " (a step fails)", TIE: " (a step within noise or at chance)"}[outcome]


def _mean_along(
    judged: list[tuple[str, list[dict[str, Any]]]], axis: str, metric: str
) -> list[dict[str, Any]]:
    """One cell per value of ``axis``: the mean over groups, its error from theirs (when all have one)."""
    by_x: dict[str, list[dict[str, Any]]] = {}
    for _, group in judged:
        for c in group:
            by_x.setdefault(repr(c[axis]), []).append(c)
    out = []
    for cs in by_x.values():
        mean = {axis: cs[0][axis], metric: statistics.fmean(_value(c, metric) for c in cs)}
        se = mean_error([standard_error(c, metric) for c in cs])
        if se is not None:
            mean[SE + metric] = se
        out.append(mean)
    return out


def _steps(trend: Trend, group: list[dict[str, Any]], metric: str, tie: FloorRule | None, info) -> str:
    """``holds`` when every step holds, ``fails`` when one fails beyond noise, else ``tie``."""
    outcomes = []
    for a, b in zip(group, group[1:]):
        if tie is not None and tie(a, b, metric):
            outcomes.append(TIE)
            continue
        excess = excess_of(trend.op, _value(b, metric), _value(a, metric), trend.margin)
        outcomes.append(judge_excess(trend.op, excess, difference_error(b, a, metric), info["sigmas"])[0])
    return FAILS if FAILS in outcomes else (TIE if TIE in outcomes else HOLDS)
