"""The ``test`` predicate: each selected cell's number against a bound (``>= 0.9``, ``> chance``,
``>= 0.85 - 0.05`` for a quantity the paper states).

Noise (``noise.py``): a cell's distance from the bound is judged with the same rule as a
comparison's difference: a strict bound (``>``, ``<``) needs the number beyond it by more than
two standard errors and is a tie (``inconclusive``) inside them; a non-strict bound (``>=``,
``<=``, ``==``) fails only when the number is two standard errors on the wrong side. A cell
without a test count, seeds or an error is judged on the bare number, and the evidence says so."""

from __future__ import annotations

import statistics
from typing import Any, Literal

from pydantic import Field, model_validator

from mixerzoo.claims.base import NOT_RUN, OPS, Judged, Op
from mixerzoo.claims.cells import _complete, _pending_tail, _value, cell_axes, describe_cell, select
from mixerzoo.claims.noise import (
    CHANCE,
    HOLDS,
    TIE,
    chance_of,
    describe_noise,
    excess_of,
    judge_excess,
    mean_error,
    standard_error,
)
from mixerzoo.claims.predicates.base import Predicate, Reading, sigma_text, verdict_of

CHANCE_LEVEL = "chance"


class Threshold(Predicate):
    """``x op value``, or ``x op quoted -/+ tolerance`` for a quantity the paper states;
    ``value: chance`` reads each cell's chance level of the metric (``chance:METRIC``)."""

    kind = "test"

    op: Op
    value: float | None = None
    relative_to: Literal["chance"] | None = Field(
        None, description="the bound is each cell's chance level (written `value: chance`)"
    )

    @model_validator(mode="before")
    @classmethod
    def _value_chance(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("value") == CHANCE_LEVEL:
            return {**{k: v for k, v in data.items() if k != "value"}, "relative_to": CHANCE_LEVEL}
        return data

    quoted: float | None = Field(None, description="a number the paper states; tested with `tolerance`")
    tolerance: float | None = Field(None, ge=0, description="how far below (>, >=) or above (<, <=) it")

    @model_validator(mode="after")
    def _value_or_quoted(self) -> Threshold:
        if (self.value is None and self.relative_to is None) == (self.quoted is None):
            raise ValueError("test: give exactly one of `value` (a number or `chance`) or `quoted`")
        return self

    @property
    def at_chance(self) -> bool:
        """The bound is each cell's chance level (``value: chance``)."""
        return self.relative_to == CHANCE_LEVEL

    def bound_at(self, chance: float | None = None) -> float:
        """The bound, with ``chance`` standing for ``value: chance``."""
        base = self.quoted if self.quoted is not None else (chance if self.at_chance else self.value)
        assert base is not None and not isinstance(base, str)
        tol = self.tolerance or 0.0
        if self.op in (">", ">="):
            return base - tol
        return base + tol if self.op in ("<", "<=") else base

    @property
    def bound(self) -> float:
        return self.bound_at()

    def holds(self, x: float, chance: float | None = None) -> bool:
        """The bare rule, without noise."""
        if self.op == "==" and self.tolerance:
            return abs(x - self.bound_at(chance)) <= self.tolerance
        return OPS[self.op](x, self.bound_at(chance))

    def excess(self, x: float, chance: float | None = None) -> float:
        """How far ``x`` is on the claimed side of the bound (for ``==``: the tolerance less the distance)."""
        margin = (self.tolerance or 0.0) if self.op == "==" else 0.0  # the other ops hold it in the bound
        return excess_of(self.op, x, self.bound_at(chance), margin)

    def describe(self) -> str:
        """``>= 0.9``, ``> chance``, or ``>= 0.8 (quoted 0.85, tolerance 0.05)``."""
        if self.at_chance:
            tol = f" - {self.tolerance:g}" if self.tolerance and self.op in (">", ">=") else ""
            tol = f" + {self.tolerance:g}" if self.tolerance and self.op in ("<", "<=") else tol
            return f"{self.op} chance{tol}"
        if self.quoted is None and not self.tolerance:
            return f"{self.op} {self.bound:g}"
        what = f"quoted {self.quoted:g}" if self.quoted is not None else f"value {self.value:g}"
        return f"{self.op} {self.bound:g} ({what}, tolerance {self.tolerance or 0:g})"

    def judge(self, x: float, se: float | None, chance: float | None, sigmas: list[float]):
        """(``holds`` / ``fails`` / ``tie``, the margin in standard errors) of one number."""
        return judge_excess(self.op, self.excess(x, chance), se, sigmas)

    def evaluate(self, reading: Reading) -> Judged:
        holder, key, axes = reading.holder, reading.key, reading.axes
        chosen = select(reading.cells, holder.selectors())
        if not chosen:
            return NOT_RUN, ": no cell of this run set matches the claim's selection", {}
        done = [
            c for c in chosen if _complete(c, key) and (not self.at_chance or chance_of(c, key) is not None)
        ]
        pending = [c for c in chosen if c not in done]
        tail = _pending_tail([(describe_cell(c, cell_axes(c, axes)), [c]) for c in pending], key)
        if self.at_chance and any(_complete(c, key) for c in pending):
            tail += f"; cells without a chance level ({CHANCE}{key}) are not judged"
        if not done:
            return NOT_RUN, f": 0 of {len(chosen)} selected cells complete{tail}", {}
        coverage = f"{len(done)} of {len(chosen)} cells" if pending else f"{len(done)} cells"
        info: dict[str, Any] = {"cells": done, "sigmas": []}
        if holder.quantifier == "mean":
            outcome, summary, listed = self._mean(done, key, axes, coverage, info)
            verdict = verdict_of([outcome], "all")
        else:
            outcomes, texts = [], []
            for c in done:
                v, ch = _value(c, key), chance_of(c, key)
                outcome, sig = self.judge(v, standard_error(c, key), ch, info["sigmas"])
                outcomes.append(outcome)
                texts.append(self._one(c, v, ch, axes) + sigma_text(sig, outcome))
            listed = ", ".join(texts)
            ties = outcomes.count(TIE)
            summary = (
                f"{outcomes.count(HOLDS)} of {coverage} {self.describe()} ({holder.quantifier} required)"
            )
            summary += f"; {ties} within noise of the bound" if ties else ""
            verdict = verdict_of(outcomes, holder.quantifier)
        return verdict, f"; {describe_noise(done, key)}: {summary}: {listed}{tail}", info

    def _one(self, cell: dict[str, Any], v: float, chance: float | None, axes) -> str:
        label = describe_cell(cell, cell_axes(cell, axes))
        return f"{label} {v:.4f}" + (f" (chance {chance:.4f})" if self.at_chance else "")

    def _mean(self, done, key, axes, coverage, info) -> tuple[str, str, str]:
        """``mean``: the mean over the cells against the bound (the mean chance level for ``chance``)."""
        mean = statistics.fmean(_value(c, key) for c in done)
        chance = statistics.fmean(chance_of(c, key) for c in done) if self.at_chance else None
        se = mean_error([standard_error(c, key) for c in done])
        outcome, sig = self.judge(mean, se, chance, info["sigmas"])
        word = {HOLDS: "", TIE: "within noise of "}.get(outcome, "not ")
        summary = f"mean {mean:.4f} {word}{self.describe()}{sigma_text(sig, outcome)} over {coverage}"
        return (
            outcome,
            summary,
            ", ".join(self._one(c, _value(c, key), chance_of(c, key), axes) for c in done),
        )
