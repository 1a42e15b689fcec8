"""Judging claims over aggregated cells: :func:`evaluate_claims` (the entry), premises and claims
over several metrics. Each predicate judges itself (``predicates/``); ``strength.py`` says how
much of the paper's scope a verdict rests on."""

from __future__ import annotations

from typing import Any

from mixerzoo.claims.base import (
    INCONCLUSIVE,
    METRIC,
    METRIC_VALUE,
    NOT_REPRODUCED,
    NOT_RUN,
    ON_STAND_IN,
    PAPER_ONLY_EVIDENCE,
    REPRODUCED,
    RUNS_FINISHED,
    RUNS_PLANNED,
    Judged,
)
from mixerzoo.claims.cells import cell_axes, select
from mixerzoo.claims.noise import N_TEST, PREFIXES, SEEDS
from mixerzoo.claims.predicates import Reading
from mixerzoo.claims.schema import Claim, Premise, StandIn, stand_in_labels
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
    verdict counts the cells it rests on. A claim whose ``paper_only`` names ``preset`` reads "not
    run" with the measured reason, the verdict its cells gave kept in the evidence. Returns
    ``[{"claim", "paper_ref", "source", "verdict", "evidence", "premise", "stand_ins", "strength"}]``
    in the claims' order.
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
        if preset in claim.paper_only:  # measured: this preset's cells cannot decide it
            why = " ".join(claim.paper_only[preset].split())
            verdict, evidence = NOT_RUN, f"{PAPER_ONLY_EVIDENCE}{why}; measured here: {verdict}: {evidence}"
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
    predicate = claim.test if isinstance(claim, Premise) else claim.predicate()
    reading = Reading(claim, claim_cells, key, metric, claim_axes, directions)
    verdict, evidence, info = predicate.evaluate(reading)
    return verdict, f"{shown}{evidence}", info


def _with_premises(
    claim: Claim, verdict: str, evidence: str, cells: list[dict[str, Any]], metric, axes, directions=None
) -> tuple[str, str, str]:
    """The verdict once the premises are judged, its evidence, and the premises' own evidence."""
    failed, noisy, unrun, texts = [], [], [], []
    for p in claim.premises():
        p_verdict, p_evidence, _ = _judge(p, cells, p.metric or metric, axes, directions)
        text = f"{p.why}: {p_evidence}"
        word = {REPRODUCED: "held", INCONCLUSIVE: "within noise"}.get(p_verdict, p_verdict)
        texts.append(f"[{word}] {text}")
        # a premise within noise is not shown to hold: the claim cannot rest on it
        {NOT_REPRODUCED: failed, INCONCLUSIVE: noisy, NOT_RUN: unrun}.get(p_verdict, []).append(text)
    premise = "; ".join(texts)
    # a claim whose cells exist but hold no number (e.g. a ratio not computed because its
    # denominator is no improvement) is inconclusive when a premise fails, not "not run"
    unmet = failed or noisy
    if (verdict == NOT_RUN and not (unmet and _has_cells(claim, cells))) or not (unmet or unrun):
        return verdict, evidence, premise
    if failed:
        why = f"premise not met ({'; '.join(failed)})"
    elif noisy:
        why = f"premise not shown beyond noise ({'; '.join(noisy)})"
    else:
        why = f"premise not run ({'; '.join(unrun)})"
    return INCONCLUSIVE, f"{why}; the claim itself, {verdict}: {evidence}", premise


def _has_cells(claim: Claim, cells: list[dict[str, Any]]) -> bool:
    """The table has a cell for the claim (for a ``compare``, one on each side), run or not."""
    return claim.predicate().has_cells(select(cells, claim.selectors()))


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
