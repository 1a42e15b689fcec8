"""The ``compare`` predicate: pairs of cells (``left op right +/- margin``), paired on every axis
the two sides do not name. A difference inside the noise is a tie (``noise.py``), and so is a
pair whose two sides both sit at the metric's chance level: neither is ever a pass."""

from __future__ import annotations

import statistics
from typing import Any

from pydantic import Field, model_validator

from mixerzoo.claims.base import NOT_RUN, Judged, Op, Selector
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
    HOLDS,
    TIE,
    describe_noise,
    difference_error,
    excess_of,
    judge_excess,
    mean_error,
)
from mixerzoo.claims.predicates.base import (
    TIE_WORDS,
    FloorRule,
    Predicate,
    Reading,
    floor_rule,
    rule_text,
    sigma_text,
    verdict_of,
)


class Compare(Predicate):
    left: Selector = Field(description="axis -> value(s): the cells on the left of op")
    right: Selector = Field(description="axis -> value(s): the cells on the right of op")
    op: Op
    margin: float = Field(
        0.0, description="see COMPARE_RULES; negative for >, >=, <, <= is a tolerance (ties at 100%)"
    )
    floor: float | None = Field(
        None,
        description="a pair with both sides at or below it (at or above it for a lower-is-better "
        "metric) is a tie, never a win (default: 0 for accuracy metrics)",
    )

    @model_validator(mode="after")
    def _sides_differ(self) -> Compare:
        if not self.left or not self.right:
            raise ValueError("compare: left and right each select cells by at least one axis")
        if self.op == "==" and self.margin < 0:
            raise ValueError(f"compare.margin = {self.margin}: with op '==' the margin is a distance, >= 0")
        return self

    def sides(self) -> list[Selector]:
        return [self.left, self.right]

    def evaluate(self, reading: Reading) -> Judged:
        tie = floor_rule(self.op, self.floor, reading.metric, reading.directions)
        return _evaluate_compare(self, reading, tie)


def _evaluate_compare(cmp: Compare, reading: Reading, tie: FloorRule | None) -> Judged:
    claim, metric, axes = reading.holder, reading.key, reading.axes
    chosen = select(reading.cells, claim.selectors())
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
        verdict = verdict_of([outcome], "all")
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
        verdict = verdict_of(outcomes, claim.quantifier)
    return verdict, f", {rule_text(cmp.op, cmp.margin)}; {noise}: {summary}: {listed}{tail}", info


def _one_pair(cmp: Compare, lv, rv, lc, rc, metric: str, tie: FloorRule | None, info) -> tuple[str, str]:
    """One pair's outcome and its note: at chance, or its margin in standard errors."""
    if tie is not None and tie(lc, rc, metric):
        return TIE, " (both at chance: a tie)"
    excess = excess_of(cmp.op, lv, rv, cmp.margin)
    outcome, sig = judge_excess(cmp.op, excess, difference_error(lc, rc, metric), info["sigmas"])
    return outcome, sigma_text(sig, outcome)


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
    listed = f"mean left {mean['l']:.4f} vs mean right {mean['r']:.4f}{sigma_text(sig, outcome)}"
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
