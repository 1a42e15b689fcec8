"""A paper's claims as checkable predicates over an experiment's aggregated cells.

An experiment file lists its paper's claims under ``claims:``; each quotes the paper, names
where it comes from and states a predicate over the cells (one aggregated number per metric
and cell, e.g. the max accuracy over learning rates and seeds)::

    claims:
      - claim: "the single-layer CAT model maintains 100% accuracy across all settings"
        paper_ref: "CAT-ws Sec. 4, Fig. 3"
        where: {variant: cat-1L}              # axis -> value or list of values
        metric: accuracy_per_query            # default: the experiment's aggregate.metric
        test: {op: ">=", value: 0.99}
        quantifier: all                       # all | any | mean over the selected cells
      - claim: "vanilla attention ahead of LaS on Select"
        paper_ref: "LaS Table 7"
        where: {data.task.name: select}
        compare: {left: {variant: attention-2L}, right: {variant: las-2L}, op: ">", margin: 0.05}

``where`` keys are axis names (dotted config paths, ``variant``, ``seed``); a list of mappings
selects their union (for cells that no product of values describes, e.g. d < L). ``compare``
pairs each left cell with every right cell that agrees on every axis the two sides do not name
(``right: {variant: [a, b]}`` compares the left model with each of a and b), and tests
``left op right ± margin`` (see :data:`COMPARE_RULES`).

A third predicate, ``trend: {axis, op, margin}``, tests every consecutive step along ``axis``
within each group of cells that agree on every other axis ("consistently improves" is every
step, not the endpoints). ``test`` may test a quantity the paper states: ``{op: ">=", quoted:
0.85, tolerance: 0.05}`` is ``x >= 0.85 - 0.05``. A ``premise`` (one or a list of ``{where,
metric, test, quantifier, why}``, judged over every cell) states what must hold for the claim
to mean something (the model contrasted with learned; the models beat chance); ``source:
paper | project`` tells a quoted claim from the project's own predicate. A study file's
``metrics: {NAME: higher | lower}`` gives a metric's direction (:func:`metric_direction` has the
built-in rule) and ``stand_ins: [{data, stands_for, presets}]`` names data that stands in for the
paper's: every verdict of such a preset says so.

Verdicts: ``reproduced`` / ``not reproduced`` / ``inconclusive`` / ``not run``. Only
*complete* cells (every planned run finished) decide a verdict, so a cell whose seeds are still
running never fails a claim early; cells not run or incomplete are named in the evidence. A
claim whose selection has no complete cell (or no cell at all, e.g. a quick preset that does
not cover it) is ``not run``. A premise that does not hold makes the claim ``inconclusive``
(its numbers in the evidence); so does a ``compare`` pair whose two sides are both at the
metric's floor (a tie at chance is not a win). A claim quotes the paper and is never weakened
to fit our numbers.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from mixerzoo.params import StrictModel
from mixerzoo.registry import ConfigError, short_repr

REPRODUCED = "reproduced"
NOT_REPRODUCED = "not reproduced"
INCONCLUSIVE = "inconclusive"
NOT_RUN = "not run"
VERDICTS = (REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE, NOT_RUN)
#: how summaries count a verdict judged on stand-in data (never as the paper's claim reproduced)
ON_STAND_IN = "on stand-in data"
PAPER, PROJECT = "paper", "project"
HIGHER, LOWER = "higher", "lower"
TIE_TOL = 1e-9  # two sides this close, both at the floor, are a tie

# Optional keys of a cell dict: how many of the cell's planned runs finished. Without them a
# cell counts as complete when it has a value for the claim's metric.
RUNS_FINISHED = "runs_finished"
RUNS_PLANNED = "runs_planned"
AXIS_NAMES = ("variant", "seed")  # axes without a dot; every other axis is a dotted config path
METRIC = "metric"  # the extra axis of a claim over several metrics; its value is under METRIC_VALUE
METRIC_VALUE = "_value"

Op = Literal[">=", ">", "<=", "<", "=="]
OPS: dict[str, Callable[[float, float], bool]] = {
    ">=": lambda a, b: a >= b,
    ">": lambda a, b: a > b,
    "<=": lambda a, b: a <= b,
    "<": lambda a, b: a < b,
    "==": lambda a, b: math.isclose(a, b, rel_tol=0.0, abs_tol=1e-12),
}
# compare: the pair (left, right) holds when ...
COMPARE_RULES = {
    ">": "left > right + margin",
    ">=": "left >= right + margin",
    "<": "left < right - margin",
    "<=": "left <= right - margin",
    "==": "|left - right| <= margin",
}

Selector = dict[str, Any]


class Threshold(StrictModel):
    """``x op value``, or ``x op quoted -/+ tolerance`` for a quantity the paper states."""

    op: Op
    value: float | None = None
    quoted: float | None = Field(None, description="a number the paper states; tested with `tolerance`")
    tolerance: float | None = Field(None, ge=0, description="how far below (>, >=) or above (<, <=) it")

    @model_validator(mode="after")
    def _value_or_quoted(self) -> Threshold:
        if (self.value is None) == (self.quoted is None):
            raise ValueError("test: give exactly one of `value` or `quoted`")
        return self

    @property
    def bound(self) -> float:
        base = self.quoted if self.quoted is not None else self.value
        assert base is not None
        tol = self.tolerance or 0.0
        if self.op in (">", ">="):
            return base - tol
        return base + tol if self.op in ("<", "<=") else base

    def holds(self, x: float) -> bool:
        if self.op == "==" and self.tolerance:
            return abs(x - self.bound) <= self.tolerance
        return OPS[self.op](x, self.bound)

    def describe(self) -> str:
        """``>= 0.9``, or ``>= 0.8 (quoted 0.85, tolerance 0.05)``."""
        if self.quoted is None and not self.tolerance:
            return f"{self.op} {self.bound:g}"
        what = f"quoted {self.quoted:g}" if self.quoted is not None else f"value {self.value:g}"
        return f"{self.op} {self.bound:g} ({what}, tolerance {self.tolerance or 0:g})"


class Compare(StrictModel):
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


class Trend(StrictModel):
    """Every consecutive step along ``axis`` (ascending) satisfies ``next op prev (+/- margin)``."""

    axis: str = Field(min_length=1)
    op: Literal[">", ">=", "<", "<="]
    margin: float = 0.0


class Premise(StrictModel):
    """What must hold for a claim to mean something; judged like a ``test`` claim over every cell."""

    where: Selector | list[Selector] = Field(default_factory=dict)
    metric: str | list[str] | None = Field(None, description="default: the claim's metric")
    test: Threshold
    quantifier: Literal["all", "any", "mean"] = "all"
    why: str = Field(min_length=1, description="why the claim needs it, e.g. 'attention learned'")

    def selectors(self) -> list[Selector]:
        return self.where if isinstance(self.where, list) else [self.where]


class StandIn(StrictModel):
    """Data a study runs on in place of the paper's (under ``presets``; all when not given)."""

    data: str = Field(min_length=1, description="what the runs use, e.g. '8x8 digits (scikit-learn)'")
    stands_for: str = Field(min_length=1, description="the paper's data, e.g. 'MNIST'")
    presets: list[str] | None = None

    def applies(self, preset: str | None) -> bool:
        return self.presets is None or preset is None or preset in self.presets

    def label(self) -> str:
        return f"{self.data} for {self.stands_for}"


class Claim(StrictModel):
    """One statement of a paper as a predicate over aggregated cells."""

    claim: str = Field(min_length=1, description="the paper's words, quoted")
    paper_ref: str = Field(min_length=1, description="section / figure / table, e.g. 'CAT-ws Sec. 4, Fig. 3'")
    source: Literal["paper", "project"] = Field(
        PAPER, description="paper: quoted from the paper; project: our own predicate"
    )
    where: Selector | list[Selector] = Field(
        default_factory=dict, description="axis -> value or list of values; a list of these is a union"
    )
    metric: str | list[str] | None = Field(
        None,
        description="default: the experiment's aggregate.metric; a list tests each cell on each metric "
        "(e.g. accuracy@32 ... accuracy@1024 for a claim over every test length)",
    )
    test: Threshold | None = None
    quantifier: Literal["all", "any", "mean"] = "all"
    compare: Compare | None = None
    trend: Trend | None = None
    premise: Premise | list[Premise] | None = None
    stand_ins: list[StandIn] | None = Field(
        None, description="default: the study's; [] when this claim runs on the paper's data"
    )

    @field_validator("where")
    @classmethod
    def _where_not_empty_list(cls, where: Selector | list[Selector]) -> Selector | list[Selector]:
        if isinstance(where, list) and not where:
            raise ValueError("an empty list selects nothing; use {} for every cell")
        return where

    @model_validator(mode="after")
    def _one_predicate(self) -> Claim:
        if sum(p is not None for p in (self.test, self.compare, self.trend)) != 1:
            raise ValueError(f"claim {self.claim[:40]!r}: give exactly one of `test`, `compare` or `trend`")
        return self

    def selectors(self) -> list[Selector]:
        return self.where if isinstance(self.where, list) else [self.where]

    def premises(self) -> list[Premise]:
        if self.premise is None:
            return []
        return self.premise if isinstance(self.premise, list) else [self.premise]

    def axes_named(self) -> set[str]:
        names = {k for s in self.selectors() for k in s}
        if self.compare is not None:
            names |= set(self.compare.left) | set(self.compare.right)
        if self.trend is not None:
            names.add(self.trend.axis)
        return names | {k for p in self.premises() for s in p.selectors() for k in s}


# -- metric directions --------------------------------------------------------------------
HIGHER_PREFIXES = ("accuracy", "r2")
HIGHER_PARTS = ("accuracy", "decrease", "gain", "share", "closed", "score")
LOWER_PARTS = ("loss", "tvd", "ppl", "perplexity", "bpc", "bits", "error")


def metric_direction(name: str, overrides: dict[str, str] | None = None) -> str:
    """``higher`` or ``lower``: the study's ``metrics:`` entry, else the built-in rule by name."""
    if overrides and name in overrides:
        return overrides[name]
    low = name.lower()
    if low.startswith(HIGHER_PREFIXES) or any(p in low for p in HIGHER_PARTS):
        return HIGHER
    if any(p in low for p in LOWER_PARTS):
        return LOWER
    raise ConfigError(
        f"metric {name!r}: direction unknown; add `metrics: {{{name}: higher}}` (or lower) to the study file"
    )


def default_floor(name: str) -> float | None:
    """The worst value a metric can take when nothing is learned, where known (accuracy: 0)."""
    return 0.0 if "accuracy" in name.lower() else None


def claim_metrics(claims: list[Claim], default_metric: str | None) -> list[str]:
    """Every metric the claims and their premises read, in order of first use."""
    out: list[str] = []
    for claim in claims:
        own = claim.metric or default_metric
        for m in [own, *(p.metric or own for p in claim.premises())]:
            if m is None:
                raise ConfigError(f"claim {claim.claim[:40]!r}: no metric (the study has no default one)")
            out += m if isinstance(m, list) else [m]
    return list(dict.fromkeys(out))


# -- selection --------------------------------------------------------------------------
def _same(a: Any, b: Any) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return math.isclose(a, b, rel_tol=1e-9)
    return a == b


def matches(cell: dict[str, Any], selector: Selector) -> bool:
    """True when the cell has every axis of ``selector`` with one of its allowed values."""
    for axis, wanted in selector.items():
        if axis not in cell:
            return False
        allowed = wanted if isinstance(wanted, list) else [wanted]
        if not any(_same(cell[axis], w) for w in allowed):
            return False
    return True


def select(cells: Iterable[dict[str, Any]], selectors: list[Selector]) -> list[dict[str, Any]]:
    return [c for c in cells if any(matches(c, s) for s in selectors)]


def cell_axes(cell: dict[str, Any], axes: Iterable[str] | None = None) -> list[str]:
    """The axis keys of a cell: ``axes`` if given, else ``variant``, ``seed`` and dotted paths."""
    if axes is not None:
        return [a for a in axes if a in cell]
    return [k for k in cell if k in AXIS_NAMES or "." in k]


def describe_cell(cell: dict[str, Any], axes: list[str], skip: Iterable[str] = ()) -> str:
    """``cat-1L d_model=64 seq_len=128`` (a spec's ``name`` shows as the spec: ``task=mqar``)."""
    skip = set(skip)
    parts = []
    for a in axes:
        if a in skip:
            continue
        if a in ("variant", METRIC):
            parts.append(str(cell[a]))
        else:
            segments = a.split(".")
            short = segments[-2] if segments[-1] == "name" and len(segments) > 1 else segments[-1]
            parts.append(f"{short}={cell[a]}")
    return " ".join(parts) or "(the cell)"


def _value(cell: dict[str, Any], metric: str) -> float | None:
    v = cell.get(metric)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or math.isnan(v):
        return None
    return float(v)


def _complete(cell: dict[str, Any], metric: str) -> bool:
    if _value(cell, metric) is None:
        return False
    finished, planned = cell.get(RUNS_FINISHED), cell.get(RUNS_PLANNED)
    return finished is None or planned is None or finished >= planned


def _pending(cell: dict[str, Any], metric: str, label: str) -> str:
    v = _value(cell, metric)
    finished, planned = cell.get(RUNS_FINISHED), cell.get(RUNS_PLANNED)
    runs = f" ({finished}/{planned} runs)" if finished is not None and planned is not None else ""
    return f"{label} {'not run' if v is None else f'{v:.4f} so far'}{runs}"


def _pending_tail(pending: list[tuple[str, list[dict[str, Any]]]], metric: str, what: str = "cells") -> str:
    """``; pending: ...`` naming each item with a partial result; items with none are counted."""
    if not pending:
        return ""
    started = [
        f"{label} ({', '.join(_pending(c, metric, '').strip() for c in group)})"
        for label, group in pending
        if any(_value(c, metric) is not None or c.get(RUNS_FINISHED) for c in group)
    ]
    idle = len(pending) - len(started)
    parts = started + ([f"{idle} {what if idle > 1 else what[:-1]} not run yet"] if idle else [])
    return f"; pending: {', '.join(parts)}"


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
) -> list[dict[str, Any]]:
    """Each claim's verdict and evidence over the aggregated ``cells``.

    ``cells``: one dict per planned cell, axis names and metric names -> values (a metric absent
    or None: not run), optionally ``runs_finished`` / ``runs_planned``. ``axes``: the axis keys
    (default: ``variant``, ``seed`` and every dotted key). ``directions``: the study's
    ``metrics:`` (higher / lower); ``stand_ins``: the study's, named on the verdicts of ``preset``.
    Returns ``[{"claim", "paper_ref", "source", "verdict", "evidence", "premise", "stand_ins"}]``
    in the claims' order.
    """
    out = []
    for claim in claims:
        metric = claim.metric or default_metric
        verdict, evidence = _judge(claim, cells, metric, axes, directions)
        premise = None
        if claim.premises():
            verdict, evidence, premise = _with_premises(claim, verdict, evidence, cells, metric, axes)
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
            }
        )
    return out


def _judge(
    claim: Claim | Premise,
    cells: list[dict[str, Any]],
    metric: str | list[str] | None,
    axes: list[str] | None,
    directions: dict[str, str] | None = None,
) -> tuple[str, str]:
    """(verdict, evidence) of one claim's predicate (or a premise's test), before its premises."""
    if metric is None:
        raise ConfigError(f"claim {getattr(claim, 'claim', '')[:40]!r}: no metric to judge")
    if isinstance(metric, list):
        claim_cells, claim_axes, shown = _per_metric(cells, metric, axes)
        key = METRIC_VALUE
    else:
        claim_cells, claim_axes, shown, key = cells, axes, metric, metric
    if isinstance(claim, Premise) or claim.test is not None:
        verdict, evidence = _evaluate_test(claim, claim_cells, key, claim_axes)
    elif claim.trend is not None:
        verdict, evidence = _evaluate_trend(claim, claim_cells, key, claim_axes)
    else:
        floor = _floor_rule(claim, metric, directions)
        verdict, evidence = _evaluate_compare(claim, claim_cells, key, claim_axes, floor)
    return verdict, f"{shown}{evidence}"


def _with_premises(
    claim: Claim, verdict: str, evidence: str, cells: list[dict[str, Any]], metric, axes
) -> tuple[str, str, str]:
    """The verdict once the premises are judged, its evidence, and the premises' own evidence."""
    failed, unrun, texts = [], [], []
    for p in claim.premises():
        p_verdict, p_evidence = _judge(p, cells, p.metric or metric, axes)
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
    if claim.compare is None:
        return bool(chosen)
    return any(matches(c, claim.compare.left) for c in chosen) and any(
        matches(c, claim.compare.right) for c in chosen
    )


def _per_metric(
    cells: list[dict[str, Any]], metrics: list[str], axes: list[str] | None
) -> tuple[list[dict[str, Any]], list[str], str]:
    """One cell per (cell, metric), the metric as an extra axis, its value under ``METRIC_VALUE``."""
    out = []
    for c in cells:
        base = {k: v for k, v in c.items() if k in (RUNS_FINISHED, RUNS_PLANNED) or k in cell_axes(c, axes)}
        for m in metrics:
            out.append({**base, METRIC: m, METRIC_VALUE: c.get(m)})
    names = list(axes) if axes is not None else list(dict.fromkeys(a for c in cells for a in cell_axes(c)))
    return out, [*names, METRIC], f"{', '.join(metrics)} (each)"


def _evaluate_test(
    claim: Claim | Premise, cells: list[dict[str, Any]], metric: str, axes: list[str] | None
) -> tuple[str, str]:
    test = claim.test
    assert test is not None
    chosen = select(cells, claim.selectors())
    if not chosen:
        return NOT_RUN, ": no cell of this run set matches the claim's selection"
    done = [c for c in chosen if _complete(c, metric)]
    pending = [c for c in chosen if not _complete(c, metric)]
    tail = _pending_tail([(describe_cell(c, cell_axes(c, axes)), [c]) for c in pending], metric)
    if not done:
        return NOT_RUN, f": 0 of {len(chosen)} selected cells complete{tail}"
    numbers = [(describe_cell(c, cell_axes(c, axes)), _value(c, metric)) for c in done]
    listed = ", ".join(f"{label} {v:.4f}" for label, v in numbers)
    values = [v for _, v in numbers]
    coverage = f"{len(done)} of {len(chosen)} cells" if pending else f"{len(done)} cells"
    rule = test.describe()
    if claim.quantifier == "mean":
        mean = statistics.fmean(values)
        ok = test.holds(mean)
        summary = f"mean {mean:.4f} {rule if ok else 'not ' + rule} over {coverage}"
    else:
        hits = sum(test.holds(v) for v in values)
        ok = hits == len(values) if claim.quantifier == "all" else hits > 0
        summary = f"{hits} of {coverage} {rule} ({claim.quantifier} required)"
    return (REPRODUCED if ok else NOT_REPRODUCED), f": {summary}: {listed}{tail}"


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

    def key(c: dict[str, Any]) -> tuple:
        return tuple((a, repr(c[a])) for a in cell_axes(c, axes) if a not in named)

    right_by_key: dict[tuple, list[dict[str, Any]]] = {}
    for c in rights:
        right_by_key.setdefault(key(c), []).append(c)

    def side(c: dict[str, Any]) -> str:  # the named axes of one side, e.g. "cat-1L"
        return describe_cell(c, [a for a in cell_axes(c, axes) if a in named])

    pairs, pending, unpaired = [], [], []
    for lc in lefts:
        label = describe_cell(lc, cell_axes(lc, axes), skip=named)
        partners = right_by_key.get(key(lc), [])
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
        key = tuple((a, repr(c[a])) for a in cell_axes(c, axes) if a != trend.axis)
        groups.setdefault(key, []).append(c)
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


# -- checking a file's claims against its axes -------------------------------------------
def check_claims(
    claims: list[Claim],
    axes: dict[str, list[Any]],
    check_path: Callable[[str, str], None],
    where: str = "claims",
) -> None:
    """Raise a one-line ConfigError when a claim names an unknown variant or field path.

    ``axes``: the experiment's axes and their values (before any preset trims them);
    ``check_path(path, where)``: raises a ConfigError starting with ``where`` unless the dotted
    path names a field of a run config (a claim may select on a field that is not an axis: its
    value is then read from the runs' configs).
    """
    for i, claim in enumerate(claims):
        selectors = [*claim.selectors(), *(s for p in claim.premises() for s in p.selectors())]
        if claim.compare is not None:
            selectors += [claim.compare.left, claim.compare.right]
        if claim.trend is not None:
            selectors.append({claim.trend.axis: []})
        for selector in selectors:
            for axis, wanted in selector.items():
                if axis in axes:
                    if axis == "variant":
                        for name in wanted if isinstance(wanted, list) else [wanted]:
                            if name not in axes[axis]:
                                raise ConfigError(
                                    f"{where}[{i}]: unknown variant {name!r}; "
                                    f"allowed: {', '.join(map(str, axes[axis]))}"
                                )
                    continue
                if axis in AXIS_NAMES:
                    raise ConfigError(f"{where}[{i}]: {axis!r} is not an axis of this experiment")
                check_path(axis, f"{where}[{i}]")


# -- reading verdicts ---------------------------------------------------------------------
#: the counts a summary shows, in order; a verdict on stand-in data is counted on its own
COUNTED = (REPRODUCED, f"{REPRODUCED} {ON_STAND_IN}", NOT_REPRODUCED, INCONCLUSIVE, NOT_RUN)


def verdict_label(result: dict[str, Any]) -> str:
    """``reproduced``, or ``reproduced on stand-in data`` for a verdict judged on stand-ins."""
    verdict = result["verdict"]
    return f"{verdict} {ON_STAND_IN}" if result.get("stand_ins") and verdict != NOT_RUN else verdict


def count_verdicts(results: list[dict[str, Any]]) -> dict[str, int]:
    """``{reproduced, reproduced on stand-in data, not reproduced, inconclusive, not run}`` counts."""
    counts = dict.fromkeys(COUNTED, 0)
    for r in results:
        label = verdict_label(r)
        key = label if label in counts else r["verdict"]
        counts[key] = counts.get(key, 0) + 1
    return counts


def count_line(results: list[dict[str, Any]]) -> str:
    """``2 reproduced, 1 not reproduced, 1 inconclusive`` (zero counts left out; never empty)."""
    counts = count_verdicts(results)
    return ", ".join(f"{n} {v}" for v, n in counts.items() if n) or "no claims"


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


def stand_in_labels(stand_ins: list[StandIn], preset: str | None) -> list[str]:
    """``["8x8 digits (scikit-learn) for MNIST"]``: the study's stand-ins under ``preset``."""
    return [s.label() for s in stand_ins if s.applies(preset)]
