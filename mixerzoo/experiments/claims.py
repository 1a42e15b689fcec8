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

Verdicts: ``reproduced`` / ``not reproduced`` / ``not run``. Only *complete* cells (every
planned run finished) decide a verdict, so a cell whose seeds are still running never fails a
claim early; cells not run or incomplete are named in the evidence. A claim whose selection
has no complete cell (or no cell at all, e.g. a quick preset that does not cover it) is
``not run``. A claim quotes the paper and is never weakened to fit our numbers.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from mixerzoo.params import StrictModel
from mixerzoo.registry import ConfigError

REPRODUCED = "reproduced"
NOT_REPRODUCED = "not reproduced"
NOT_RUN = "not run"
VERDICTS = (REPRODUCED, NOT_REPRODUCED, NOT_RUN)

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
    op: Op
    value: float


class Compare(StrictModel):
    left: Selector = Field(description="axis -> value(s): the cells on the left of op")
    right: Selector = Field(description="axis -> value(s): the cells on the right of op")
    op: Op
    margin: float = Field(
        0.0, description="see COMPARE_RULES; negative for >, >=, <, <= is a tolerance (ties at 100%)"
    )

    @model_validator(mode="after")
    def _sides_differ(self) -> Compare:
        if not self.left or not self.right:
            raise ValueError("compare: left and right each select cells by at least one axis")
        if self.op == "==" and self.margin < 0:
            raise ValueError(f"compare.margin = {self.margin}: with op '==' the margin is a distance, >= 0")
        return self


class Claim(StrictModel):
    """One statement of a paper as a predicate over aggregated cells."""

    claim: str = Field(min_length=1, description="the paper's words, quoted")
    paper_ref: str = Field(min_length=1, description="section / figure / table, e.g. 'CAT-ws Sec. 4, Fig. 3'")
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

    @field_validator("where")
    @classmethod
    def _where_not_empty_list(cls, where: Selector | list[Selector]) -> Selector | list[Selector]:
        if isinstance(where, list) and not where:
            raise ValueError("an empty list selects nothing; use {} for every cell")
        return where

    @model_validator(mode="after")
    def _one_predicate(self) -> Claim:
        if (self.test is None) == (self.compare is None):
            raise ValueError(f"claim {self.claim[:40]!r}: give exactly one of `test` or `compare`")
        return self

    def selectors(self) -> list[Selector]:
        return self.where if isinstance(self.where, list) else [self.where]

    def axes_named(self) -> set[str]:
        names = {k for s in self.selectors() for k in s}
        if self.compare is not None:
            names |= set(self.compare.left) | set(self.compare.right)
        return names


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
    claims: list[Claim], cells: list[dict[str, Any]], default_metric: str, axes: list[str] | None = None
) -> list[dict[str, Any]]:
    """Each claim's verdict and evidence over the aggregated ``cells``.

    ``cells``: one dict per planned cell, axis names and metric names -> values (a metric absent
    or None: not run), optionally ``runs_finished`` / ``runs_planned``. ``axes``: the axis keys
    (default: ``variant``, ``seed`` and every dotted key). Returns
    ``[{"claim", "paper_ref", "verdict", "evidence"}]`` in the claims' order.
    """
    out = []
    for claim in claims:
        metric = claim.metric or default_metric
        if isinstance(metric, list):
            claim_cells, claim_axes, shown = _per_metric(cells, metric, axes)
            key = METRIC_VALUE
        else:
            claim_cells, claim_axes, shown, key = cells, axes, metric, metric
        if claim.compare is None:
            verdict, evidence = _evaluate_test(claim, claim_cells, key, claim_axes)
        else:
            verdict, evidence = _evaluate_compare(claim, claim_cells, key, claim_axes)
        evidence = f"{shown}{evidence}"
        out.append(
            {"claim": claim.claim, "paper_ref": claim.paper_ref, "verdict": verdict, "evidence": evidence}
        )
    return out


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
    claim: Claim, cells: list[dict[str, Any]], metric: str, axes: list[str] | None
) -> tuple[str, str]:
    assert claim.test is not None
    chosen = select(cells, claim.selectors())
    if not chosen:
        return NOT_RUN, ": no cell of this run set matches the claim's selection"
    op, value = claim.test.op, claim.test.value
    done = [c for c in chosen if _complete(c, metric)]
    pending = [c for c in chosen if not _complete(c, metric)]
    tail = _pending_tail([(describe_cell(c, cell_axes(c, axes)), [c]) for c in pending], metric)
    if not done:
        return NOT_RUN, f": 0 of {len(chosen)} selected cells complete{tail}"
    numbers = [(describe_cell(c, cell_axes(c, axes)), _value(c, metric)) for c in done]
    listed = ", ".join(f"{label} {v:.4f}" for label, v in numbers)
    values = [v for _, v in numbers]
    coverage = f"{len(done)} of {len(chosen)} cells" if pending else f"{len(done)} cells"
    if claim.quantifier == "mean":
        mean = statistics.fmean(values)
        ok = OPS[op](mean, value)
        summary = f"mean {mean:.4f} {op if ok else 'not ' + op} {value:g} over {coverage}"
    else:
        hits = sum(OPS[op](v, value) for v in values)
        ok = hits == len(values) if claim.quantifier == "all" else hits > 0
        summary = f"{hits} of {coverage} {op} {value:g} ({claim.quantifier} required)"
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


def _evaluate_compare(
    claim: Claim, cells: list[dict[str, Any]], metric: str, axes: list[str] | None
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
    named = set(cmp.left) | set(cmp.right)

    def key(c: dict[str, Any]) -> tuple:
        return tuple((a, repr(c[a])) for a in cell_axes(c, axes) if a not in named)

    right_by_key: dict[tuple, list[dict[str, Any]]] = {}
    for c in rights:
        right_by_key.setdefault(key(c), []).append(c)

    def side(c: dict[str, Any]) -> str:  # the named axes of one side, e.g. "cat-1L"
        return describe_cell(c, [a for a in cell_axes(c, axes) if a in named])

    pairs, pending, unpaired = [], [], []  # pairs: (where, left label, left value, right label, right value)
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
            pairs.append((label, side(lc), _value(lc, metric), side(rc), _value(rc, metric)))
    tail = _pending_tail(pending, metric, "pairs") + "".join(f"; {u}" for u in unpaired)
    if not pairs:
        return NOT_RUN, f": no complete (left, right) pair{tail}"
    rule = _rule(cmp.op, cmp.margin)
    listed = ", ".join(f"{where}: {ln} {lv:.4f} vs {rn} {rv:.4f}" for where, ln, lv, rn, rv in pairs)
    if claim.quantifier == "mean":
        lm = statistics.fmean(p[2] for p in pairs)
        rm = statistics.fmean(p[4] for p in pairs)
        ok = _holds(cmp.op, lm, rm, cmp.margin)
        summary = f"mean left {lm:.4f} vs right {rm:.4f} over {len(pairs)} pairs"
    else:
        hits = sum(_holds(cmp.op, p[2], p[4], cmp.margin) for p in pairs)
        ok = hits == len(pairs) if claim.quantifier == "all" else hits > 0
        summary = f"{hits} of {len(pairs)} pairs hold ({claim.quantifier} required)"
    return (REPRODUCED if ok else NOT_REPRODUCED), f", {rule}: {summary}: {listed}{tail}"


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
        selectors = [*claim.selectors()]
        if claim.compare is not None:
            selectors += [claim.compare.left, claim.compare.right]
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
