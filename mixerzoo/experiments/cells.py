"""A study's results as cells: each planned run's record and every cell's aggregate metrics.

The data model that figures (``plots.py``), reports, the MAD protocol and the CLI read. A cell
is keyed by its axis values; its metrics are reduced over the runs the experiment's
``aggregate`` names (e.g. the max over learning rates, CAT-ws App. C.1), found in the store by
config hash, so a run shared by two experiments is found by both.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any

from mixerzoo.experiments.experiment_config import (
    TEST_LENGTH,
    ExperimentConfig,
    PlannedRun,
    cell_key,
    short_axis,
)
from mixerzoo.experiments.provenance import Provenance, provenance
from mixerzoo.experiments.results_store import ResultsStore, RunRecord

REDUCERS = {"max": max, "min": min, "mean": statistics.fmean, "median": statistics.median}


@dataclass
class CellResult:
    """A cell (the axis values it is keyed by), its runs and their reduced metrics."""

    cell: dict[str, Any]
    planned: list[PlannedRun] = field(default_factory=list)
    records: list[RunRecord | None] = field(default_factory=list)
    metrics: dict[str, float] = field(default_factory=dict)

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
    for c in cells.values():
        finished = [r for r in c.records if r is not None and r.status == "finished"]
        names = {k for r in finished for k, v in r.metrics.items() if isinstance(v, (int, float))}
        for name in sorted(names):
            values = [
                float(r.metrics[name]) for r in finished if isinstance(r.metrics.get(name), (int, float))
            ]
            c.metrics[name] = REDUCERS[exp.aggregate.reducer_for(name)](values)
    used = [r for c in cells.values() for r in c.records]
    return ExperimentResults(exp, list(cells.values()), provenance(used, sets))


def _rank(rec: RunRecord) -> tuple[bool, bool]:
    """Finished first, and among finished runs those made by the current code."""
    finished = rec.status == "finished"
    return finished, finished and not rec.stale


def series(results: ExperimentResults) -> dict[tuple[Any, Any, Any], list[tuple[Any, float]]]:
    """(row, panel, line) -> sorted [(x, y)] of the figure's metric (cells with no finished run omitted)."""
    fig, agg = results.experiment.figure, results.experiment.aggregate
    reduce = REDUCERS[agg.reducer_for(agg.metric)]
    points: dict[tuple[Any, Any, Any], dict[Any, list[float]]] = {}
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
                points.setdefault(key, {}).setdefault(x, []).append(y)
    return {k: sorted((x, reduce(ys)) for x, ys in v.items()) for k, v in points.items()}


def results_rows(results: ExperimentResults) -> tuple[list[str], list[list[Any]]]:
    """The results table: the cell's axes, its aggregate metric(s), finished/planned runs."""
    exp = results.experiment
    axes = list(results.cells[0].cell) if results.cells else []
    lengths = results.test_lengths()
    metric_cols = [f"accuracy@{length}" for length in lengths] if exp.figure.x == TEST_LENGTH else []
    metric_cols = [exp.aggregate.metric, *[m for m in metric_cols if m != exp.aggregate.metric]]
    header = [short_axis(a) for a in axes] + metric_cols + ["runs"]
    rows = []
    for c in results.cells:
        rows.append(
            [c.cell[a] for a in axes]
            + [c.metrics.get(m) for m in metric_cols]
            + [f"{c.n_finished}/{len(c.planned)}"]
        )
    return header, rows


def cell_lookup(results: ExperimentResults) -> dict[str, CellResult]:
    return {cell_key(c.cell): c for c in results.cells}
