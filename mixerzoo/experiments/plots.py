"""Figures from the results store, in the papers' layout (001 Fig. 3/4/11, 002 Fig. 2).

One panel per value of ``figure.panels`` (d_model: "Model dimensions are 32, 64, 128 for each
column", 001 Fig. 3), one row per ``figure.rows`` value (MQAR top, MQNAR bottom), one line per
model variant; x is the swept axis (sequence length, or d_model for 002 Fig. 2) or, for length
generalization, the test length with y = ``accuracy@<L>``. Each point is a cell's aggregate
(e.g. the max over learning rates, 001 App. C.1), computed from the store by config hash, so a
run shared by two experiments is found by both.
"""

from __future__ import annotations

import statistics
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mixerzoo.experiments.experiment_config import (
    TEST_LENGTH,
    VARIANT,
    ExperimentConfig,
    PlannedRun,
    cell_key,
    short_axis,
)
from mixerzoo.experiments.results_store import ResultsStore, RunRecord
from mixerzoo.registry import ConfigError

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


def collect_results(exp: ExperimentConfig, store: ResultsStore) -> ExperimentResults:
    """Each planned run's record (finished preferred, else the latest) and every cell's aggregate."""
    by_hash: dict[str, RunRecord] = {}
    for rec in store.runs():  # ordered by creation: later rows win unless a finished one is held
        held = by_hash.get(rec.config_hash)
        if held is None or held.status != "finished":
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
    return ExperimentResults(exp, list(cells.values()))


def _axis_values(results: ExperimentResults, axis: str | None) -> list[Any]:
    if axis is None:
        return [None]
    if axis == TEST_LENGTH:
        return results.test_lengths()
    if not any(axis in c.cell for c in results.cells):
        return [None]
    return list(dict.fromkeys(c.cell[axis] for c in results.cells if axis in c.cell))


def axis_label(axis: str) -> str:
    return {
        TEST_LENGTH: "test sequence length",
        "data.task.seq_len": "sequence length",
        "model.d_model": "model dimension",
    }.get(axis, short_axis(axis))


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


def plot_experiment(results: ExperimentResults, out_dir: str | Path, stem: str | None = None) -> list[Path]:
    """Draw the figure; write ``<stem>.png`` and ``<stem>.svg`` into ``out_dir``; return both paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams["svg.fonttype"] = "none"  # text stays text in the SVG (searchable, editable)
    exp = results.experiment
    fig_spec = exp.figure
    data = series(results)
    if not data:
        raise ConfigError(
            f"no finished runs of {exp.name} in the results store ({results.n_runs} planned); "
            f"run `mixerzoo run {exp.name}` first (with the same --preset and --results)"
        )
    rows = _axis_values(results, fig_spec.rows)
    panels = _axis_values(results, fig_spec.panels)
    lines = _axis_values(results, fig_spec.lines)
    fig, axes = plt.subplots(
        len(rows), len(panels), figsize=(3.6 * len(panels), 3.0 * len(rows) + 0.6), squeeze=False, sharey=True
    )
    cmap = plt.get_cmap("tab10")
    markers = "osD^vP*Xh<>"
    xs_all = sorted({x for pts in data.values() for x, _ in pts})
    for i, row in enumerate(rows):
        for j, panel in enumerate(panels):
            ax = axes[i][j]
            for k, line in enumerate(lines):
                pts = data.get((row, panel, line))
                if not pts:
                    continue
                ax.plot(
                    [x for x, _ in pts],
                    [y for _, y in pts],
                    marker=markers[k % len(markers)],
                    color=cmap(k % 10),
                    label=exp.name if line is None else str(line),
                    lw=1.6,
                    ms=5,
                )
            if fig_spec.log_x and xs_all and all(isinstance(x, (int, float)) and x > 0 for x in xs_all):
                ax.set_xscale("log", base=2)
                ax.set_xticks(xs_all)
                ax.set_xticklabels([str(x) for x in xs_all])
                ax.minorticks_off()
            if fig_spec.train_length is not None:
                ax.axvline(fig_spec.train_length, color="red", ls="--", lw=1)
            ax.set_ylim(-0.03, 1.05)
            ax.grid(alpha=0.3)
            title = f"{axis_label(fig_spec.panels)} = {panel}" if fig_spec.panels else ""
            ax.set_title(title, fontsize=10)
            if i == len(rows) - 1:
                ax.set_xlabel(axis_label(fig_spec.x))
            if j == 0:
                metric = "accuracy" if fig_spec.x == TEST_LENGTH else exp.aggregate.metric.replace("_", " ")
                ax.set_ylabel(f"{row}\n{metric}" if fig_spec.rows else metric)
    handles, labels = axes[0][0].get_legend_handles_labels()
    for ax in axes.flat:  # a line missing from the first panel still gets a legend entry
        for h, lab in zip(*ax.get_legend_handles_labels()):
            if lab not in labels:
                handles.append(h)
                labels.append(lab)
    fig.legend(
        handles,
        labels,
        loc="lower center",
        ncol=min(len(labels), 6),
        frameon=False,
        title=axis_label(fig_spec.lines) if fig_spec.lines not in (VARIANT, None) else None,
    )
    reduced = f" ({exp.aggregate.reduce} over {', '.join(exp.aggregate.over)})" if exp.aggregate.over else ""
    # wrap the title to the figure's width (about 13 characters per inch at this size)
    title = textwrap.fill((fig_spec.title or exp.name) + reduced, width=int(13 * 3.6 * len(panels)))
    fig.suptitle(title, fontsize=10)
    fig.tight_layout(rect=(0, 0.1 if len(rows) == 1 else 0.06, 1, 1))
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    stem = stem or exp.name
    paths = [out / f"{stem}.png", out / f"{stem}.svg"]
    fig.savefig(paths[0], dpi=120)
    fig.savefig(paths[1])
    plt.close(fig)
    return paths


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
