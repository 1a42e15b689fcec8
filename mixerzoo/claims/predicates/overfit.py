"""The ``overfit`` predicate: models start to overfit along an axis (ICLL Sec. 4.5: "other models
start to overfit to the training set with increasing depth").

A cell carries its test number (the claim's metric) and the same metric measured on training
examples (``train``; default ``train_<metric>``, the ``train_`` metrics a run records at its last
evaluation, ``training/train.py``). Its *gap* is train - test (test - train for a lower-is-better
metric). Within each group of cells that agree on every axis but ``axis``, every pair of a cell
``a`` and a cell ``b`` further along the axis is read as

- an **overfitting step** when ``b``'s gap exceeds ``a``'s beyond noise and ``b``'s test number is
  not better than ``a``'s beyond noise: the model fits its training set further without
  generalising better (a gap that grows while the test number rises beyond noise is learning, not
  overfitting; a test number that falls while the training number holds is a growing gap);
- **no overfitting** when ``b``'s gap is below ``a``'s beyond noise, or ``b``'s test number is better
  beyond noise;
- a **tie** otherwise, and wherever ``b``'s training number is at or below ``floor`` within noise:
  ``b`` did not fit its training set, so there is nothing it could overfit.

A group holds when one of its pairs is an overfitting step ("start to" is an onset, somewhere along
the axis), fails when every pair shows no overfitting, and is a tie otherwise; the claim's
``quantifier`` (``all`` or ``any``) applies over the groups. Noise (``noise.py``): the error of a
change of gap adds the four numbers' errors in quadrature, that of a test step its two numbers';
a difference decides beyond 2 SE. The training numbers take the test count's binomial error: a run
measures them on as many training examples as test examples.

A group with a cell that has no training number is never judged (runs recorded before runs scored
their training split): with no group judged, the claim is ``not run`` and says to re-run them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from pydantic import Field

from mixerzoo.claims.base import HIGHER, NOT_RUN, Judged, metric_direction
from mixerzoo.claims.cells import (
    _complete,
    _pending_tail,
    _value,
    cell_axes,
    describe_cell,
    group_key,
    select,
)
from mixerzoo.claims.noise import (
    FAILS,
    HOLDS,
    TIE,
    at_floor,
    decide,
    describe_noise,
    difference_error,
    in_sigmas,
    standard_error,
)
from mixerzoo.claims.predicates.base import Predicate, Reading, verdict_of
from mixerzoo.claims.predicates.trend import _sort_key
from mixerzoo.registry import ConfigError

#: the prefix of a run's metrics measured on its training examples (``training/train.py``)
TRAIN_PREFIX = "train_"


class Overfit(Predicate):
    """Some step along ``axis`` widens the gap between the training and the test number beyond
    noise without a better test number, in each group of cells that agree on every other axis."""

    axis: str = Field(min_length=1, description="the axis along which the models overfit (model.n_layers)")
    train: str | None = Field(None, description="the training-split metric (default: train_<the claim's>)")
    floor: float | None = Field(
        None,
        description="a training number at or below it (within noise; at or above it for a "
        "lower-is-better metric) did not fit the training set: a pair ending there is a tie",
    )

    def named_axes(self) -> set[str]:
        return {self.axis}

    def extra_metrics(self, metric: str) -> list[str]:
        return [self.train or TRAIN_PREFIX + metric]

    def in_scope(self, cell: dict[str, Any]) -> bool:
        return self.axis in cell

    def evaluate(self, reading: Reading) -> Judged:
        if isinstance(reading.metric, list) or reading.holder.quantifier == "mean":
            raise ConfigError(
                "overfit: one metric and quantifier all or any (an onset along the axis has no mean)"
            )
        return _evaluate_overfit(self, reading)


@dataclass(frozen=True)
class _Keys:
    """What one claim reads: its test and training metrics, the direction, the training floor."""

    test: str
    train: str
    sign: float  # +1 when higher is better, -1 when lower is
    direction: str
    floor: float | None
    axis: str

    @classmethod
    def of(cls, pred: Overfit, reading: Reading) -> _Keys:
        metric = str(reading.metric)
        direction = metric_direction(metric, reading.directions)
        train = pred.train or TRAIN_PREFIX + reading.key
        sign = 1.0 if direction == HIGHER else -1.0
        return cls(reading.key, train, sign, direction, pred.floor, pred.axis)


def _evaluate_overfit(pred: Overfit, reading: Reading) -> Judged:
    claim, axes, keys = reading.holder, reading.axes, _Keys.of(pred, reading)
    chosen = [c for c in select(reading.cells, claim.selectors()) if pred.axis in c]
    if not chosen:
        return NOT_RUN, f": no cell of this run set matches the claim's selection with axis {pred.axis}", {}
    judged, pending, untracked = _groups(chosen, keys, axes)
    tail = _pending_tail(pending, keys.test, "groups")
    if untracked:
        tail += (
            f"; not judged, without {keys.train}: {', '.join(untracked)} (the runs record no "
            "training-set numbers: they were made before runs scored their training split; re-run them)"
        )
    if not judged:
        return NOT_RUN, f": no complete group of two or more cells along {pred.axis}{tail}", {}
    read = [c for _, group in judged for c in group]
    info: dict[str, Any] = {"cells": read, "sigmas": []}
    results = [_group(group, keys, info["sigmas"]) for _, group in judged]
    outcomes = [outcome for outcome, _ in results]
    listed = "; ".join(f"{label}: {text}" for (label, _), (_, text) in zip(judged, results))
    short = pred.axis.split(".")[-1]
    rule = (
        f", overfitting along {short}: the gap {keys.train} - {keys.test} (train/test) wider at a "
        f"larger {short} than at a smaller one beyond noise, its test number not better beyond noise"
    )
    summary = f"{outcomes.count(HOLDS)} of {len(judged)} groups overfit ({claim.quantifier} required)"
    verdict = verdict_of(outcomes, claim.quantifier)
    return verdict, f"{rule}; {describe_noise(read, keys.test)}: {summary}: {listed}{tail}", info


def _groups(
    chosen: list[dict[str, Any]], keys: _Keys, axes: list[str] | None
) -> tuple[list[tuple[str, list[dict[str, Any]]]], list[tuple[str, list[dict[str, Any]]]], list[str]]:
    """(judged groups sorted along the axis, pending groups, labels of groups without training numbers)."""
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for c in chosen:
        groups.setdefault(group_key(c, axes, [keys.axis]), []).append(c)
    judged, pending, untracked = [], [], []
    for group in groups.values():
        label = describe_cell(group[0], cell_axes(group[0], axes), skip=[keys.axis])
        if len(group) < 2 or not all(_complete(c, keys.test) for c in group):
            pending.append((label, group))
        elif any(_value(c, keys.train) is None for c in group):
            untracked.append(label)
        else:
            judged.append((label, sorted(group, key=lambda c: _sort_key(c[keys.axis]))))
    return judged, pending, untracked


@dataclass
class _Pair:
    """A cell ``a`` and a cell ``b`` further along the axis: the outcome, their gaps, its SE margin."""

    a: dict[str, Any]
    b: dict[str, Any]
    outcome: str
    gap_a: float
    gap_b: float
    sigma: float | None
    fit: bool  # b fit its training set (above the floor)


def _gap(cell: dict[str, Any], keys: _Keys) -> float:
    return keys.sign * (_value(cell, keys.train) - _value(cell, keys.test))


def _pair(a: dict[str, Any], b: dict[str, Any], keys: _Keys) -> _Pair:
    """Is the step from ``a`` to ``b`` an overfitting step (module docstring)?"""
    gap_a, gap_b = _gap(a, keys), _gap(b, keys)
    train_b = _value(b, keys.train)
    se_b = standard_error(b, keys.train)
    fit = keys.floor is None or not at_floor(train_b, keys.floor, keys.direction, se_b)
    errors = [standard_error(c, k) for c in (a, b) for k in (keys.train, keys.test)]
    gap_se = None if None in errors else math.sqrt(sum(e * e for e in errors))
    sigma = in_sigmas(gap_b - gap_a, gap_se)
    if not fit:
        return _Pair(a, b, TIE, gap_a, gap_b, sigma, fit)
    widens = decide(">", gap_b - gap_a, gap_se)
    rise = keys.sign * (_value(b, keys.test) - _value(a, keys.test))
    better = decide(">", rise, difference_error(b, a, keys.test))
    if widens == HOLDS and better != HOLDS:
        outcome = HOLDS
    elif widens == FAILS or better == HOLDS:
        outcome = FAILS
    else:
        outcome = TIE
    return _Pair(a, b, outcome, gap_a, gap_b, sigma, fit)


def _group(group: list[dict[str, Any]], keys: _Keys, sigmas: list[float]) -> tuple[str, str]:
    """The group's outcome and its text: train/test along the axis and the pair that decides."""
    pairs = [_pair(a, b, keys) for i, a in enumerate(group) for b in group[i + 1 :]]
    outcomes = [p.outcome for p in pairs]
    outcome = HOLDS if HOLDS in outcomes else (FAILS if all(o == FAILS for o in outcomes) else TIE)
    numbers = ", ".join(
        f"{c[keys.axis]}: {_value(c, keys.train):.4f}/{_value(c, keys.test):.4f}" for c in group
    )
    candidates = [p for p in pairs if p.outcome == outcome] or pairs
    shown = max(candidates, key=lambda p: p.sigma if p.sigma is not None else p.gap_b - p.gap_a)
    if shown.sigma is not None:
        sigmas.append(shown.sigma)
    step = f"{shown.a[keys.axis]} -> {shown.b[keys.axis]} gap {shown.gap_a:+.4f} -> {shown.gap_b:+.4f}" + (
        f" ({shown.sigma:+.1f} SE)" if shown.sigma is not None else ""
    )
    word = {
        HOLDS: f"overfits, {step}",
        FAILS: f"no step overfits (every gap narrower or test number better beyond noise; widest: {step})",
        TIE: f"no step overfits beyond noise (widest: {step})",
    }[outcome]
    unfit = sum(not p.fit for p in pairs)
    note = f"; {unfit} pairs end at a cell that did not fit its training set (a tie)" if unfit else ""
    return outcome, f"train/test {numbers}; {word}{note}"
