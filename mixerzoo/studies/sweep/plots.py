"""Figures from a study's cells (``cells.py``), in the papers' layout (CAT-ws Fig. 3/4/11, Zoology Fig. 2).

One panel per value of ``figure.panels`` (d_model: "Model dimensions are 32, 64, 128 for each
column", CAT-ws Fig. 3), one row per ``figure.rows`` value (MQAR top, MQNAR bottom), one line per
model variant; x is the swept axis (sequence length, or d_model for Zoology Fig. 2) or, for length
generalization, the test length with y = ``accuracy@<L>``. Each point is a cell's aggregate
(e.g. the max over learning rates, CAT-ws App. C.1), computed from the store by config hash, so a
run shared by two experiments is found by both.

Beside the paper's aggregate (solid lines), a study with several seeds gets the mean over seeds
(dashed) and a band (min to max, or one standard deviation), each seed first reduced over the
other aggregated axes the way the paper reduces them. An x axis with a single value is drawn as
bars (the aggregate) with the mean and band as points and error bars. :class:`FigureStyle` holds
the title, the file formats, the resolution and the band.
"""

from __future__ import annotations

import statistics
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from mixerzoo.registry import ConfigError
from mixerzoo.studies.sweep.cells import REDUCERS, ExperimentResults, series
from mixerzoo.studies.sweep.config import SEED, TEST_LENGTH, VARIANT, short_axis

FORMATS = ("png", "pdf", "svg")
BANDS = ("minmax", "std")
#: the aggregated axes and reductions, in words (figure notes name no config paths)
AXIS_WORDS = {"train.lr": "learning rates", SEED: "seeds", "train.seed": "seeds"}
REDUCE_WORDS = {"max": "best", "min": "lowest", "mean": "mean", "median": "median"}


@dataclass(frozen=True)
class FigureStyle:
    """How a figure is drawn: ``title`` (None: the study's own), ``show_title``, the file
    ``formats`` (png, pdf, svg), ``dpi`` of the raster formats, and the seed ``band``
    (``minmax``, ``std``, or None for no mean-over-seeds line)."""

    title: str | None = None
    show_title: bool = True
    formats: tuple[str, ...] = ("png", "svg")
    dpi: int = 200
    band: Literal["minmax", "std"] | None = "minmax"

    def __post_init__(self) -> None:
        bad = [f for f in self.formats if f not in FORMATS]
        if bad or not self.formats:
            raise ConfigError(f"--format {', '.join(bad) or '(none)'}: allowed: {', '.join(FORMATS)}")
        if self.band is not None and self.band not in BANDS:
            raise ConfigError(f"--band {self.band!r}: allowed: {', '.join(BANDS)}")
        if self.dpi < 10:
            raise ConfigError(f"--dpi {self.dpi}: must be at least 10")


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


def _key(results: ExperimentResults, cell: dict[str, Any]) -> tuple[Any, Any, Any]:
    fig = results.experiment.figure
    return tuple(cell.get(a) if a else None for a in (fig.rows, fig.panels, fig.lines))  # type: ignore[return-value]


def _points(
    results: ExperimentResults, cell: dict[str, Any], metrics: dict[str, Any]
) -> list[tuple[Any, Any]]:
    fig, metric = results.experiment.figure, results.experiment.aggregate.metric
    if fig.x == TEST_LENGTH:
        return [(n, metrics.get(f"accuracy@{n}")) for n in results.test_lengths()]
    return [(cell.get(fig.x), metrics.get(metric))]


def seed_spread(
    results: ExperimentResults, band: Literal["minmax", "std"] = "minmax"
) -> dict[tuple[Any, Any, Any], list[tuple[Any, float, float, float, int]]]:
    """(row, panel, line) -> sorted [(x, mean, low, high, seeds)] over seeds, where a point has at
    least two seeds. Each seed's value is first reduced over the point's other runs (e.g. the max
    over learning rates) with the study's reducer; the band is min..max or mean +- one std."""
    reduce = REDUCERS[results.experiment.aggregate.reducer_for(results.experiment.aggregate.metric)]
    by_seed: dict[tuple[Any, Any, Any], dict[Any, dict[Any, list[float]]]] = {}
    for c in results.cells:
        for p, r in zip(c.planned, c.records):
            if r is None or r.status != "finished":
                continue
            seed = p.point.get(SEED, p.config.train.seed)
            at = by_seed.setdefault(_key(results, c.cell), {})
            for x, y in _points(results, c.cell, r.metrics):
                if isinstance(y, (int, float)):
                    at.setdefault(x, {}).setdefault(seed, []).append(float(y))
    out: dict[tuple[Any, Any, Any], list[tuple[Any, float, float, float, int]]] = {}
    for key, xs in by_seed.items():
        for x, seeds in xs.items():
            if len(seeds) < 2:
                continue
            values = [reduce(v) for v in seeds.values()]
            mean = statistics.fmean(values)
            if band == "std":
                sd = statistics.pstdev(values)
                lo, hi = mean - sd, mean + sd
            else:
                lo, hi = min(values), max(values)
            out.setdefault(key, []).append((x, mean, lo, hi, len(values)))
    return {k: sorted(v, key=lambda t: t[0]) for k, v in out.items()}


def figure_title(results: ExperimentResults, style: FigureStyle) -> str:
    """The given title, else the study's figure title, description or name (no config paths)."""
    exp = results.experiment
    return style.title or exp.figure.title or exp.description.strip() or exp.name


def aggregate_note(results: ExperimentResults, spread: dict, style: FigureStyle) -> str:
    """What the lines show, in words, e.g. "solid: best over learning rates and seeds (the paper's
    aggregate); dashed: mean over 3 seeds, band min to max"."""
    agg = results.experiment.aggregate
    over = [AXIS_WORDS.get(a, f"{short_axis(a)} values") for a in agg.over]
    how = REDUCE_WORDS[agg.reducer_for(agg.metric)]
    text = f"solid: {how} over {' and '.join(over)} (the paper's aggregate)" if over else ""
    if spread:
        n = max(t[4] for pts in spread.values() for t in pts)
        band = "min to max" if style.band == "minmax" else "one standard deviation"
        text += ("; " if text else "") + f"dashed: mean over {n} seeds, band {band}"
    return text


def plot_experiment(
    results: ExperimentResults,
    out_dir: str | Path,
    stem: str | None = None,
    style: FigureStyle | None = None,
) -> list[Path]:
    """Draw the figure; write ``<stem>.<format>`` into ``out_dir`` for each of the style's formats
    (PNG and SVG by default); return the paths in that order."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    style = style or FigureStyle()
    plt.rcParams["svg.fonttype"] = "none"  # text stays text in the SVG (searchable, editable)
    plt.rcParams["pdf.fonttype"] = 42  # TrueType in the PDF (editable, accepted by journals)
    exp = results.experiment
    data = series(results)
    if not data:
        raise ConfigError(
            f"no finished runs of {exp.name} in the results store ({results.n_runs} planned); "
            f"run `mixerzoo study run {exp.name}` first (with the same --preset and --results)"
        )
    spread = seed_spread(results, style.band) if style.band else {}
    fig = draw_figure(results, data, spread, style, plt)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / f"{stem or exp.name}.{fmt}" for fmt in style.formats]
    for path in paths:
        fig.savefig(path, dpi=style.dpi if path.suffix == ".png" else "figure")
    plt.close(fig)
    return paths


def draw_figure(results: ExperimentResults, data: dict, spread: dict, style: FigureStyle, plt):
    """The matplotlib figure: a grid of panels, lines (or bars for a single x value), legend, title."""
    exp = results.experiment
    fig_spec = exp.figure
    rows = _axis_values(results, fig_spec.rows)
    panels = _axis_values(results, fig_spec.panels)
    lines = _axis_values(results, fig_spec.lines)
    fig, axes = plt.subplots(
        len(rows), len(panels), figsize=(3.6 * len(panels), 3.0 * len(rows) + 0.8), squeeze=False, sharey=True
    )
    xs_all = sorted({x for pts in data.values() for x, _ in pts}, key=str)
    ys_all = [y for pts in data.values() for _, y in pts] + [
        v for pts in spread.values() for t in pts for v in t[2:4]
    ]
    unit_range = all(-0.001 <= y <= 1.001 for y in ys_all)
    for i, row in enumerate(rows):
        for j, panel in enumerate(panels):
            ax = axes[i][j]
            if len(xs_all) == 1:
                _draw_bars(ax, results, data, spread, row, panel, lines, xs_all[0])
            else:
                _draw_lines(ax, results, data, spread, row, panel, lines, xs_all)
            if unit_range:
                ax.set_ylim(-0.03, 1.05)
            ax.grid(alpha=0.3)
            ax.set_title(f"{axis_label(fig_spec.panels)} = {panel}" if fig_spec.panels else "", fontsize=10)
            if j == 0:
                metric = "accuracy" if fig_spec.x == TEST_LENGTH else exp.aggregate.metric.replace("_", " ")
                ax.set_ylabel(f"{row}\n{metric}" if fig_spec.rows else metric)
    _legend(fig, axes, fig_spec)
    note = aggregate_note(results, spread, style)
    if note:
        fig.text(0.5, 0.005, note, ha="center", va="bottom", fontsize=7, color="0.3")
    if style.show_title:
        # wrap the title to the figure's width (about 13 characters per inch at this size)
        fig.suptitle(
            textwrap.fill(figure_title(results, style), width=int(13 * 3.6 * len(panels))), fontsize=10
        )
    fig.tight_layout(rect=(0, 0.13 if len(rows) == 1 else 0.08, 1, 1))
    return fig


MARKERS = "osD^vP*Xh<>"


def _draw_lines(ax, results, data, spread, row, panel, lines, xs_all) -> None:
    import matplotlib.pyplot as plt

    fig_spec = results.experiment.figure
    cmap = plt.get_cmap("tab10")
    for k, line in enumerate(lines):
        pts = data.get((row, panel, line))
        if not pts:
            continue
        color = cmap(k % 10)
        label = results.experiment.name if line is None else str(line)
        xs, ys = [x for x, _ in pts], [y for _, y in pts]
        ax.plot(xs, ys, marker=MARKERS[k % len(MARKERS)], color=color, label=label, lw=1.6, ms=5)
        band = spread.get((row, panel, line))
        if band:
            bx = [t[0] for t in band]
            ax.plot(bx, [t[1] for t in band], ls="--", color=color, lw=1.2, gid=f"seed-mean-{label}")
            ax.fill_between(
                bx,
                [t[2] for t in band],
                [t[3] for t in band],
                color=color,
                alpha=0.18,
                lw=0,
                gid=f"seed-band-{label}",
            )
    if fig_spec.log_x and xs_all and all(isinstance(x, (int, float)) and x > 0 for x in xs_all):
        ax.set_xscale("log", base=2)
        ax.set_xticks(xs_all)
        ax.set_xticklabels([str(x) for x in xs_all])
        ax.minorticks_off()
    if fig_spec.train_length is not None:
        ax.axvline(fig_spec.train_length, color="red", ls="--", lw=1)
    ax.set_xlabel(axis_label(fig_spec.x))


def _draw_bars(ax, results, data, spread, row, panel, lines, x) -> None:
    """A single x value: one bar per line (the aggregate), the seed mean and band as an error bar."""
    import matplotlib.pyplot as plt

    cmap = plt.get_cmap("tab10")
    names = []
    for k, line in enumerate(lines):
        pts = data.get((row, panel, line))
        label = results.experiment.name if line is None else str(line)
        names.append(label)
        if not pts:
            continue
        ax.bar(k, pts[0][1], color=cmap(k % 10), width=0.7, label=label)
        band = spread.get((row, panel, line))
        if band:
            _, mean, lo, hi, _ = band[0]
            ax.errorbar(
                k,
                mean,
                yerr=[[mean - lo], [hi - mean]],
                fmt="o",
                color="black",
                ms=4,
                capsize=3,
                gid=f"seed-band-{label}",
            )
    ax.set_xticks(
        range(len(names)),
        names,
        rotation=30 if len(names) > 3 else 0,
        ha="right" if len(names) > 3 else "center",
    )
    ax.set_xlabel(f"{axis_label(results.experiment.figure.x)} = {x}")


def _legend(fig, axes, fig_spec) -> None:
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
        bbox_to_anchor=(0.5, 0.03),
        ncol=max(1, min(len(labels), 6)),
        frameon=False,
        title=axis_label(fig_spec.lines) if fig_spec.lines not in (VARIANT, None) else None,
    )
