"""A study's results as cells: each planned run's record and every cell's numbers.

The data model that figures (``plots.py``), reports, the MAD protocol and the CLI read. A cell
is keyed by its axis values; its runs (the points that differ only on the ``aggregate.over``
axes) are found in the store by config hash, so a run shared by two experiments is found by both.

**Selection on a validation split, one run per cell.** Within the ``over`` axes other than
``seed``, the cell keeps the run with the best *validation* value of ``aggregate.metric``
(``valid_<metric>``, recorded by the trainer; direction: ``claims.metric_direction``) - the
setting a paper picks on held-out data (ICLL App. B; "the best learning rate", CAT-ws App. C.1).
With ``aggregate.reduce`` max or min the seeds are chosen among the same way, so one run gives
every number of the cell; with mean or median each seed keeps its own selected run and every
metric is reduced over those runs. Every metric of a cell is a *test* number of the selected
run(s): a cell's accuracy and TVD come from one run. Runs recorded before the trainer measured a
validation split have no ``valid_`` metrics: a group of runs any of which lacks one is selected on
test values, and the cell says so (``selected_on == "test"``).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Any, Literal

from mixerzoo.claims import HIGHER, LOWER, metric_direction
from mixerzoo.claims.noise import SD, SE
from mixerzoo.registry import ConfigError
from mixerzoo.store.provenance import Provenance, provenance
from mixerzoo.store.records import RunRecord
from mixerzoo.store.results import ResultsStore
from mixerzoo.studies.sweep.config import (
    SEED,
    TEST_LENGTH,
    ExperimentConfig,
    PlannedRun,
    cell_key,
    short_axis,
)

REDUCERS = {"max": max, "min": min, "mean": statistics.fmean, "median": statistics.median}
#: the reducers under which each seed keeps its own selected run (max and min select over seeds)
OVER_SEEDS = ("mean", "median")
#: the prefix of a run's metrics measured on its validation split (``training/train.py``)
VALID_PREFIX = "valid_"
VALIDATION, TEST = "validation", "test"


@dataclass
class CellResult:
    """A cell (the axis values it is keyed by), its runs, the run(s) selected on validation and
    their metrics.

    ``metrics``: the selected run's test metrics (one run per cell), or the seeds' selected runs'
    reduced over seeds (``aggregate.reduce`` mean or median). ``selected_on``: ``"validation"``
    when every selection read validation values, ``"test"`` when one read test values (runs
    without a validation split), None when no run finished. ``evidence``: ``n_test`` (the test
    examples of each selected run, when their configs agree), ``seeds`` (distinct seeds among the
    selected runs) and, with two seeds or more, ``sd:<metric>`` (sample standard deviation over
    the seeds) for every metric, as the claims' noise rule reads them (``claims/noise.py``); a
    run's own error of a metric (``se:<metric>``, RegBench's over its test instances) is evidence
    too, combined over the seeds (:func:`_combined_error`), never a metric.
    """

    cell: dict[str, Any]
    planned: list[PlannedRun] = field(default_factory=list)
    records: list[RunRecord | None] = field(default_factory=list)
    metrics: dict[str, float] = field(default_factory=dict)
    selected: list[RunRecord] = field(default_factory=list)
    selected_on: Literal["validation", "test"] | None = None
    #: the value of ``aggregate.metric`` the selection read (validation, else test), reduced as the metrics
    selection_value: float | None = None
    evidence: dict[str, Any] = field(default_factory=dict)

    @property
    def n_finished(self) -> int:
        return sum(r is not None and r.status == "finished" for r in self.records)


@dataclass
class ExperimentResults:
    experiment: ExperimentConfig
    cells: list[CellResult]
    #: the --set overrides behind these results and how many of their runs are stale
    provenance: Provenance = field(default_factory=Provenance)

    @property
    def n_runs(self) -> int:
        return sum(len(c.planned) for c in self.cells)

    @property
    def n_finished(self) -> int:
        return sum(c.n_finished for c in self.cells)

    def test_lengths(self) -> list[int]:
        lengths = {
            int(k.split("@", 1)[1]) for c in self.cells for k in c.metrics if k.startswith("accuracy@")
        }
        return sorted(lengths)


def collect_results(
    exp: ExperimentConfig, store: ResultsStore, sets: dict[str, Any] | None = None
) -> ExperimentResults:
    """Each planned run's record (finished by the current code preferred, then finished by other
    code, else the latest) and every cell's aggregate; ``sets``: the ``--set`` overrides ``exp``
    was loaded with (named in the results' provenance with those its runs recorded)."""
    by_hash: dict[str, RunRecord] = {}
    for rec in store.runs():  # ordered by creation: later rows win unless a better one is held
        held = by_hash.get(rec.config_hash)
        if held is None or held.status != "finished" or _rank(rec) > _rank(held):
            by_hash[rec.config_hash] = rec
    cells: dict[str, CellResult] = {}
    for p in exp.expand():
        c = cells.setdefault(p.cell_key, CellResult(cell=p.cell))
        c.planned.append(p)
        c.records.append(by_hash.get(p.config_hash))
    rule = Selection.of(exp)
    for c in cells.values():
        select_runs(c, rule)
    used = [r for c in cells.values() for r in c.records]
    return ExperimentResults(exp, list(cells.values()), provenance(used, sets))


@dataclass(frozen=True)
class Selection:
    """How a cell's runs are chosen among: the metric, its direction, and whether each seed keeps
    its own run (``aggregate.reduce`` mean or median) or the seeds are chosen among too."""

    metric: str
    direction: str | None  # None: unknown, an error only where two runs must be compared
    per_seed: bool
    reducer: str

    @classmethod
    def of(cls, exp: ExperimentConfig) -> Selection:
        agg = exp.aggregate
        try:
            direction: str | None = metric_direction(agg.metric, exp.metrics)
        except ConfigError:  # a metric the rule by name does not know: max / min say which is best
            direction = {"max": HIGHER, "min": LOWER}.get(agg.reduce)
        return cls(agg.metric, direction, agg.reduce in OVER_SEEDS, agg.reduce)


def _number(value: Any) -> float | None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    return float(value) if ok else None


def _best(runs: list[tuple[PlannedRun, RunRecord]], rule: Selection) -> tuple[RunRecord, float, bool] | None:
    """The run of ``runs`` best on the validation value of the rule's metric (on its test value
    when any run lacks the validation one) -> (run, the value read, whether it was validation);
    None when no run has the metric. Ties keep the first run in the study's order."""
    on_valid = all(_number(r.metrics.get(VALID_PREFIX + rule.metric)) is not None for _, r in runs)
    key = VALID_PREFIX + rule.metric if on_valid else rule.metric
    scored = [(r, v) for _, r in runs if (v := _number(r.metrics.get(key))) is not None]
    if not scored:
        return None
    if len(scored) > 1 and rule.direction is None:
        metric_direction(rule.metric)  # raises: the study must state the metric's direction
    sign = 1.0 if rule.direction == HIGHER else -1.0
    best, value = scored[0]
    for run, v in scored[1:]:
        if sign * v > sign * value:
            best, value = run, v
    return best, value, on_valid


def select_runs(c: CellResult, rule: Selection) -> None:
    """Fill ``c``'s selected runs, metrics, ``selected_on``, selection value and evidence."""
    groups: dict[Any, list[tuple[PlannedRun, RunRecord]]] = {}
    for p, r in zip(c.planned, c.records):
        if r is not None and r.status == "finished":
            seed = p.point.get(SEED, p.config.train.seed) if rule.per_seed else None
            groups.setdefault(seed, []).append((p, r))
    picked = [b for runs in groups.values() if (b := _best(runs, rule)) is not None]
    if not picked:
        return
    c.selected = [run for run, _, _ in picked]
    c.selected_on = VALIDATION if all(on_valid for _, _, on_valid in picked) else TEST
    reduce = REDUCERS[rule.reducer] if rule.per_seed else REDUCERS["max"]  # one run: max is itself
    c.selection_value = reduce([value for _, value, _ in picked])
    names = {k for r in c.selected for k in r.metrics if not k.startswith(VALID_PREFIX)}
    by_metric: dict[str, list[float]] = {}
    for name in sorted(names):
        values = [v for r in c.selected if (v := _number(r.metrics.get(name))) is not None]
        if values:
            by_metric[name] = values
            if not name.startswith(SE):  # a run's own error of a metric is evidence, not a metric
                c.metrics[name] = reduce(values)
    c.evidence = _evidence(c, by_metric)


def _evidence(c: CellResult, by_metric: dict[str, list[float]]) -> dict[str, Any]:
    """``n_test`` (when the selected runs' configs agree), ``seeds``, ``sd:<metric>`` (two seeds or more)."""
    out: dict[str, Any] = {}
    sizes = {(r.config.get("data") or {}).get("n_test") for r in c.selected}
    if len(sizes) == 1 and isinstance(n := sizes.pop(), int):
        out["n_test"] = n
    seeds = {(r.config.get("train") or {}).get("seed", 0) for r in c.selected}
    out["seeds"] = len(seeds)
    if len(seeds) >= 2:
        for name, values in by_metric.items():
            if len(values) >= 2 and not name.startswith(SE):
                out[f"sd:{name}"] = statistics.stdev(values)
    for name, errors in by_metric.items():
        metric = name.removeprefix(SE)
        if metric != name and metric in c.metrics and len(errors) == len(c.selected):
            out[name] = _combined_error(errors, out.get(SD + metric))
    return out


def _combined_error(errors: list[float], sd: float | None) -> float:
    """The error of a cell's number from its runs' own errors (``se:<metric>``, e.g. over a test
    set's instances): one run's as it is; over k seeds, that of their mean, ``sqrt(sum se^2) / k``,
    or the seeds' spread ``sd / sqrt(k)`` when that is larger (the noise rule's larger-of)."""
    k = len(errors)
    within = math.sqrt(sum(e * e for e in errors)) / k
    return within if sd is None else max(within, sd / math.sqrt(k))


def _rank(rec: RunRecord) -> tuple[bool, bool]:
    """Finished first, and among finished runs those made by the current code."""
    finished = rec.status == "finished"
    return finished, finished and not rec.stale


def series(results: ExperimentResults) -> dict[tuple[Any, Any, Any], list[tuple[Any, float]]]:
    """(row, panel, line) -> sorted [(x, y)] of the figure's metric, read from the cells (those with
    no finished run omitted). Where several cells fall on one point (they differ on an axis the
    figure does not show), the point is the cell whose selection read the best value, as within a
    cell (validation, else test); with ``reduce`` mean or median, their values are reduced."""
    fig, agg = results.experiment.figure, results.experiment.aggregate
    rule = Selection.of(results.experiment)
    points: dict[tuple[Any, Any, Any], dict[Any, list[tuple[float | None, float]]]] = {}
    for c in results.cells:
        key = (
            c.cell.get(fig.rows) if fig.rows else None,
            c.cell.get(fig.panels) if fig.panels else None,
            c.cell.get(fig.lines) if fig.lines else None,
        )
        if fig.x == TEST_LENGTH:
            xs = [(length, c.metrics.get(f"accuracy@{length}")) for length in results.test_lengths()]
        else:
            xs = [(c.cell.get(fig.x), c.metrics.get(agg.metric))]
        for x, y in xs:
            if y is not None:
                points.setdefault(key, {}).setdefault(x, []).append((c.selection_value, y))
    return {k: sorted((x, _point(ys, rule)) for x, ys in v.items()) for k, v in points.items()}


def _point(cells: list[tuple[float | None, float]], rule: Selection) -> float:
    """One figure point from its cells' (selection value, y): the y of the cell best on the
    selection value, or the cells' ys reduced (mean / median, or no direction to choose by)."""
    if rule.per_seed or rule.direction is None or any(v is None for v, _ in cells):
        return REDUCERS[rule.reducer]([y for _, y in cells])
    sign = 1.0 if rule.direction == HIGHER else -1.0
    return max(cells, key=lambda vy: sign * vy[0])[1]


def results_rows(results: ExperimentResults) -> tuple[list[str], list[list[Any]]]:
    """The results table: the cell's axes, its metric(s), what its run was selected on
    (``validation``, or ``test`` for runs recorded without a validation split), finished/planned runs."""
    exp = results.experiment
    axes = list(results.cells[0].cell) if results.cells else []
    lengths = results.test_lengths()
    metric_cols = [f"accuracy@{length}" for length in lengths] if exp.figure.x == TEST_LENGTH else []
    metric_cols = [exp.aggregate.metric, *[m for m in metric_cols if m != exp.aggregate.metric]]
    header = [short_axis(a) for a in axes] + metric_cols + ["selected on", "runs"]
    rows = []
    for c in results.cells:
        rows.append(
            [c.cell[a] for a in axes]
            + [c.metrics.get(m) for m in metric_cols]
            + [c.selected_on, f"{c.n_finished}/{len(c.planned)}"]
        )
    return header, rows


def cell_lookup(results: ExperimentResults) -> dict[str, CellResult]:
    return {cell_key(c.cell): c for c in results.cells}
