"""The ``versus_baselines`` predicate: the share of some models that score worse than the best of a
few in-context baselines on their own test instances ("most non-Transformer models underperform
simple n-gram and Baum-Welch baselines", ICLL Sec. 4.5).

The baselines need no training: each cell of a RegBench sweep carries their scores on the very
test split its runs were scored on (``baselines/cell_scores.py``, added by the sweep's cells as
:func:`baseline_keys`), under ``baseline:LABEL:METRIC``, with ``se:baseline:LABEL:METRIC`` (the
score's error over the test instances) and ``chance:baseline:LABEL:METRIC`` (the cell's chance
level of the metric, the in-context unigram's score), so a premise can test a baseline like any
metric (``metric: baseline:3-gram:regbench_tvd``, ``test: {op: "<", value: chance}``).

In each group of cells that agree on every axis the models' selector does not name (e.g. one
N_train), each model is *worse* than the best baseline of its cell when the difference exceeds
the noise (``noise.py``: 2 SE, the model's and the baseline's errors in quadrature), *not worse*
when it exceeds it the other way, and a *tie* within the noise or when both sit at the chance
level. The share of models worse then lies between ``worse / k`` and ``(worse + ties + pending) /
k`` (k: the group's model cells, run or not): the group holds when ``worse`` holds at both ends,
fails when it fails at both, and is a tie in between. A claim over several groups needs each
(``all``) or one (``any``); ``mean`` pools the models of every group into one share.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator, model_validator

from mixerzoo.claims.base import HIGHER, NOT_RUN, Judged, Selector, metric_direction
from mixerzoo.claims.cells import (
    _complete,
    _pending_tail,
    _value,
    cell_axes,
    describe_cell,
    group_key,
    matches,
    select,
)
from mixerzoo.claims.noise import (
    CHANCE,
    FAILS,
    HOLDS,
    SE,
    TIE,
    describe_noise,
    difference_error,
    judge_excess,
)
from mixerzoo.claims.predicates.base import Predicate, Reading, floor_rule, sigma_text, verdict_of
from mixerzoo.claims.predicates.threshold import Threshold
from mixerzoo.registry import ConfigError

PREFIX = "baseline:"


def baseline_key(label: str, metric: str) -> str:
    """``baseline:3-gram:regbench_tvd``: the cell key of a baseline's score."""
    return f"{PREFIX}{label}:{metric}"


class VersusBaselines(Predicate):
    """The share of ``models`` worse than the best of ``baselines`` (on each cell's own test split),
    tested with ``worse`` (``{op: ">", value: 0.5}``: most of them)."""

    models: Selector = Field(description="axis -> value(s): the models counted, one per cell of a group")
    baselines: dict[str, dict[str, Any]] = Field(
        min_length=1, description="label -> {name: a baseline of `mixerzoo baselines list`, its parameters}"
    )
    worse: Threshold = Field(description="the share of the models worse than the best baseline, e.g. > 0.5")

    @field_validator("baselines")
    @classmethod
    def _baselines_build(cls, baselines: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        from mixerzoo.baselines import build_baseline

        for label, spec in baselines.items():
            params = dict(spec)
            name = params.pop("name", None)
            if not isinstance(name, str):
                raise ValueError(f"baselines.{label}: give the baseline's name (e.g. name: ngram)")
            try:
                build_baseline(name, **params)
            except ConfigError as err:
                raise ValueError(f"baselines.{label}: {err}") from None
        return baselines

    @model_validator(mode="after")
    def _a_share(self) -> VersusBaselines:
        if not self.models:
            raise ValueError("versus_baselines.models selects cells by at least one axis")
        if self.worse.op == "==" or self.worse.at_chance or not 0.0 <= self.worse.bound <= 1.0:
            raise ValueError("versus_baselines.worse: a share in [0, 1] with >, >=, < or <=")
        return self

    def sides(self) -> list[Selector]:
        return [self.models]

    def extra_metrics(self, metric: str) -> list[str]:
        """Each baseline's score and the cell's own chance level of the metric."""
        return [baseline_key(label, metric) for label in self.baselines]

    def evaluate(self, reading: Reading) -> Judged:
        if isinstance(reading.metric, list):
            raise ConfigError(
                "versus_baselines: a claim over one metric (the baselines are scored per metric)"
            )
        return _evaluate(self, reading)


def _evaluate(pred: VersusBaselines, reading: Reading) -> Judged:
    claim, key, axes = reading.holder, reading.key, reading.axes
    chosen = select(reading.cells, claim.selectors())
    if not chosen:
        return NOT_RUN, ": no cell of this run set matches the claim's selection", {}
    models = [c for c in chosen if matches(c, pred.models)]
    if not models:
        return NOT_RUN, ": no cell of this run set matches versus_baselines.models", {}
    pooled = claim.quantifier == "mean"
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for c in models:
        groups.setdefault(() if pooled else group_key(c, axes, set(pred.models)), []).append(c)
    info: dict[str, Any] = {"cells": [], "sigmas": []}
    outcomes, texts = [], []
    for cells in groups.values():
        done = [c for c in cells if _complete(c, key) and _best(pred, c, key)]
        if done:
            outcome, text = _group(pred, cells, done, reading, info, "every group pooled" if pooled else None)
            outcomes.append(outcome)
            texts.append(text)
    pending = [(describe_cell(c, cell_axes(c, axes)), [c]) for c in models if not _complete(c, key)]
    tail = _pending_tail(pending, key)
    lacking = [
        describe_cell(c, cell_axes(c, axes)) for c in models if _complete(c, key) and not _best(pred, c, key)
    ]
    if lacking:
        tail += f"; without every baseline's score ({PREFIX}LABEL:{key}), not judged: {', '.join(lacking)}"
    if not outcomes:
        return NOT_RUN, f": no complete cell with the baselines' scores{tail}", info
    rule = f"share of models worse than the best of {', '.join(pred.baselines)} {pred.worse.describe()}"
    summary = f"{outcomes.count(HOLDS)} of {len(outcomes)} groups hold ({claim.quantifier} required)"
    noise = describe_noise(info["cells"], key)
    verdict = verdict_of(outcomes, "all" if pooled else claim.quantifier)
    return verdict, f", {rule}; {noise}: {summary}: {'; '.join(texts)}{tail}", info


def _best(pred: VersusBaselines, cell: dict[str, Any], key: str, directions=None) -> tuple | None:
    """(label, value, a cell holding the best baseline's score, error and chance level), or None
    when the cell lacks a baseline's score."""
    found = []
    for label in pred.baselines:
        k = baseline_key(label, key)
        v = _value(cell, k)
        if v is None:
            return None
        own = {key: v, **{p + key: cell[p + k] for p in (SE, CHANCE) if p + k in cell}}
        found.append((label, v, own))
    higher = metric_direction(key, directions) == HIGHER
    return max(found, key=lambda f: f[1] if higher else -f[1])


def _group(pred, cells, done, reading: Reading, info, where: str | None) -> tuple[str, str]:
    """One group's outcome and its line: each model against its cell's best baseline (the group's
    cells not judged, pending or without scores, may fall on either side)."""
    key, axes = reading.key, reading.axes
    higher = metric_direction(key, reading.directions) == HIGHER
    op = "<" if higher else ">"  # the model worse than the baseline
    tie = floor_rule(op, None, key, reading.directions)
    named = set(pred.models)
    counts = {HOLDS: 0, FAILS: 0, TIE: 0}
    listed = []
    for c in done:
        _, v, own = _best(pred, c, key, reading.directions)
        m = _value(c, key)
        if tie is not None and tie(c, own, key):
            outcome, note = TIE, " (both at chance: a tie)"
        else:
            excess = (v - m) if higher else (m - v)
            outcome, sig = judge_excess(op, excess, difference_error(c, own, key), info["sigmas"])
            note = sigma_text(sig, outcome)
        counts[outcome] += 1
        word = {HOLDS: "worse", FAILS: "not worse", TIE: "tie"}[outcome]
        listed.append(
            f"{describe_cell(c, [a for a in cell_axes(c, axes) if a in named])} {m:.4f} {word}{note}"
        )
        info["cells"] += [c]
    k = len(cells)
    low, high = counts[HOLDS] / k, (k - counts[FAILS]) / k
    at_low, at_high = pred.worse.holds(low), pred.worse.holds(high)
    outcome = HOLDS if at_low and at_high else (FAILS if not (at_low or at_high) else TIE)
    where = where or describe_cell(done[0], [a for a in cell_axes(done[0], axes) if a not in named])
    scores = ", ".join(f"{label} {_value(done[0], baseline_key(label, key)):.4f}" for label in pred.baselines)
    share = f"{low:.2f}" if low == high else f"{low:.2f} to {high:.2f}"
    return outcome, (
        f"{where}: baselines {scores}; {counts[HOLDS]} of {k} models worse, share {share} "
        f"({'holds' if outcome == HOLDS else outcome}): {', '.join(listed)}"
    )


def baselines_named(claims: list[Any]) -> dict[str, dict[str, Any]]:
    """Every baseline (label -> spec) that a ``versus_baselines`` claim of ``claims`` compares with;
    a label given two different specs is a ConfigError."""
    out: dict[str, dict[str, Any]] = {}
    for claim in claims:
        pred = claim.predicate()
        if not isinstance(pred, VersusBaselines):
            continue
        for label, spec in pred.baselines.items():
            if out.setdefault(label, spec) != spec:
                raise ConfigError(
                    f"versus_baselines: baseline {label!r} is given as {out[label]} and as {spec}"
                )
    return out


def baseline_keys(baselines: dict[str, dict[str, Any]], data: dict[str, Any], cell: dict[str, Any]) -> dict:
    """The keys a cell carries for ``baselines`` on the test split of its ``data`` section: each
    score, its error, and the cell's own chance level of the metric (``chance:METRIC``)."""
    from mixerzoo.baselines.cell_scores import split_scores

    out: dict[str, float] = {}
    for label, scores in split_scores(data, baselines).items():
        for metric in scores:
            if metric.startswith(SE):
                continue
            k = baseline_key(label, metric)
            out[k], out[SE + k] = scores[metric], scores[SE + metric]
            if CHANCE + metric in cell:
                out[CHANCE + k] = cell[CHANCE + metric]
    return out
