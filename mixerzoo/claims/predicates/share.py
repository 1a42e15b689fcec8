"""The ``share`` predicate: the share of a gap that a model closes, ``(part - low) / (high - low)``,
tested against a quoted quantity ("closes 85% of the gap", "improves more than 50%").

Noise (``noise.py``): a gap no wider than its noise is no gap (never a pass); the share's error
comes from its three cells' by the delta method, and the share is tested against the quoted
bound with the same rule as a comparison (a strict bound needs the share beyond its noise)."""

from __future__ import annotations

import math
import statistics
from typing import Any

from pydantic import Field, model_validator

from mixerzoo.claims.base import HIGHER, INCONCLUSIVE, NOT_RUN, TIE_TOL, Judged, Selector, metric_direction
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
    TIE,
    decide,
    describe_noise,
    difference_error,
    mean_error,
    standard_error,
)
from mixerzoo.claims.predicates.base import Predicate, Reading, verdict_of
from mixerzoo.claims.predicates.threshold import Threshold


class Share(Predicate):
    """The share of the gap from ``low`` to ``high`` that ``part`` closes, tested with ``test``.

    ``share = (part - low) / (high - low)`` in each group of cells that agree on every other axis;
    ``high_value`` in place of ``high`` is a fixed end (0 for a TVD: a relative improvement). A
    group where ``high`` is not better than ``low`` has no gap to close: no share is computed, and
    the claim is ``inconclusive`` there (never a pass), with the numbers."""

    part: Selector = Field(description="axis -> value(s): the model whose share of the gap is tested")
    low: Selector = Field(description="axis -> value(s): 0% of the gap (e.g. plain BaseConv)")
    high: Selector | None = Field(None, description="axis -> value(s): 100% of the gap (e.g. attention)")
    high_value: float | None = Field(None, description="a fixed 100% end, instead of `high`")
    test: Threshold

    @model_validator(mode="after")
    def _one_high(self) -> Share:
        if (self.high is None) == (self.high_value is None):
            raise ValueError("share: give exactly one of `high` (cells) or `high_value` (a number)")
        if self.test.at_chance:
            raise ValueError("share: the share is tested against a number, not `chance`")
        if not self.part or not self.low or self.high == {}:
            raise ValueError("share: part, low and high each select cells by at least one axis")
        return self

    def sides(self) -> list[Selector]:
        return [self.part, self.low, *([self.high] if self.high is not None else [])]

    def evaluate(self, reading: Reading) -> Judged:
        return _evaluate_share(self, reading)


def _evaluate_share(share: Share, reading: Reading) -> Judged:
    claim, metric, axes, directions = reading.holder, reading.key, reading.axes, reading.directions
    chosen = select(reading.cells, claim.selectors())
    parts = [c for c in chosen if matches(c, share.part)]
    lows = [c for c in chosen if matches(c, share.low)]
    highs = [c for c in chosen if share.high is not None and matches(c, share.high)]
    sides = [("part", parts), ("low", lows), *([("high", highs)] if share.high is not None else [])]
    missing = [name for name, got in sides if not got]
    if missing:
        return NOT_RUN, f": no cell of this run set matches share.{missing[0]}", {}
    named = {k for side in share.sides() for k in side}
    higher = metric_direction(metric, directions) == HIGHER
    rows, gapless, pending, read = [], [], [], []  # rows: (label, share, part, low, high, se)
    for pc in parts:
        own = describe_cell(pc, [a for a in cell_axes(pc, axes) if a in named])
        others = [a for a in cell_axes(pc, axes) if a not in named]
        label = f"{own} at {describe_cell(pc, others)}" if others else own
        ends = _ends(pc, lows, highs, axes, named)
        if not ends:
            pending.append((f"{label}: no low or high cell beside it", [pc]))
        for lc, hc in ends:
            group = [pc, lc, *([hc] if hc is not None else [])]
            if not all(_complete(c, metric) for c in group):
                pending.append((label, group))
                continue
            read += group
            row = _share_row(label, pc, lc, hc, share.high_value, metric, higher)
            (rows if len(row) == 6 else gapless).append(row)
    return _share_verdict(
        share, claim.quantifier, rows, gapless, read, metric, _pending_tail(pending, metric, "cells")
    )


def _ends(pc, lows, highs, axes, named) -> list[tuple[dict[str, Any], dict[str, Any] | None]]:
    """The (low, high) cells beside a part cell: those agreeing with it on every other axis."""
    at = group_key(pc, axes, named)
    return [
        (lc, hc)
        for lc in lows
        if group_key(lc, axes, named) == at
        for hc in (highs or [None])
        if hc is None or group_key(hc, axes, named) == at
    ]


def _share_row(label, pc, lc, hc, high_value, metric: str, higher: bool) -> tuple:
    """(label, share, part, low, high, se), or (label, part, low, high, why) when there is no gap."""
    p, lo = _value(pc, metric), _value(lc, metric)
    hi = _value(hc, metric) if hc is not None else high_value
    assert p is not None and lo is not None and hi is not None
    gap = (hi - lo) if higher else (lo - hi)
    gap_se = difference_error(hc, lc, metric) if hc is not None else standard_error(lc, metric)
    if gap <= TIE_TOL:
        return (label, p, lo, hi, "high is not better than low")
    if decide(">", gap, gap_se) != HOLDS:
        return (label, p, lo, hi, f"the gap {gap:.4f} is within its noise ({gap / gap_se:.1f} SE)")
    s = (p - lo) / (hi - lo)
    errors = [standard_error(pc, metric), standard_error(lc, metric)]
    errors.append(standard_error(hc, metric) if hc is not None else 0.0)
    se = None
    if None not in errors:
        se = math.sqrt(errors[0] ** 2 + ((1 - s) * errors[1]) ** 2 + (s * errors[2]) ** 2) / abs(hi - lo)
    return (label, s, p, lo, hi, se)


def _test_share(test: Threshold, s: float, se: float | None, sigmas: list[float]) -> tuple[str, float | None]:
    """``holds``, ``fails`` or ``tie``: the share against the quoted bound, beyond its noise; and
    its margin in standard errors."""
    return test.judge(s, se, None, sigmas)


def _share_verdict(share: Share, quantifier: str, rows, gapless, read, metric: str, tail: str) -> Judged:
    rule = f"share of the gap closed, (part - low) / (high - low), {share.test.describe()}"
    noise = describe_noise(read, metric) if read else ""
    info: dict[str, Any] = {"cells": read, "sigmas": []}
    outcomes = []
    texts = []
    for label, s, p, lo, hi, se in rows:
        outcome, sig = _test_share(share.test, s, se, info["sigmas"])
        outcomes.append(outcome)
        noise_note = f", {sig:+.1f} SE{' within noise' if outcome == TIE else ''}" if sig is not None else ""
        texts.append(f"{label}: share {s:.4f} (part {p:.4f}, low {lo:.4f}, high {hi:.4f}{noise_note})")
    no_gap = [
        f"{label}: no gap (part {p:.4f}, low {lo:.4f}, high {hi:.4f}: {why})"
        for label, p, lo, hi, why in gapless
    ]
    numbers = "; ".join(x for x in (", ".join(texts), ", ".join(no_gap)) if x)
    if not rows and not gapless:
        return NOT_RUN, f", {rule}: no complete (part, low, high) group{tail}", info
    if quantifier == "mean" and rows:
        mean = statistics.fmean(r[1] for r in rows)
        outcomes = [_test_share(share.test, mean, mean_error([r[5] for r in rows]), info["sigmas"])[0]]
        fails = "" if outcomes[0] == HOLDS else f" {outcomes[0]}"
        summary = f"mean share {mean:.4f} over {len(rows)} groups{fails}"
    else:
        summary = f"{outcomes.count(HOLDS)} of {len(rows) + len(gapless)} groups hold ({quantifier} required)"
    outcomes += [TIE] * len(gapless)
    verdict = verdict_of(outcomes, "all" if quantifier == "mean" else quantifier)
    if not rows and verdict != INCONCLUSIVE and FAILS not in outcomes:
        verdict = INCONCLUSIVE
    gaps = f"; {len(gapless)} groups have no gap to close (not a pass)" if gapless else ""
    return verdict, f", {rule}; {noise}: {summary}{gaps}: {numbers}{tail}", info
