"""Metrics that belong to one task, beyond its output kind's own (``evaluate.py``).

``evaluation/`` owns every metric: a task describes data and never runs a model, so the layers
stay one-way (evaluation -> tasks, never back). A task with metrics of its own registers a
scorer here under its registry name.

  * ``regbench``: ``regbench_accuracy`` and ``regbench_tvd``, Eq. 8-9 of ICLL (Sec. 4.4), each with
    its standard error (``se:regbench_tvd``),
    against the true next-token distributions (:mod:`mixerzoo.evaluation.regbench_metrics`).
  * the six ``mad_*`` tasks: ``accuracy_macro`` (and its per-batch mean), the accuracy mad-lab
    scores MAD with (:mod:`mixerzoo.evaluation.mad_metrics`).
"""

from __future__ import annotations

from collections.abc import Callable

from mixerzoo.tasks.base import Task, TaskData
from mixerzoo.tasks.mad_levels import MAD_NAMES


def regbench_metrics(task: Task, model, data: TaskData) -> dict[str, float]:
    """Eq. 8-9 against the true distributions, reported at every evaluation of a run, each with
    its standard error over the test instances (``se:regbench_tvd``: the claims' noise rule reads
    it, ``claims/noise.py``; the positions of one instance share its language)."""
    from mixerzoo.evaluation.regbench_metrics import score_model

    scores = score_model(model, data)
    out = {}
    for name in ("accuracy", "tvd"):
        out[f"regbench_{name}"], out[f"se:regbench_{name}"] = scores[name], scores[f"se_{name}"]
    return out


def mad_metrics(task: Task, model, data: TaskData) -> dict[str, float]:
    """mad-lab's macro accuracy over the test split (the MAD score's metric)."""
    from mixerzoo.evaluation.mad_metrics import mad_accuracy

    return mad_accuracy(task, model, data)


#: task registry name -> scorer(task, model, test data) -> {metric: value}
TASK_METRICS: dict[str, Callable[[Task, object, TaskData], dict[str, float]]] = {
    "regbench": regbench_metrics,
    **{name: mad_metrics for name in MAD_NAMES},
}


def task_metrics(task: Task, model, data: TaskData) -> dict[str, float]:
    """The task's own test metrics (empty for tasks that have none)."""
    scorer = TASK_METRICS.get(type(task).name)
    return scorer(task, model, data) if scorer is not None else {}
