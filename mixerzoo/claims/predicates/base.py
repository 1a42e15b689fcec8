"""What every predicate shares: the :class:`Predicate` base a new predicate subclasses, the
:class:`Reading` it judges, the rule that makes two sides at chance a tie, and how outcomes make
a verdict."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

from mixerzoo.claims.base import (
    INCONCLUSIVE,
    METRIC,
    NOT_REPRODUCED,
    REPRODUCED,
    Judged,
    Selector,
    default_floor,
    metric_direction,
)
from mixerzoo.claims.cells import _value, matches
from mixerzoo.claims.noise import FAILS, HOLDS, TIE, at_floor, chance_of, standard_error
from mixerzoo.params import StrictModel

TIE_WORDS = "tie (at chance or within noise: not a win)"


class Holder(Protocol):
    """What holds a predicate: a claim or a premise (its selection and quantifier)."""

    quantifier: str

    def selectors(self) -> list[Selector]: ...


@dataclass
class Reading:
    """One predicate's input: who holds it, the cells, and how to read them.

    ``key``: the cells' key holding the value (the metric, or ``METRIC_VALUE`` for a claim over
    several metrics); ``metric``: the metric's name (or names) for its direction and floor;
    ``axes``: the axis keys (None: every dotted key); ``directions``: the study's ``metrics:``."""

    holder: Holder
    cells: list[dict[str, Any]]
    key: str
    metric: str | list[str]
    axes: list[str] | None = None
    directions: dict[str, str] | None = None


class Predicate(StrictModel):
    """A claim's predicate over aggregated cells: one subclass in one file, registered under its
    key in ``claims/predicates/__init__.py`` (the key a study file writes, e.g. ``compare:``)."""

    #: how a verdict's strength speaks of its margin (``test``: against a bound; else two sides)
    kind: ClassVar[str] = "comparison"

    def evaluate(self, reading: Reading) -> Judged:  # pragma: no cover - every predicate has one
        raise NotImplementedError

    def sides(self) -> list[Selector]:
        """The selectors of the cells it reads beside the holder's selection (none: all of them)."""
        return []

    def extra_metrics(self, metric: str) -> list[str]:
        """The cells' keys it reads beside ``metric`` (the claim's), e.g. a training-split number."""
        return []

    def named_axes(self) -> set[str]:
        """Every axis the predicate names (checked against the study's axes)."""
        return {k for side in self.sides() for k in side}

    def in_scope(self, cell: dict[str, Any]) -> bool:
        """Whether the predicate reads a cell of the holder's selection."""
        sides = self.sides()
        return not sides or any(matches(cell, s) for s in sides)

    def has_cells(self, chosen: list[dict[str, Any]]) -> bool:
        """The table has a cell for each side the predicate reads, run or not."""
        return bool(chosen) and all(any(matches(c, s) for c in chosen) for s in self.sides())


def verdict_of(outcomes: list[str], quantifier: str) -> str:
    """All: one failure fails, else one tie is inconclusive. Any: one hold holds, else a tie."""
    if quantifier == "any":
        return REPRODUCED if HOLDS in outcomes else (INCONCLUSIVE if TIE in outcomes else NOT_REPRODUCED)
    if FAILS in outcomes:
        return NOT_REPRODUCED
    return INCONCLUSIVE if TIE in outcomes or not outcomes else REPRODUCED


def sigma_text(sig: float | None, outcome: str) -> str:
    if sig is None:
        return ""
    return f" ({sig:+.1f} SE{', within noise' if outcome == TIE else ''})"


def rule_text(op: str, margin: float) -> str:
    """The claim's rule with the margin filled in: ``left >= right - 0.01``."""
    if op == "==":
        return f"|left - right| <= {margin:g}"
    shift = margin if op in (">", ">=") else -margin
    return f"left {op} right {'+' if shift >= 0 else '-'} {abs(shift):g}"


#: ``tie(a, b, key)``: both cells at the metric's floor (chance level), within noise
FloorRule = Callable[[dict[str, Any], dict[str, Any], str], bool]


def floor_rule(
    op: str, floor: float | None, metric: str | list[str], directions: dict[str, str] | None
) -> FloorRule | None:
    """Both sides at the floor: a cell's ``chance:METRIC``, else ``floor``, else the metric's known
    worst value (accuracy: 0). None for ``==`` (a tie at chance is equality, not a failure)."""
    if op == "==":
        return None

    def at(cell: dict[str, Any], key: str) -> bool:
        name = str(cell.get(METRIC, key)) if isinstance(metric, list) else metric
        level = chance_of(cell, key)
        level = level if level is not None else (floor if floor is not None else default_floor(name))
        v = _value(cell, key)
        if level is None or v is None:
            return False  # no floor known: the direction is never asked for
        return at_floor(v, level, metric_direction(name, directions), standard_error(cell, key))

    return lambda a, b, key: at(a, key) and at(b, key)
