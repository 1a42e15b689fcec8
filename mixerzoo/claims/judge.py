"""Judging claims over aggregated cells: :func:`evaluate_claims` (the entry), premises, claims over
several metrics, and the ``test`` predicate (``comparisons.py`` has ``compare`` and ``trend``,
``shares.py`` ``share``, ``strength.py`` how much of the paper's scope a verdict rests on)."""

from __future__ import annotations

import statistics
from typing import Any

from mixerzoo.claims.cells import (
    _complete,
    _pending_tail,
    _value,
    cell_axes,
    describe_cell,
    matches,
    select,
)
from mixerzoo.claims.comparisons import Judged, _evaluate_compare, _evaluate_trend, floor_rule
from mixerzoo.claims.noise import CHANCE, N_TEST, PREFIXES, SEEDS, chance_of
from mixerzoo.claims.schema import (
    INCONCLUSIVE,
    METRIC,
    METRIC_VALUE,
    NOT_REPRODUCED,
    NOT_RUN,
    ON_STAND_IN,
    REPRODUCED,
    RUNS_FINISHED,
    RUNS_PLANNED,
    Claim,
    Premise,
    StandIn,
    stand_in_labels,
)
from mixerzoo.claims.shares import _evaluate_share
from mixerzoo.claims.strength import strength
from mixerzoo.registry import ConfigError


# -- evaluation -------------------------------------------------------------------------
def evaluate_claims(
    claims: list[Claim],
    cells: list[dict[str, Any]],
    default_metric: str | None,
    axes: list[str] | None = None,
    *,
    directions: dict[str, str] | None = None,
    stand_ins: list[StandIn] | None = None,
    preset: str | None = None,
    scope: list[dict[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """Each claim's verdict and evidence over the aggregated ``cells``.

    ``cells``: one dict per planned cell, axis names and metric names -> values (a metric absent
    or None: not run), optionally ``runs_finished`` / ``runs_planned`` and the size of its evidence
    (``noise.py``: ``n_test``, ``seeds``, ``sd:METRIC``, ``se:METRIC``, ``chance:METRIC``). ``axes``:
    the axis keys (default: ``variant``, ``seed`` and every dotted key). ``directions``: the study's
    ``metrics:`` (higher / lower); ``stand_ins``: the study's, named on the verdicts of ``preset``;
    ``scope``: the cells of the paper's own figure or table (its paper preset), against which each
    verdict counts the cells it rests on. Returns ``[{"claim", "paper_ref", "source", "verdict",
    "evidence", "premise", "stand_ins", "strength"}]`` in the claims' order.
    """
    out = []
    for claim in claims:
        metric = claim.metric or default_metric
        verdict, evidence, info = _judge(claim, cells, metric, axes, directions)
        premise = None
        if claim.premises():
            verdict, evidence, premise = _with_premises(
                claim, verdict, evidence, cells, metric, axes, directions
            )
        own = claim.stand_ins
        labels = stand_in_labels(own if own is not None else (stand_ins or []), preset)
        if labels:
            evidence += f"; {ON_STAND_IN}: {', '.join(labels)}"
        out.append(
            {
                "claim": claim.claim,
                "paper_ref": claim.paper_ref,
                "source": claim.source,
                "verdict": verdict,
                "evidence": evidence,
                "premise": premise,
                "stand_ins": labels,
                "strength": strength(claim, info, scope, axes),
            }
        )
    return out


def _judge(
    claim: Claim | Premise,
    cells: list[dict[str, Any]],
    metric: str | list[str] | None,
    axes: list[str] | None,
    directions: dict[str, str] | None = None,
) -> Judged:
    """(verdict, evidence, info) of one claim's predicate (or a premise's test), before its premises."""
    if metric is None:
        raise ConfigError(f"claim {getattr(claim, 'claim', '')[:40]!r}: no metric to judge")
    if isinstance(metric, list):
        claim_cells, claim_axes, shown = _per_metric(cells, metric, axes)
        key = METRIC_VALUE
    else:
        claim_cells, claim_axes, shown, key = cells, axes, metric, metric
    if isinstance(claim, Premise) or claim.test is not None:
        verdict, evidence, info = _evaluate_test(claim, claim_cells, key, claim_axes)
    elif claim.trend is not None:
        tie = floor_rule(claim.trend.op, None, metric, directions)
        verdict, evidence, info = _evaluate_trend(claim, claim_cells, key, claim_axes, tie)
    elif claim.share is not None:
        verdict, evidence, info = _evaluate_share(claim, claim_cells, key, claim_axes, directions)
    else:
        assert claim.compare is not None
        tie = floor_rule(claim.compare.op, claim.compare.floor, metric, directions)
        verdict, evidence, info = _evaluate_compare(claim, claim_cells, key, claim_axes, tie)
    return verdict, f"{shown}{evidence}", info


def _with_premises(
    claim: Claim, verdict: str, evidence: str, cells: list[dict[str, Any]], metric, axes, directions=None
) -> tuple[str, str, str]:
    """The verdict once the premises are judged, its evidence, and the premises' own evidence."""
    failed, unrun, texts = [], [], []
    for p in claim.premises():
        p_verdict, p_evidence, _ = _judge(p, cells, p.metric or metric, axes, directions)
        text = f"{p.why}: {p_evidence}"
        texts.append(f"[{'held' if p_verdict == REPRODUCED else p_verdict}] {text}")
        if p_verdict == NOT_REPRODUCED:
            failed.append(text)
        elif p_verdict == NOT_RUN:
            unrun.append(text)
    premise = "; ".join(texts)
    # a claim whose cells exist but hold no number (e.g. a ratio not computed because its
    # denominator is no improvement) is inconclusive when a premise fails, not "not run"
    if (verdict == NOT_RUN and not (failed and _has_cells(claim, cells))) or not (failed or unrun):
        return verdict, evidence, premise
    why = f"premise not met ({'; '.join(failed)})" if failed else f"premise not run ({'; '.join(unrun)})"
    return INCONCLUSIVE, f"{why}; the claim itself, {verdict}: {evidence}", premise


def _has_cells(claim: Claim, cells: list[dict[str, Any]]) -> bool:
    """The table has a cell for the claim (for a ``compare``, one on each side), run or not."""
    chosen = select(cells, claim.selectors())
    if claim.share is not None:
        return all(any(matches(c, side) for c in chosen) for side in claim.share.sides())
    if claim.compare is None:
        return bool(chosen)
    return any(matches(c, claim.compare.left) for c in chosen) and any(
        matches(c, claim.compare.right) for c in chosen
    )


def _per_metric(
    cells: list[dict[str, Any]], metrics: list[str], axes: list[str] | None
) -> tuple[list[dict[str, Any]], list[str], str]:
    """One cell per (cell, metric), the metric as an extra axis, its value (and the evidence keys
    of that metric: its error, spread, chance level) under ``METRIC_VALUE``."""
    out = []
    kept = (RUNS_FINISHED, RUNS_PLANNED, N_TEST, SEEDS)
    for c in cells:
        base = {k: v for k, v in c.items() if k in kept or k in cell_axes(c, axes)}
        for m in metrics:
            own = {p + METRIC_VALUE: c[p + m] for p in PREFIXES if p + m in c}
            out.append({**base, METRIC: m, METRIC_VALUE: c.get(m), **own})
    names = list(axes) if axes is not None else list(dict.fromkeys(a for c in cells for a in cell_axes(c)))
    return out, [*names, METRIC], f"{', '.join(metrics)} (each)"


def _evaluate_test(
    claim: Claim | Premise, cells: list[dict[str, Any]], metric: str, axes: list[str] | None
) -> Judged:
    test = claim.test
    assert test is not None
    chosen = select(cells, claim.selectors())
    if not chosen:
        return NOT_RUN, ": no cell of this run set matches the claim's selection", {}
    done = [
        c for c in chosen if _complete(c, metric) and (not test.at_chance or chance_of(c, metric) is not None)
    ]
    pending = [c for c in chosen if c not in done]
    tail = _pending_tail([(describe_cell(c, cell_axes(c, axes)), [c]) for c in pending], metric)
    if test.at_chance and any(_complete(c, metric) for c in pending):
        tail += f"; cells without a chance level ({CHANCE}{metric}) are not judged"
    if not done:
        return NOT_RUN, f": 0 of {len(chosen)} selected cells complete{tail}", {}
    numbers = [(describe_cell(c, cell_axes(c, axes)), _value(c, metric), chance_of(c, metric)) for c in done]
    listed = ", ".join(
        f"{label} {v:.4f}" + (f" (chance {ch:.4f})" if test.at_chance else "") for label, v, ch in numbers
    )
    coverage = f"{len(done)} of {len(chosen)} cells" if pending else f"{len(done)} cells"
    rule = test.describe()
    info = {"cells": done, "sigmas": []}
    if claim.quantifier == "mean":
        mean = statistics.fmean(v for _, v, _ in numbers)
        chance = statistics.fmean(ch for _, _, ch in numbers) if test.at_chance else None
        ok = test.holds(mean, chance)
        summary = f"mean {mean:.4f} {rule if ok else 'not ' + rule} over {coverage}"
    else:
        hits = sum(test.holds(v, ch) for _, v, ch in numbers)
        ok = hits == len(numbers) if claim.quantifier == "all" else hits > 0
        summary = f"{hits} of {coverage} {rule} ({claim.quantifier} required)"
    return (REPRODUCED if ok else NOT_REPRODUCED), f": {summary}: {listed}{tail}", info
