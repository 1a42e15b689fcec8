"""Every kind of figure a sweep or MAD study draws keeps its legends, notes and tick labels inside
the figure, and no two x tick labels of a panel overlap: drawn from synthetic results (no run is
trained), with many variants and long names, the cases where a fixed layout fails."""

from __future__ import annotations

import math
import random

import matplotlib
import pytest

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402

from mixerzoo.params import validate  # noqa: E402
from mixerzoo.store.records import RunRecord  # noqa: E402
from mixerzoo.studies.mad.report import draw_mad  # noqa: E402
from mixerzoo.studies.sweep.cells import CellResult, ExperimentResults, Selection, select_runs, series  # noqa: E402
from mixerzoo.studies.sweep.config import ExperimentConfig  # noqa: E402
from mixerzoo.studies.sweep.plots import FigureStyle, draw_figure, seed_spread  # noqa: E402

#: ten variants with names as long as the shipped studies' (ICLL Fig. 2 has ten models)
LONG = [
    "transformer",
    "lstm",
    "retnet",
    "gla",
    "mamba",
    "s4d",
    "linear_attention",
    "hyena",
    "gated_delta_net-conv",
    "h3",
]
BASE = {
    "data": {"task": {"name": "mqar_cat", "vocab_size": 4096, "seq_len": 8}, "n_train": 32, "n_test": 16},
    "model": {"d_model": 8, "n_layers": 1, "mixer": "cat"},
    "train": {"epochs": 1, "batch_size": 16, "device": "cpu"},
}


def _study(name: str, variants: list[str], grid: dict, figure: dict, **extra) -> ExperimentConfig:
    return validate(
        ExperimentConfig,
        {
            "name": name,
            "description": "a figure of many variants with long names, drawn from synthetic results",
            "base": BASE,
            "variants": {v: {"model": {"n_layers": 1 + i}} for i, v in enumerate(variants)},
            "grid": grid,
            "aggregate": {"metric": "accuracy_per_query", "reduce": "max", "over": ["train.lr", "seed"]},
            "figure": figure,
            "presets": {"quick": {}, "paper": {}},
            **extra,
        },
    )


def _results(exp: ExperimentConfig, lengths: tuple[int, ...] = ()) -> ExperimentResults:
    """Every planned run finished with made-up metrics (validation and test, accuracy@L)."""
    rng = random.Random(0)
    cells: dict[str, CellResult] = {}
    for p in exp.expand():
        acc = rng.random()
        metrics = {"accuracy_per_query": acc, "valid_accuracy_per_query": acc}
        metrics.update({f"accuracy@{n}": rng.random() for n in lengths})
        record = RunRecord(
            run_id=p.config_hash[:8],
            status="finished",
            config=p.config.model_dump(mode="json"),
            config_hash=p.config_hash,
            name=p.config.name,
            experiment=exp.name,
            metrics=metrics,
            checkpoint=None,
            wall_s=1.0,
            params=100,
            error=None,
            package_version=None,
            created_at=0.0,
            updated_at=0.0,
        )
        c = cells.setdefault(p.cell_key, CellResult(cell=p.cell))
        c.planned.append(p)
        c.records.append(record)
    for c in cells.values():
        select_runs(c, Selection.of(exp))
    return ExperimentResults(exp, list(cells.values()))


SEEDS = [0, 1, 2]
FIGURES = {
    # lines over a log x axis, one panel per d_model and one row per task, ten lines
    "lines-panels-rows": lambda: _study(
        "lines-panels-rows",
        LONG,
        {
            "data.task.seq_len": [64, 128, 256, 512],
            "model.d_model": [32, 64, 128],
            "data.n_train": [32, 64],
            "train.lr": [1e-3, 1e-2],
        },
        {"x": "data.task.seq_len", "panels": "model.d_model", "rows": "data.n_train"},
    ),
    # one panel, ten lines: a legend far wider than the panel, and a long note (seeds)
    "lines-one-panel": lambda: _study(
        "lines-one-panel",
        LONG,
        {"data.n_train": [1000, 2500, 5000, 10000, 20000, 40000], "train.lr": [1e-3, 1e-2]},
        {"x": "data.n_train", "panels": None},
        seeds=SEEDS,
    ),
    # a single x value: bars with the variants' names as tick labels
    "bars": lambda: _study(
        "bars", LONG, {"data.task.seq_len": [64], "train.lr": [1e-3]}, {"x": "data.task.seq_len"}, seeds=SEEDS
    ),
    # x on a linear axis of many close values
    "lines-linear-x": lambda: _study(
        "lines-linear-x",
        LONG[:4],
        {"train.weight_decay": [0.0, 0.01, 0.02, 0.05, 0.1, 0.2, 0.3], "train.lr": [1e-3]},
        {"x": "train.weight_decay", "panels": None, "log_x": False},
    ),
    # x as text: long task names
    "lines-text-x": lambda: _study(
        "lines-text-x",
        LONG[:6],
        {"train.lr": [1e-3]},
        {"x": "variant", "panels": None, "lines": None},
    ),
}


def _inside(box, frame, tol: float = 1.0) -> bool:
    return (
        box.x0 >= frame.x0 - tol
        and box.x1 <= frame.x1 + tol
        and box.y0 >= frame.y0 - tol
        and box.y1 <= frame.y1 + tol
    )


def _overlapping_labels(labels, renderer) -> list[tuple[str, str]]:
    """Pairs of labels whose text boxes (rotated rectangles of the unrotated size, centred where
    the drawn label's bounding box is centred) intersect."""
    shapes = []
    for t in labels:
        drawn = t.get_window_extent(renderer)
        angle, mode = t.get_rotation(), t.get_rotation_mode()
        t.set(rotation=0, rotation_mode="default")
        flat = t.get_window_extent(renderer)
        t.set(rotation=angle, rotation_mode=mode)
        centre = ((drawn.x0 + drawn.x1) / 2, (drawn.y0 + drawn.y1) / 2)
        shapes.append((t.get_text(), centre, flat.width, flat.height, math.radians(angle)))
    bad = []
    for i, (a, (xa, ya), wa, ha, th) in enumerate(shapes):
        for b, (xb, yb), wb, hb, _ in shapes[i + 1 :]:
            dx, dy = xb - xa, yb - ya
            along = abs(dx * math.cos(th) + dy * math.sin(th))
            across = abs(-dx * math.sin(th) + dy * math.cos(th))
            if along < (wa + wb) / 2 - 0.5 and across < (ha + hb) / 2 - 0.5:
                bad.append((a, b))
    return bad


def check_layout(fig) -> None:
    """Legends, notes, titles and x tick labels inside the figure; no two x tick labels overlap."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    frame = fig.bbox
    legends = [*fig.legends, *(ax.get_legend() for ax in fig.axes if ax.get_legend() is not None)]
    assert legends, "the figure has no legend"
    for legend in legends:
        box = legend.get_window_extent(renderer)
        assert _inside(box, frame), f"legend {box} outside the figure {frame}"
    texts = [*fig.texts, *([fig._suptitle] if fig._suptitle is not None else [])]
    for text in texts:
        if text.get_text():
            assert _inside(text.get_window_extent(renderer), frame), f"clipped: {text.get_text()!r}"
    for ax in fig.axes:
        lo, hi = sorted(ax.get_xlim())
        ticks = zip(ax.get_xticks(), ax.get_xticklabels())
        labels = [t for x, t in ticks if lo <= x <= hi and t.get_visible() and t.get_text()]
        for t in labels:
            assert _inside(t.get_window_extent(renderer), frame), f"tick label {t.get_text()!r} clipped"
        assert not _overlapping_labels(labels, renderer)


@pytest.mark.parametrize("kind", list(FIGURES))
def test_sweep_figure_keeps_legend_and_tick_labels_inside_and_apart(kind):
    res = _results(FIGURES[kind]())
    style = FigureStyle(title="A long title in words: accuracy of ten sequence mixers " * 2)
    fig = draw_figure(res, series(res), seed_spread(res), style, plt)
    try:
        check_layout(fig)
    finally:
        plt.close(fig)


def test_length_generalization_figure_keeps_everything_inside():
    exp = _study(
        "length-generalization",
        LONG,
        {"train.lr": [1e-3, 1e-2]},
        {"x": "test_seq_len", "panels": None, "train_length": 64},
        test={"seq_lens": [32, 64, 128, 256, 512, 1024, 2048, 4096]},
    )
    res = _results(exp, lengths=(32, 64, 128, 256, 512, 1024, 2048, 4096))
    fig = draw_figure(res, series(res), seed_spread(res), FigureStyle(), plt)
    try:
        check_layout(fig)
    finally:
        plt.close(fig)


def test_mad_figure_keeps_legend_and_tick_labels_inside_and_apart():
    tasks = ["mad_in_context_recall", "mad_fuzzy_recall", "mad_noisy_recall", "mad_selective_copy"]
    tasks += ["mad_compression", "mad_memorization"]
    rng = random.Random(1)
    per_task = {v: {t: rng.random() for t in tasks} for v in LONG}
    payload = {
        "experiment": "mad",
        "preset": "quick",
        "protocol": {"levels_per_task": {t: 2 for t in tasks}},
        "variants": LONG,
        "mad_scores": {
            "per_task": per_task,
            "overall": {v: sum(s.values()) / 6 for v, s in per_task.items()},
        },
    }
    fig = draw_mad(payload, plt)
    try:
        check_layout(fig)
    finally:
        plt.close(fig)


def test_overlap_check_sees_overlapping_labels():
    """The check itself: labels crowded on a narrow axis overlap until they are rotated."""
    fig, ax = plt.subplots(figsize=(2, 2))
    ax.set_xticks(range(6), [f"a_long_label_{i}" for i in range(6)])
    fig.canvas.draw()
    labels = ax.get_xticklabels()
    assert _overlapping_labels(labels, fig.canvas.get_renderer())
    ax.tick_params(axis="x", labelrotation=90)
    fig.canvas.draw()
    assert not _overlapping_labels(ax.get_xticklabels(), fig.canvas.get_renderer())
    plt.close(fig)
