"""Figures from a study's cells (``cells.py``), in the papers' layout (CAT-ws Fig. 3/4/11, Zoology Fig. 2).

One panel per value of ``figure.panels`` (d_model: "Model dimensions are 32, 64, 128 for each
column", CAT-ws Fig. 3), one row per ``figure.rows`` value (MQAR top, MQNAR bottom), one line per
model variant; x is the swept axis (sequence length, or d_model for Zoology Fig. 2) or, for length
generalization, the test length with y = ``accuracy@<L>``. Each point is a cell's aggregate
(e.g. the max over learning rates, CAT-ws App. C.1), computed from the store by config hash, so a
run shared by two experiments is found by both.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

from mixerzoo.experiments.cells import ExperimentResults, series
from mixerzoo.experiments.experiment_config import TEST_LENGTH, VARIANT, short_axis
from mixerzoo.registry import ConfigError


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
