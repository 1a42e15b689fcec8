"""The ``share`` predicate: the share of a gap that a model closes, ``(part - low) / (high - low)``,
tested against a quoted quantity ("closes 85% of the gap", "improves more than 50%")."""

from __future__ import annotations

import statistics
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
    NOT_REPRODUCED,
    NOT_RUN,
    REPRODUCED,
    TIE_TOL,
    Claim,
    metric_direction,
)


def _evaluate_share(
    claim: Claim,
    cells: list[dict[str, Any]],
    metric: str,
    axes: list[str] | None,
    directions: dict[str, str] | None,
) -> tuple[str, str]:
    share = claim.share
    assert share is not None
    chosen = select(cells, claim.selectors())
    parts = [c for c in chosen if matches(c, share.part)]
    lows = [c for c in chosen if matches(c, share.low)]
    highs = [c for c in chosen if share.high is not None and matches(c, share.high)]
    sides = [("part", parts), ("low", lows), *([("high", highs)] if share.high is not None else [])]
    missing = [name for name, got in sides if not got]
    if missing:
        return NOT_RUN, f": no cell of this run set matches share.{missing[0]}"
    named = {k for side in share.sides() for k in side}

    higher = metric_direction(metric, directions) == HIGHER
    rows, gapless, pending = [], [], []  # rows: (label, share, part, low, high)
    for pc in parts:
        own = describe_cell(pc, [a for a in cell_axes(pc, axes) if a in named])
        others = [a for a in cell_axes(pc, axes) if a not in named]
        label = f"{own} at {describe_cell(pc, others)}" if others else own
        at = group_key(pc, axes, named)
        ends = [
            (lc, hc)
            for lc in lows
            if group_key(lc, axes, named) == at
            for hc in (highs or [None])
            if hc is None or group_key(hc, axes, named) == at
        ]
        if not ends:
            pending.append((f"{label}: no low or high cell beside it", [pc]))
            continue
        for lc, hc in ends:
            group = [pc, lc, *([hc] if hc is not None else [])]
            if not all(_complete(c, metric) for c in group):
                pending.append((label, group))
                continue
            p, lo = _value(pc, metric), _value(lc, metric)
            hi = _value(hc, metric) if hc is not None else share.high_value
            assert p is not None and lo is not None and hi is not None
            gap = (hi - lo) if higher else (lo - hi)
            if gap <= TIE_TOL:
                gapless.append((label, p, lo, hi))
            else:
                rows.append((label, (p - lo) / (hi - lo), p, lo, hi))
    return _share_verdict(claim, rows, gapless, _pending_tail(pending, metric, "cells"))


def _share_verdict(claim: Claim, rows: list[tuple], gapless: list[tuple], tail: str) -> tuple[str, str]:
    share = claim.share
    assert share is not None
    rule = f"share of the gap closed, (part - low) / (high - low), {share.test.describe()}"
    listed = ", ".join(
        f"{label}: share {s:.4f} (part {p:.4f}, low {lo:.4f}, high {hi:.4f})" for label, s, p, lo, hi in rows
    )
    no_gap = ", ".join(
        f"{label}: no gap (part {p:.4f}, low {lo:.4f}, high {hi:.4f}: high is not better than low)"
        for label, p, lo, hi in gapless
    )
    numbers = "; ".join(x for x in (listed, no_gap) if x)
    if not rows and not gapless:
        return NOT_RUN, f", {rule}: no complete (part, low, high) group{tail}"
    if claim.quantifier == "mean" and rows:
        mean = statistics.fmean(r[1] for r in rows)
        ok = share.test.holds(mean)
        summary = f"mean share {mean:.4f} over {len(rows)} groups{'' if ok else ' fails'}"
        fails = 0 if ok else 1
    else:
        hits = sum(share.test.holds(r[1]) for r in rows)
        fails = len(rows) - hits
        ok = bool(rows) and (fails == 0 if claim.quantifier == "all" else hits > 0)
        summary = f"{hits} of {len(rows) + len(gapless)} groups hold ({claim.quantifier} required)"
    if claim.quantifier == "any":
        verdict = REPRODUCED if ok else (INCONCLUSIVE if gapless else NOT_REPRODUCED)
    else:
        verdict = NOT_REPRODUCED if fails else (INCONCLUSIVE if gapless or not rows else REPRODUCED)
    gaps = f"; {len(gapless)} groups have no gap to close (not a pass)" if gapless else ""
    return verdict, f", {rule}: {summary}{gaps}: {numbers}{tail}"
