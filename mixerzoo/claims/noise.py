"""The noise of a cell's number, and the rule that makes a difference inside it a tie.

A cell may carry the size of its evidence beside its metrics (reserved keys):

- ``n_test``: the independent test examples behind the cell's numbers (sequences, programs,
  languages; never the positions inside one sequence, which share its context);
- ``seeds``: how many seeds the cell's number aggregates;
- ``sd:METRIC``: the standard deviation of METRIC over those seeds;
- ``se:METRIC``: a standard error computed by whoever made the cell (e.g. a loss's, from its
  evaluation tokens), used as given;
- ``chance:METRIC``: the metric's chance level on the cell's task (the floor of ties).

**The rule**, stated once: the standard error of one side is ``se:METRIC`` when given; else the
larger of the spread over seeds (``sd / sqrt(seeds)``, two seeds or more) and, for an accuracy,
the binomial error from the test count, ``sqrt(p'(1 - p') / (n_test * seeds))`` with
``p' = (p n + 1) / (n + 2)`` (never zero at 0 % or 100 %). Two sides' errors add in quadrature.
A difference decides only when it exceeds :data:`Z` standard errors: a strict claim (``>``,
``<``) holds when its excess over the claim's margin is above ``Z`` SE, fails when it is below
``-Z`` SE, and is a tie (``inconclusive``) in between; a non-strict claim (``>=``, ``<=``,
``==``) is one that a tie satisfies: it fails only when the data are ``Z`` SE against it. A
``test`` reads each cell's distance from its bound by the same rule.
Cells without a test count, seeds or an error are judged without the margin, and the evidence
says so.
"""

from __future__ import annotations

import math
from typing import Any

from mixerzoo.claims.base import HIGHER, METRIC, TIE_TOL

N_TEST = "n_test"
SEEDS = "seeds"
SD = "sd:"
SE = "se:"
CHANCE = "chance:"
#: a difference must exceed this many standard errors to decide
Z = 2.0
#: per-metric evidence keys (prefix + metric name)
PREFIXES = (SD, SE, CHANCE)
#: every key of a cell that is evidence, not an axis or a metric
EVIDENCE_KEYS = (N_TEST, SEEDS)

HOLDS, FAILS, TIE = "holds", "fails", "tie"


def is_evidence_key(key: str) -> bool:
    return key in EVIDENCE_KEYS or key.startswith(PREFIXES)


def _number(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or math.isnan(v):
        return None
    return float(v)


def metric_name(cell: dict[str, Any], key: str) -> str:
    """The metric a cell's value under ``key`` measures (a claim over several metrics keeps it
    under the ``metric`` axis)."""
    return str(cell.get(METRIC, key))


def standard_error(cell: dict[str, Any], key: str) -> float | None:
    """The standard error of ``cell[key]`` by the rule above; None when the cell carries no size."""
    value = _number(cell.get(key))
    if value is None:
        return None
    given = _number(cell.get(SE + key))
    if given is not None:
        return given
    seeds = _number(cell.get(SEEDS)) or 1.0
    options = []
    sd = _number(cell.get(SD + key))
    if sd is not None and seeds >= 2:
        options.append(sd / math.sqrt(seeds))
    n = _number(cell.get(N_TEST))
    if n and n > 0 and "accuracy" in metric_name(cell, key).lower() and 0.0 <= value <= 1.0:
        p = (value * n + 1) / (n + 2)
        options.append(math.sqrt(p * (1 - p) / (n * seeds)))
    return max(options) if options else None


def difference_error(a: dict[str, Any], b: dict[str, Any], key: str) -> float | None:
    """The standard error of ``a[key] - b[key]``; None unless both sides carry one."""
    sa, sb = standard_error(a, key), standard_error(b, key)
    return None if sa is None or sb is None else math.hypot(sa, sb)


def decide(op: str, excess: float, se: float | None, tol: float = TIE_TOL) -> str:
    """``holds``, ``fails`` or ``tie`` for a claim whose data exceed its bound by ``excess``
    (positive: the claimed direction; for ``==`` the margin less the distance).

    Without an error (``se`` None) the bare sign decides, as it did before noise was known."""
    if se is None or se <= 0:
        if op in (">", "<"):
            return HOLDS if excess > 0 else FAILS
        return HOLDS if excess >= -tol else FAILS
    z = Z * se
    if op in (">", "<"):
        return HOLDS if excess > z else (FAILS if excess < -z else TIE)
    return FAILS if excess < -z else HOLDS


def excess_of(op: str, left: float, right: float, margin: float) -> float:
    """How far ``left op right (+/- margin)`` is from its bound, positive in the claimed direction."""
    if op in (">", ">="):
        return left - right - margin
    if op in ("<", "<="):
        return (right - margin) - left
    return margin - abs(left - right)


def in_sigmas(excess: float, se: float | None) -> float | None:
    """The excess in standard errors (None without an error)."""
    return None if se is None or se <= 0 else excess / se


def judge_excess(op: str, excess: float, se: float | None, sigmas: list[float]) -> tuple[str, float | None]:
    """:func:`decide`, and the excess in standard errors, also appended to ``sigmas`` (the
    verdict's margins, which its evidence strength reads)."""
    sig = in_sigmas(excess, se)
    if sig is not None:
        sigmas.append(sig)
    return decide(op, excess, se), sig


def mean_error(errors: list[float | None]) -> float | None:
    """The standard error of the mean of independent numbers with these errors (None unless each
    has one)."""
    if not errors or None in errors:
        return None
    return math.sqrt(sum(e * e for e in errors)) / len(errors)


def chance_of(cell: dict[str, Any], key: str) -> float | None:
    """The cell's chance level for the metric under ``key`` (``chance:METRIC``)."""
    return _number(cell.get(CHANCE + key))


def at_floor(value: float, floor: float, direction: str, se: float | None) -> bool:
    """Within noise of the floor (at or below it for a higher-is-better metric)."""
    slack = Z * se if se else TIE_TOL
    return value <= floor + slack if direction == HIGHER else value >= floor - slack


def describe_noise(cells: list[dict[str, Any]], key: str) -> str:
    """``2 SE (binomial from 500 test examples, 1 seed)``, or that there was no margin."""
    sizes = {(_number(c.get(N_TEST)), _number(c.get(SEEDS))) for c in cells}
    has = [standard_error(c, key) is not None for c in cells]
    if not any(has):
        return "no noise margin (the cells carry no test count, seeds or error)"
    parts = []
    tests = sorted({int(n) for n, _ in sizes if n})
    seeds = sorted({int(s) for _, s in sizes if s})
    if tests:
        parts.append(f"{'/'.join(f'{n:,}' for n in tests)} test examples")
    if seeds:
        parts.append(f"{'/'.join(map(str, seeds))} seed{'s' if seeds != [1] else ''}")
    partial = "" if all(has) else f"; {has.count(False)} of {len(cells)} cells without an error"
    return f"a difference decides beyond {Z:g} SE ({', '.join(parts) or 'errors given'}){partial}"
