"""Learning curves: what a run's evaluation history says about how fast it learned.

A history is the list of evaluation records a run produced, in step order, as the training
loop reports them and ``ResultsStore.history(run_id)`` returns them::

    [{"step": 250, "epoch": 1, "wall_s": 12.5, "accuracy_per_query": 0.41, ...}, ...]

``steps_to_accuracy`` is the first *evaluated* step at which the metric reached the
threshold: an upper bound on the true step, resolved to the evaluation interval (one epoch
in the training loop). ``None`` means the run never got there within its budget, which is
"not yet", not "cannot": report it together with the budget (``history[-1]["step"]``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

DEFAULT_METRIC = "accuracy_per_query"


def first_reaching(
    history: Sequence[dict[str, Any]], threshold: float, metric: str = DEFAULT_METRIC
) -> dict[str, Any] | None:
    """The first record (in step order) whose ``metric`` is >= ``threshold``, or None."""
    for record in sorted(history, key=lambda r: r["step"]):
        value = record.get(metric)
        if value is not None and value >= threshold:
            return record
    return None


def steps_to_accuracy(
    history: Sequence[dict[str, Any]], threshold: float = 0.99, metric: str = DEFAULT_METRIC
) -> int | None:
    """Optimizer steps until ``metric`` first reached ``threshold`` at an evaluation; None if never."""
    record = first_reaching(history, threshold, metric)
    return None if record is None else int(record["step"])


def wall_to_accuracy(
    history: Sequence[dict[str, Any]], threshold: float = 0.99, metric: str = DEFAULT_METRIC
) -> float | None:
    """Training seconds until ``metric`` first reached ``threshold`` (the record's ``wall_s``)."""
    record = first_reaching(history, threshold, metric)
    return None if record is None else float(record["wall_s"])


def learning_curve(
    history: Sequence[dict[str, Any]], metric: str = DEFAULT_METRIC
) -> tuple[list[int], list[float]]:
    """(steps, values) of ``metric`` over the evaluations that report it, in step order."""
    records = sorted((r for r in history if r.get(metric) is not None), key=lambda r: r["step"])
    return [int(r["step"]) for r in records], [float(r[metric]) for r in records]


#: what an evaluation record holds besides its metrics
RECORD_FIELDS = ("step", "epoch", "wall_s")
#: a metric's name prefix -> the split it was measured on (``training/train.py: VALID_PREFIX``)
SPLITS = (("valid_", "valid"), ("train_", "train"))


def curve_rows(history: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """A history in long form, one row per (evaluation, metric): ``step``, ``epoch``, ``wall_s``,
    ``split`` (``test``, ``valid`` or ``train``), ``metric`` (without its split's prefix) and
    ``value``, in step order. Metrics that are no number are left out."""
    rows = []
    for record in sorted(history, key=lambda r: r["step"]):
        for key, value in record.items():
            if key in RECORD_FIELDS or isinstance(value, bool) or not isinstance(value, (int, float)):
                continue
            split, metric = next(((s, key[len(p) :]) for p, s in SPLITS if key.startswith(p)), ("test", key))
            where = {f: record.get(f) for f in RECORD_FIELDS}
            rows.append({**where, "split": split, "metric": metric, "value": float(value)})
    return rows


def plot_curves(curves: dict[str, list[dict[str, Any]]], out, metrics: Sequence[str] = ()) -> Any:
    """One panel per metric (``metrics``, default every metric of the test split), one line per run
    and split, value against step; written to ``out`` (PNG, SVG or PDF by its suffix)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = list(metrics) or sorted(
        {r["metric"] for rows in curves.values() for r in rows if r["split"] == "test"}
    )
    fig, axes = plt.subplots(1, max(len(shown), 1), figsize=(4.5 * max(len(shown), 1), 3.6), squeeze=False)
    for ax, metric in zip(axes[0], shown):
        for run, rows in curves.items():
            for split in ("test", "valid", "train"):
                points = [
                    (r["step"], r["value"]) for r in rows if r["metric"] == metric and r["split"] == split
                ]
                if points:
                    ax.plot(*zip(*points), marker=".", label=f"{run} ({split})")
        ax.set_title(metric)
        ax.set_xlabel("step")
        ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)
    return out
