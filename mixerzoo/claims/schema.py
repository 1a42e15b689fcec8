"""The claim file format: verdict names, the predicates (``test``, ``compare``, ``trend``), premises,
stand-in data, metric directions, and the check of a file's claims against its axes."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from mixerzoo.params import StrictModel
from mixerzoo.registry import ConfigError

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


CHANCE_LEVEL = "chance"


class Threshold(StrictModel):
    """``x op value``, or ``x op quoted -/+ tolerance`` for a quantity the paper states;
    ``value: chance`` reads each cell's chance level of the metric (``chance:METRIC``)."""

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
        if self.op == "==" and self.tolerance:
            return abs(x - self.bound_at(chance)) <= self.tolerance
        return OPS[self.op](x, self.bound_at(chance))

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


class Share(StrictModel):
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
    share: Share | None = None
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
        if sum(p is not None for p in (self.test, self.compare, self.trend, self.share)) != 1:
            raise ValueError(
                f"claim {self.claim[:40]!r}: give exactly one of `test`, `compare`, `trend` or `share`"
            )
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
        if self.share is not None:
            names |= {k for side in self.share.sides() for k in side}
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
        if claim.share is not None:
            selectors += claim.share.sides()
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


def stand_in_labels(stand_ins: list[StandIn], preset: str | None) -> list[str]:
    """``["8x8 digits (scikit-learn) for MNIST"]``: the study's stand-ins under ``preset``."""
    return [s.label() for s in stand_ins if s.applies(preset)]
