"""The ``share`` predicate: the share of a gap that a model closes, ``(part - low) / (high - low)``,
tested against a quoted quantity ("closes 85% of the gap", "improves more than 50%").

Noise (``noise.py``): a gap no wider than its noise is no gap (never a pass); the share's error
comes from its three cells' by the delta method, and the share is tested against the quoted
bound with the same rule as a comparison (a strict bound needs the share beyond its noise)."""

from __future__ import annotations

import math
import statistics
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
from mixerzoo.claims.comparisons import Judged, _verdict
from mixerzoo.claims.noise import (
    FAILS,
    HOLDS,
    TIE,
    decide,
    describe_noise,
    difference_error,
    excess_of,
    judge_excess,
    mean_error,
    standard_error,
)
from mixerzoo.claims.schema import (
    HIGHER,
    INCONCLUSIVE,
    NOT_RUN,
    TIE_TOL,
    Claim,
    Threshold,
    metric_direction,
)


def _evaluate_share(
    claim: Claim,
    cells: list[dict[str, Any]],
    metric: str,
    axes: list[str] | None,
    directions: dict[str, str] | None,
) -> Judged:
    share = claim.share
    assert share is not None
    chosen = select(cells, claim.selectors())
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
    return _share_verdict(claim, rows, gapless, read, metric, _pending_tail(pending, metric, "cells"))


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
    margin = (test.tolerance or 0.0) if test.op == "==" else 0.0
    return judge_excess(test.op, excess_of(test.op, s, test.bound, margin), se, sigmas)


def _share_verdict(claim: Claim, rows, gapless, read, metric: str, tail: str) -> Judged:
    share = claim.share
    assert share is not None
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
    if claim.quantifier == "mean" and rows:
        mean = statistics.fmean(r[1] for r in rows)
        outcomes = [_test_share(share.test, mean, mean_error([r[5] for r in rows]), info["sigmas"])[0]]
        fails = "" if outcomes[0] == HOLDS else f" {outcomes[0]}"
        summary = f"mean share {mean:.4f} over {len(rows)} groups{fails}"
    else:
        summary = (
            f"{outcomes.count(HOLDS)} of {len(rows) + len(gapless)} groups hold ({claim.quantifier} required)"
        )
    outcomes += [TIE] * len(gapless)
    verdict = _verdict(outcomes, "all" if claim.quantifier == "mean" else claim.quantifier)
    if not rows and verdict != INCONCLUSIVE and FAILS not in outcomes:
        verdict = INCONCLUSIVE
    gaps = f"; {len(gapless)} groups have no gap to close (not a pass)" if gapless else ""
    return verdict, f", {rule}; {noise}: {summary}{gaps}: {numbers}{tail}", info
