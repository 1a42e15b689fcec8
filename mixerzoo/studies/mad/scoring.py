"""MAD scores (MAD: Poli et al. 2024, *Mechanistic Design and Scaling of Hybrid Architectures*;
mad-lab's ``mad/analysis.py``): from the runs of an expanded MAD experiment to one score per
task and their mean, and those scores as claim cells.

    best(task, level) = max over (lr, wd) of the test accuracy      # subset_..._to_best_sweep_runs
    MAD score(task)   = mean over levels of best(task, level)      # compute_model_mad_scores
    MAD score         = mean over tasks                            # benchmark.py "Mean across Tasks"
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from mixerzoo.claims import RUNS_FINISHED, RUNS_PLANNED
from mixerzoo.studies.mad.levels import LEVEL_AXIS, TASK_AXIS, level_label
from mixerzoo.studies.sweep.config import VARIANT, ExperimentConfig

SCORE = "mad_score"
#: the per-position accuracy, reported beside the MAD score's metric (mad.yaml aggregate.metric:
#: mad-lab's macro accuracy, evaluation/mad_metrics.py)
PER_POSITION_METRIC = "accuracy_per_query"
MEAN = "mean over tasks"


@dataclass(frozen=True)
class MadRun:
    """One training run of the protocol (accuracy None: not finished, or finished without the
    metric, ``finished`` then True: a run stored before its task reported that metric)."""

    variant: str
    task: str
    level: str
    lr: float
    weight_decay: float
    accuracy: float | None
    finished: bool = False


@dataclass
class MadScores:
    """Best run per (variant, task, level); MAD score per (variant, task); mean over tasks."""

    best: dict[tuple[str, str, str], float] = field(default_factory=dict)
    per_task: dict[str, dict[str, float]] = field(default_factory=dict)
    overall: dict[str, float] = field(default_factory=dict)
    complete: dict[tuple[str, str], bool] = field(default_factory=dict)
    counts: dict[tuple[str, str], tuple[int, int]] = field(default_factory=dict)  # finished, planned

    def as_json(self) -> dict[str, Any]:
        return {
            "overall": self.overall,
            "per_task": self.per_task,
            "levels": [
                {"variant": v, "task": t, "level": lv, "best_accuracy": a}
                for (v, t, lv), a in self.best.items()
            ],
            "complete": [{"variant": v, "task": t, "complete": c} for (v, t), c in self.complete.items()],
        }


def score_runs(runs: Iterable[MadRun]) -> MadScores:
    """MAD scores from runs (mad/analysis.py): max over (lr, wd) per level, mean over levels per
    task, mean over tasks. A level with no finished run is left out of its task's mean, and the
    task is marked incomplete; the mean over tasks is given only when every task has a score."""
    runs = list(runs)
    out = MadScores()
    levels: dict[tuple[str, str], list[str]] = {}
    for r in runs:
        levels.setdefault((r.variant, r.task), [])
        if r.level not in levels[(r.variant, r.task)]:
            levels[(r.variant, r.task)].append(r.level)
        key = (r.variant, r.task, r.level)
        done, planned = out.counts.get((r.variant, r.task), (0, 0))
        out.counts[(r.variant, r.task)] = (done + (r.accuracy is not None), planned + 1)
        if r.accuracy is not None:
            out.best[key] = max(out.best.get(key, float("-inf")), r.accuracy)
    variants = list(dict.fromkeys(v for v, _ in levels))
    for (variant, task), names in levels.items():
        scored = [out.best[(variant, task, lv)] for lv in names if (variant, task, lv) in out.best]
        done, planned = out.counts[(variant, task)]
        out.complete[(variant, task)] = done == planned
        if scored:
            out.per_task.setdefault(variant, {})[task] = statistics.fmean(scored)
    for variant in variants:
        tasks = [t for v, t in levels if v == variant]
        scores = out.per_task.get(variant, {})
        if tasks and all(t in scores for t in tasks):
            out.overall[variant] = statistics.fmean(scores[t] for t in tasks)
    return out


def runs_of(
    exp: ExperimentConfig,
    store,
    levels: dict[str, list[dict[str, Any]]] | None = None,
    metric: str | None = None,
) -> list[MadRun]:
    """Every planned run of an expanded MAD experiment with its accuracy from the store:
    ``metric`` (default: the experiment's ``aggregate.metric``)."""
    from mixerzoo.studies.sweep.cells import collect_results

    res = collect_results(exp, store)
    metric = metric or exp.aggregate.metric
    labels = _level_labels(exp)
    out = []
    for cell in res.cells:
        data = cell.cell.get(LEVEL_AXIS, {})
        task = data.get("task", {}).get("name", "?")
        level = labels.get(json.dumps(data, sort_keys=True), "?")
        for planned, rec in zip(cell.planned, cell.records):
            done = rec is not None and rec.status == "finished"
            acc = rec.metrics.get(metric) if done else None
            out.append(
                MadRun(
                    variant=str(planned.point.get(VARIANT, exp.name)),
                    task=task,
                    level=level,
                    lr=planned.config.train.lr,
                    weight_decay=planned.config.train.weight_decay,
                    accuracy=float(acc) if isinstance(acc, (int, float)) else None,
                    finished=done,
                )
            )
    return out


def _level_labels(exp: ExperimentConfig) -> dict[str, str]:
    """A level's data section (as sorted JSON) -> its label (:func:`level_label` within its task)."""
    labels: dict[str, str] = {}
    by_task: dict[str, list[dict[str, Any]]] = {}
    for value in exp.grid.get(LEVEL_AXIS, []):
        by_task.setdefault(value["task"]["name"], []).append(value)
    for values in by_task.values():
        flat = [{**{k: v for k, v in d["task"].items() if k != "name"}, **_sizes(d)} for d in values]
        for i, d in enumerate(values):
            labels[json.dumps(d, sort_keys=True)] = level_label(flat, i)
    return labels


def _sizes(data: dict[str, Any]) -> dict[str, Any]:
    return {k: data[k] for k in ("n_train", "n_test") if k in data}


def _cell(variant: str, task: str, score: float | None, done: int, planned: int) -> dict[str, Any]:
    return {VARIANT: variant, TASK_AXIS: task, SCORE: score, RUNS_FINISHED: done, RUNS_PLANNED: planned}


def claim_cells(scores: MadScores) -> list[dict[str, Any]]:
    """MAD scores as claim cells: axes ``variant`` and ``data.task.name`` (``mean over tasks``);
    a cell's score is None until all its runs have finished."""
    cells = []
    for (variant, task), (done, planned) in scores.counts.items():
        score = scores.per_task.get(variant, {}).get(task) if done == planned else None
        cells.append(_cell(variant, task, score, done, planned))
    for variant in dict.fromkeys(v for v, _ in scores.counts):
        counts = [c for (v, _), c in scores.counts.items() if v == variant]
        done, planned = sum(c[0] for c in counts), sum(c[1] for c in counts)
        cells.append(
            _cell(variant, MEAN, scores.overall.get(variant) if done == planned else None, done, planned)
        )
    return cells
