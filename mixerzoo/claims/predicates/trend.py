"""The ``trend`` predicate: every consecutive step along an axis (``next op prev +/- margin``),
within each group of cells that agree on every other axis ("consistently improves" is every
step, not the endpoints). A step inside the noise or at chance is a tie."""

from __future__ import annotations

import statistics
from typing import Any, Literal

from pydantic import Field

from mixerzoo.claims.base import NOT_RUN, Judged
from mixerzoo.claims.cells import (
    _complete,
    _pending_tail,
    _value,
    cell_axes,
    describe_cell,
    group_key,
    select,
)
from mixerzoo.claims.noise import (
    FAILS,
    HOLDS,
    SE,
    TIE,
    describe_noise,
    difference_error,
    excess_of,
    judge_excess,
    mean_error,
    standard_error,
)
from mixerzoo.claims.predicates.base import FloorRule, Predicate, Reading, floor_rule, rule_text, verdict_of


class Trend(Predicate):
    """Every consecutive step along ``axis`` (ascending) satisfies ``next op prev (+/- margin)``."""

    axis: str = Field(min_length=1)
    op: Literal[">", ">=", "<", "<="]
    margin: float = 0.0

    def named_axes(self) -> set[str]:
        return {self.axis}

    def in_scope(self, cell: dict[str, Any]) -> bool:
        return self.axis in cell

    def evaluate(self, reading: Reading) -> Judged:
        tie = floor_rule(self.op, None, reading.metric, reading.directions)
        return _evaluate_trend(self, reading, tie)


def _sort_key(value: Any) -> tuple:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return (0, value, "")
    return (1, 0, str(value))


def _evaluate_trend(trend: Trend, reading: Reading, tie: FloorRule | None = None) -> Judged:
    claim, metric, axes = reading.holder, reading.key, reading.axes
    chosen = [c for c in select(reading.cells, claim.selectors()) if trend.axis in c]
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
    step = rule_text(trend.op, trend.margin).replace("left", "next").replace("right", "prev")
    summary = f"{outcomes.count(HOLDS)} of {len(judged)} groups hold ({claim.quantifier} required)"
    verdict = verdict_of(outcomes, "all" if claim.quantifier == "mean" else claim.quantifier)
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
