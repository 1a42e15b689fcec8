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
