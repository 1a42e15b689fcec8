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
from mixerzoo.studies.sweep.overrides import Changes

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


def modified_note(results: ExperimentResults, changes: Changes | None) -> str:
    """The mark of a figure whose points come from runs the preset as shipped does not plan:
    which lines, and the overrides; empty when no point does."""
    if changes is None or not changes.runs:
        return ""
    fig = results.experiment.figure
    lines = {c.cell.get(fig.lines) if fig.lines else None for c in results.cells if c.n_finished}
    touched = {
        c.cell.get(fig.lines) if fig.lines else None
        for c in results.cells
        if c.n_finished and changes.touches(c.planned)
    }
    if not touched:
        return ""
    which = "every line" if touched == lines else ", ".join(str(v) for v in touched if v is not None)
    return f"modified preset ({changes.text}): {which}"


def plot_experiment(
    results: ExperimentResults,
    out_dir: str | Path,
    stem: str | None = None,
    style: FigureStyle | None = None,
    changes: Changes | None = None,
) -> list[Path]:
    """Draw the figure; write ``<stem>.<format>`` into ``out_dir`` for each of the style's formats
    (PNG and SVG by default); return the paths in that order. ``changes``: the figure is marked
    (title and note) where its points come from runs the preset as shipped does not plan."""
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
    fig = draw_figure(results, data, spread, style, plt, changes)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / f"{stem or exp.name}.{fmt}" for fmt in style.formats]
    for path in paths:
        fig.savefig(path, dpi=style.dpi if path.suffix == ".png" else "figure")
    plt.close(fig)
    return paths


def draw_figure(
    results: ExperimentResults,
    data: dict,
    spread: dict,
    style: FigureStyle,
    plt,
    changes: Changes | None = None,
):
    """The matplotlib figure: a grid of panels, lines (or bars for a single x value), legend, title,
    notes (the aggregate in words; a modified preset and what it changes), laid out so that no
    legend, note or tick label is clipped and no two tick labels overlap (:func:`fit_figure`)."""
    exp = results.experiment
    fig_spec = exp.figure
    rows = _axis_values(results, fig_spec.rows)
    panels = _axis_values(results, fig_spec.panels)
    fig, axes = plt.subplots(
        len(rows), len(panels), figsize=(3.6 * len(panels), 3.0 * len(rows) + 0.8), squeeze=False, sharey=True
    )
    _draw_panels(results, data, spread, axes, rows, panels)
    legend = _legend(axes, fig_spec)
    width = fig.get_size_inches()[0]
    modified = modified_note(results, changes)
    notes = [aggregate_note(results, spread, style), modified]
    # wrap notes and title to the figure's width (about 17 / 13 characters per inch at 7 / 10 pt)
    text = "\n".join(textwrap.fill(n, width=int(17 * width)) for n in notes if n)
    note = fig.text(0.5, 0.01, text, ha="center", va="bottom", fontsize=7, color="0.3") if text else None
    if style.show_title:
        title = figure_title(results, style) + (" (modified preset)" if modified else "")
        fig.suptitle(textwrap.fill(title, width=int(13 * width)), fontsize=10)
    fit_figure(fig, axes, legend, note, panel_height=3.0 * len(rows))
    return fig


def _draw_panels(results: ExperimentResults, data: dict, spread: dict, axes, rows, panels) -> None:
    """One panel per (row, panel) value: its lines or bars, limits, grid, title and y label."""
    exp = results.experiment
    fig_spec = exp.figure
    lines = _axis_values(results, fig_spec.lines)
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


#: the rotations tried, in order, until no two x tick labels of a panel overlap
ROTATIONS = (0, 30, 45, 90)
MARGIN_IN = 0.08  # inches between the notes, the legend and the panels


def fit_figure(fig, axes, legend_entries, note, panel_height: float) -> None:
    """Lay the figure out: its legend (``legend_entries``: handles, labels and the keywords of
    ``fig.legend``; None: no legend) below the panels in as many columns as fit the figure's width
    (the figure widened when one column does not), the figure made tall enough for the panels,
    legend and ``note`` below them, and each panel's x tick labels rotated until no two overlap."""
    axes = list(getattr(axes, "flat", axes))
    renderer = fig.canvas.get_renderer()
    legend = _fit_legend(fig, legend_entries, renderer) if legend_entries else None
    dpi = fig.dpi
    legend_h = legend.get_window_extent(renderer).height / dpi if legend is not None else 0.0
    note_h = note.get_window_extent(renderer).height / dpi if note is not None else 0.0
    width = fig.get_size_inches()[0]
    height = panel_height + 0.8 + legend_h + note_h
    fig.set_size_inches(width, height)
    if legend is not None:
        legend.set_bbox_to_anchor((0.5, (note_h + 2 * MARGIN_IN) / height), transform=fig.transFigure)
    bottom = (legend_h + note_h + 3 * MARGIN_IN) / height
    for ax in axes:
        ax.tick_params(axis="x", labelrotation=0, labelrotation_mode="default")
    for _ in ROTATIONS:  # a rotation changes the layout, which moves the ticks: until none changes
        fig.tight_layout(rect=(0, bottom, 1, 1))
        fig.canvas.draw()  # places the ticks of this layout
        if not [ax for ax in axes if _fit_tick_labels(fig, ax)]:
            return
    fig.tight_layout(rect=(0, bottom, 1, 1))


def _fit_legend(fig, entries, renderer):
    """The legend in the most columns (up to six) that fit the figure's width; in one column, the
    figure widened to it, when even that does not fit."""
    handles, labels, keywords = entries
    limit = fig.bbox.width * 0.98
    for ncol in range(max(1, min(len(labels), 6)), 0, -1):
        legend = fig.legend(handles, labels, loc="lower center", ncol=ncol, frameon=False, **keywords)
        if legend.get_window_extent(renderer).width <= limit or ncol == 1:
            break
        legend.remove()
    needed = legend.get_window_extent(renderer).width / fig.dpi
    width, height = fig.get_size_inches()
    if needed > width * 0.98:
        fig.set_size_inches(needed / 0.98 + 0.1, height)
    return legend


def _fit_tick_labels(fig, ax) -> bool:
    """Rotate the panel's x tick labels by the first of :data:`ROTATIONS`, from their current one,
    at which no two overlap (each label's end at its tick); True when the rotation changed."""
    renderer = fig.canvas.get_renderer()
    lo, hi = sorted(ax.get_xlim())  # ticks outside the view are not drawn
    ticks = zip(ax.get_xticks(), ax.get_xticklabels())
    labels = [t for x, t in ticks if lo <= x <= hi and t.get_visible() and t.get_text()]
    if len(labels) < 2:
        return False
    now = labels[0].get_rotation()
    mode = labels[0].get_rotation_mode()
    sizes = []
    for t in labels:  # each label's width and height unrotated
        t.set(rotation=0, rotation_mode="default")
        box = t.get_window_extent(renderer)
        sizes.append((box.width, box.height))
        t.set(rotation=now, rotation_mode=mode)
    for angle in [a for a in ROTATIONS if a >= now]:
        ax.tick_params(axis="x", labelrotation=angle, labelrotation_mode="xtick" if angle else "default")
        centres = [_centre(t.get_window_extent(renderer)) for t in labels]
        if not labels_overlap(centres, sizes, angle):
            return angle != now
    return angle != now


def _centre(box) -> tuple[float, float]:
    return (box.x0 + box.x1) / 2, (box.y0 + box.y1) / 2


def labels_overlap(
    centres: list[tuple[float, float]], sizes: list[tuple[float, float]], angle: float
) -> bool:
    """Whether any two text boxes of ``sizes`` (width, height unrotated), centred at ``centres``
    and all rotated by ``angle`` degrees, overlap (along the text and across it)."""
    import math

    cos, sin = math.cos(math.radians(angle)), math.sin(math.radians(angle))
    boxes = list(zip(centres, sizes))
    for k, ((x1, y1), (w1, h1)) in enumerate(boxes):
        for (x2, y2), (w2, h2) in boxes[k + 1 :]:
            along = abs((x2 - x1) * cos + (y2 - y1) * sin)
            across = abs(-(x2 - x1) * sin + (y2 - y1) * cos)
            if along < (w1 + w2) / 2 and across < (h1 + h2) / 2:
                return True
    return False


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
    ax.set_xticks(range(len(names)), names)  # rotated where they would overlap (fit_figure)
    ax.set_xlabel(f"{axis_label(results.experiment.figure.x)} = {x}")


def _legend(axes, fig_spec):
    """The figure's one legend: every line of every panel (handles, labels, keywords); None
    without lines."""
    handles, labels = axes[0][0].get_legend_handles_labels()
    for ax in axes.flat:  # a line missing from the first panel still gets a legend entry
        for h, lab in zip(*ax.get_legend_handles_labels()):
            if lab not in labels:
                handles.append(h)
                labels.append(lab)
    if not labels:
        return None
    title = axis_label(fig_spec.lines) if fig_spec.lines not in (VARIANT, None) else None
    return handles, labels, {"title": title}
