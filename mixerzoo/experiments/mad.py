"""The MAD protocol (Poli et al. 2024, arXiv 2403.17844; mad-lab ``benchmark.py``, ``mad/analysis.py``).

Every MAD task is trained at each of its difficulty levels (``tasks/mad_levels.py``: MAD's
``configs/tasks/*.yml`` baseline plus one change at a time of sequence length, vocabulary,
training-set size, noise ratio, ...), each level over the 3 x 2 grid of learning rate
{1e-4, 5e-4, 1e-3} x weight decay {0, 0.1}. Then, as ``mad/analysis.py`` does::

    best(task, level) = max over (lr, wd) of the test accuracy      # subset_..._to_best_sweep_runs
    MAD score(task)   = mean over levels of best(task, level)      # compute_model_mad_scores
    MAD score         = mean over tasks                            # benchmark.py "Mean across Tasks"

From the command line (the experiment file is ``configs/mad.yaml``; ``--set`` picks the model)::

    mixerzoo run mad --preset quick --set model=attention     # a variant of mad.yaml or a mixer name
    mixerzoo run mad --preset quick --set model=gla --set model.d_model=64
    mixerzoo report mad --set model=attention --json          # per-task MAD scores, their mean, claims

From Python, for a mixer that mixerzoo does not ship (register it in this process first)::

    from mixerzoo.experiments.mad import score_mad
    scores = score_mad({"mixer": "my_mixer"}, preset="quick", results="results-mad")
    scores.overall["custom"], scores.per_task["custom"]

Runs go through the sweep layer (``sweep.py``): resumable, local or Ray, one record per config
hash in the results store. The experiment file stays a plain experiment (its ``data.task.name``
axis lists the tasks); :func:`mad_experiment` replaces that axis by one ``data`` value per
(task, level), so a level's training-set size (``data.n_train``) travels with its task
parameters.
"""

from __future__ import annotations

import copy
import html
import json
import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mixerzoo.config import load_config_file
from mixerzoo.experiments.claims import RUNS_FINISHED, RUNS_PLANNED, evaluate_claims
from mixerzoo.experiments.experiment_config import (
    VARIANT,
    ExperimentConfig,
    load_experiment,
    resolve_experiment_path,
)
from mixerzoo.params import validate
from mixerzoo.registry import ConfigError, short_repr

MAD_TASKS = (
    "mad_in_context_recall",
    "mad_fuzzy_recall",
    "mad_noisy_recall",
    "mad_selective_copy",
    "mad_compression",
    "mad_memorization",
)
LEARNING_RATES = (1e-4, 5e-4, 1e-3)  # mad/configs.py make_benchmark_mad_configs
WEIGHT_DECAYS = (0.0, 0.1)
TASK_AXIS = "data.task.name"
LEVEL_AXIS = "data"  # after expansion: one data section per (task, level)
SCORE = "mad_score"
MEAN = "mean over tasks"
#: levels per task in each preset: the first n of ``MAD_LEVELS[task]`` (baseline first); None = all
PRESET_LEVELS: dict[str, int | None] = {"quick": 2, "paper": None}
#: keys of a level that belong to the data section, not to the task's parameters
DATA_KEYS = {
    "n_train": "n_train",
    "num_train_examples": "n_train",
    "n_test": "n_test",
    "num_test_examples": "n_test",
}


def default_levels() -> dict[str, list[dict[str, Any]]]:
    """``MAD_LEVELS`` of ``tasks/mad_levels.py``: task -> its levels (baseline first)."""
    from mixerzoo.tasks.mad_levels import MAD_LEVELS

    return MAD_LEVELS


def level_data(base_data: dict[str, Any], task: str, level: dict[str, Any]) -> dict[str, Any]:
    """A level -> a data section: training/test-set sizes to ``data``, the rest to the task spec."""
    data = copy.deepcopy(base_data)
    params = {k: v for k, v in level.items() if k not in DATA_KEYS and k != "name"}
    data["task"] = {"name": task, **params}
    for key, value in level.items():
        if key in DATA_KEYS:
            data[DATA_KEYS[key]] = value
    return data


def level_label(task_levels: list[dict[str, Any]], i: int) -> str:
    """``baseline`` for the first level, else the keys where level i differs from it (``seq_len=256``)."""
    if i == 0:
        return "baseline"
    base, level = task_levels[0], task_levels[i]
    changed = [f"{k}={v}" for k, v in level.items() if base.get(k) != v]
    return " ".join(changed) or f"level {i}"


# -- --set: overrides of an experiment ---------------------------------------------------
def load_with_sets(
    name_or_path: str | Path | dict[str, Any], preset: str, sets: dict[str, Any] | None = None
) -> ExperimentConfig:
    """An experiment with a preset and ``--set`` overrides (any experiment, not only MAD's).

    * ``model=NAME``: keep only the variant NAME, or, when the file has no such variant and NAME
      is a registered sequence mixer, one variant NAME that sets ``model.mixer`` to it;
    * ``model={...}`` (a YAML mapping): one variant ``custom`` merging it into ``base.model``;
    * ``PATH=VALUE`` (a dotted run-config path, e.g. ``model.d_model=64``): set at every run,
      after the preset, variants, grid and rules.
    """
    raw = (
        copy.deepcopy(name_or_path)
        if isinstance(name_or_path, dict)
        else load_config_file(resolve_experiment_path(name_or_path))
    )
    sets = dict(sets or {})
    if "model" in sets:
        raw = with_model(raw, sets.pop("model"))
    for key in sets:
        if "." not in key:
            raise ConfigError(
                f"--set {short_repr(key)}: expected model=NAME, model={{...}} or a dotted run-config "
                "path such as model.d_model or train.epochs"
            )
    exp = load_experiment(raw, preset=preset)
    if not sets:
        return exp
    out = exp.model_dump(mode="json")
    out["rules"] = [*out["rules"], *({"when": {}, "set": {k: v}} for k, v in sets.items())]
    out["presets"] = {p: {} for p in out["presets"]}  # applied already
    exp = validate(ExperimentConfig, out)
    try:
        exp.expand()  # a bad path or value is reported now, naming the --set
    except ConfigError as err:
        raise ConfigError(f"--set: {err}") from None
    return exp


def with_model(raw: dict[str, Any], value: Any) -> dict[str, Any]:
    """``--set model=...`` on an experiment file's raw dict (see :func:`load_with_sets`): the
    chosen variant (added when new) becomes every preset's only variant, so the file's claims
    still name its own variants."""
    out = copy.deepcopy(raw)
    variants: dict[str, Any] = dict(out.get("variants") or {})
    if isinstance(value, str):
        name = value
        if value not in variants:
            from mixerzoo.mixers import SEQUENCE_MIXERS

            if value not in SEQUENCE_MIXERS.names():
                allowed = ", ".join([*variants, *SEQUENCE_MIXERS.names()])
                raise ConfigError(
                    f"--set model={short_repr(value)}: not a variant of {out.get('name')!r} "
                    f"nor a sequence mixer; allowed: {allowed}"
                )
            variants[value] = {"model": {"mixer": value}}
    elif isinstance(value, dict):
        name = "custom"
        variants[name] = {"model": value}
    else:
        raise ConfigError(f"--set model={short_repr(value)}: expected a variant or mixer name, or a mapping")
    out["variants"] = variants
    presets = out.get("presets") if isinstance(out.get("presets"), dict) else {}
    for preset in presets.values():
        if isinstance(preset, dict):
            preset["variants"] = [name]
    return out


# -- the expanded experiment -----------------------------------------------------------
def is_mad(name_or_path: str | Path) -> bool:
    """True for the shipped ``mad`` experiment and files named ``mad*.yaml`` whose task axis is MAD's."""
    try:
        raw = load_config_file(resolve_experiment_path(name_or_path))
    except ConfigError:
        return False
    tasks = (raw.get("grid") or {}).get(TASK_AXIS) if isinstance(raw, dict) else None
    return str(raw.get("name", "")).startswith("mad") and isinstance(tasks, list) and bool(tasks)


def mad_experiment(
    name_or_path: str | Path | dict[str, Any] = "mad",
    preset: str = "quick",
    sets: dict[str, Any] | None = None,
    levels: dict[str, list[dict[str, Any]]] | None = None,
    n_levels: int | None | str = "preset",
) -> ExperimentConfig:
    """The MAD experiment with ``preset`` and ``--set`` overrides, its task axis expanded into levels.

    ``levels``: task -> levels (default ``MAD_LEVELS``); ``n_levels``: keep the first n levels of
    each task (default: :data:`PRESET_LEVELS` of the preset; None: all).
    """
    exp = load_with_sets(name_or_path, preset, sets)
    if TASK_AXIS not in exp.grid:
        raise ConfigError(f"{exp.name}: a MAD experiment sweeps {TASK_AXIS!r} over MAD tasks (grid)")
    levels = default_levels() if levels is None else levels
    keep = PRESET_LEVELS.get(preset) if n_levels == "preset" else n_levels
    out = exp.model_dump(mode="json", exclude_defaults=False)
    base_data = out["base"].get("data", {})
    values = []
    for task in exp.grid[TASK_AXIS]:
        if task not in levels:
            raise ConfigError(
                f"{exp.name}: task {task!r} has no MAD levels; tasks with levels: {', '.join(levels)}"
            )
        task_levels = levels[task] if keep is None else levels[task][:keep]
        values += [level_data(base_data, task, lv) for lv in task_levels]
    grid = {LEVEL_AXIS: values, **{k: v for k, v in out["grid"].items() if k != TASK_AXIS}}
    out["grid"] = grid
    out["figure"] = {
        "x": VARIANT if exp.variants else "train.lr",
        "panels": None,
        "rows": None,
        "lines": None,
    }
    out["presets"] = {p: {} for p in out["presets"]}  # applied already
    try:
        return validate(ExperimentConfig, out)
    except ConfigError as err:
        raise ConfigError(f"{exp.name} (MAD levels): {err}") from None


# -- scores -----------------------------------------------------------------------------
@dataclass(frozen=True)
class MadRun:
    """One training run of the protocol (accuracy None: not finished)."""

    variant: str
    task: str
    level: str
    lr: float
    weight_decay: float
    accuracy: float | None


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
    exp: ExperimentConfig, store, levels: dict[str, list[dict[str, Any]]] | None = None
) -> list[MadRun]:
    """Every planned run of an expanded MAD experiment with its accuracy from the store."""
    from mixerzoo.experiments.plots import collect_results

    res = collect_results(exp, store)
    metric = exp.aggregate.metric
    labels: dict[str, str] = {}
    by_task: dict[str, list[dict[str, Any]]] = {}
    for value in exp.grid.get(LEVEL_AXIS, []):
        by_task.setdefault(value["task"]["name"], []).append(value)
    for values in by_task.values():
        flat = [{**{k: v for k, v in d["task"].items() if k != "name"}, **_sizes(d)} for d in values]
        for i, d in enumerate(values):
            labels[json.dumps(d, sort_keys=True)] = level_label(flat, i)
    out = []
    for cell in res.cells:
        data = cell.cell.get(LEVEL_AXIS, {})
        task = data.get("task", {}).get("name", "?")
        level = labels.get(json.dumps(data, sort_keys=True), "?")
        for planned, rec in zip(cell.planned, cell.records):
            acc = rec.metrics.get(metric) if rec is not None and rec.status == "finished" else None
            out.append(
                MadRun(
                    variant=str(planned.point.get(VARIANT, exp.name)),
                    task=task,
                    level=level,
                    lr=planned.config.train.lr,
                    weight_decay=planned.config.train.weight_decay,
                    accuracy=float(acc) if isinstance(acc, (int, float)) else None,
                )
            )
    return out


def _sizes(data: dict[str, Any]) -> dict[str, Any]:
    return {k: data[k] for k in ("n_train", "n_test") if k in data}


def claim_cells(scores: MadScores) -> list[dict[str, Any]]:
    """MAD scores as claim cells: axes ``variant`` and ``data.task.name`` (``mean over tasks``)."""
    cells = []
    for (variant, task), (done, planned) in scores.counts.items():
        cells.append(
            {
                VARIANT: variant,
                TASK_AXIS: task,
                SCORE: scores.per_task.get(variant, {}).get(task) if done == planned else None,
                RUNS_FINISHED: done,
                RUNS_PLANNED: planned,
            }
        )
    for variant in dict.fromkeys(v for v, _ in scores.counts):
        counts = [c for (v, _), c in scores.counts.items() if v == variant]
        done, planned = sum(c[0] for c in counts), sum(c[1] for c in counts)
        cells.append(
            {
                VARIANT: variant,
                TASK_AXIS: MEAN,
                SCORE: scores.overall.get(variant) if done == planned else None,
                RUNS_FINISHED: done,
                RUNS_PLANNED: planned,
            }
        )
    return cells


def mad_report(exp: ExperimentConfig, store, preset: str | None = None) -> dict[str, Any]:
    """What ``mixerzoo report mad --json`` prints: MAD scores per task and overall, and the claims."""
    runs = runs_of(exp, store)
    scores = score_runs(runs)
    claims = evaluate_claims(exp.claims, claim_cells(scores), SCORE, axes=[VARIANT, TASK_AXIS])
    return {
        "experiment": exp.name,
        "preset": preset,
        "paper": exp.paper,
        "runs": {"finished": sum(r.accuracy is not None for r in runs), "planned": len(runs)},
        "protocol": {
            "learning_rates": sorted({r.lr for r in runs}),
            "weight_decays": sorted({r.weight_decay for r in runs}),
            "metric": exp.aggregate.metric,
            "levels_per_task": {
                t: len({r.level for r in runs if r.task == t}) for t in dict.fromkeys(r.task for r in runs)
            },
        },
        "variants": list(dict.fromkeys(v for v, _ in scores.counts)),
        "mad_scores": scores.as_json(),
        "claims": claims,
    }


def score_lines(payload: dict[str, Any]) -> list[str]:
    """The text table of ``mixerzoo report mad``: one line per variant, per-task scores and the mean."""
    per_task, overall = payload["mad_scores"]["per_task"], payload["mad_scores"]["overall"]
    tasks = list(payload["protocol"]["levels_per_task"])
    lines = [
        "variant".ljust(28) + "".join(t.removeprefix("mad_")[:14].rjust(15) for t in tasks) + "MAD".rjust(9)
    ]
    variants = list(dict.fromkeys([*payload.get("variants", []), *per_task, *overall]))
    for v in variants:
        row = "".join((f"{per_task[v][t]:.3f}" if t in per_task.get(v, {}) else "–").rjust(15) for t in tasks)
        lines.append(v[:27].ljust(28) + row + (f"{overall[v]:.3f}" if v in overall else "–").rjust(9))
    runs = payload["runs"]
    lines.append(f"runs finished: {runs['finished']}/{runs['planned']} (– : no finished run yet)")
    return lines


def write_mad_report(payload: dict[str, Any], out: str | Path) -> Path:
    """A one-file HTML page: the MAD score table, the claims, the best accuracy per level."""
    from mixerzoo.experiments.report import STYLE, claims_table

    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tasks = list(payload["protocol"]["levels_per_task"])
    per_task, overall = payload["mad_scores"]["per_task"], payload["mad_scores"]["overall"]
    head = "".join(f"<th>{html.escape(t)}</th>" for t in tasks)
    rows = [f"<table><tr><th class='l'>variant</th>{head}<th>MAD score</th></tr>"]
    for v in dict.fromkeys([*per_task, *overall]):
        cells = "".join(
            f"<td>{per_task[v][t]:.4f}</td>" if t in per_task.get(v, {}) else "<td>–</td>" for t in tasks
        )
        mean = f"{overall[v]:.4f}" if v in overall else "–"
        rows.append(f"<tr><td class='l'>{html.escape(v)}</td>{cells}<td>{mean}</td></tr>")
    rows.append("</table>")
    lv = [
        "<table><tr><th class='l'>variant</th><th class='l'>task</th>"
        "<th class='l'>level</th><th>best</th></tr>"
    ]
    for r in payload["mad_scores"]["levels"]:
        lv.append(
            f"<tr><td class='l'>{html.escape(r['variant'])}</td><td class='l'>{html.escape(r['task'])}</td>"
            f"<td class='l'>{html.escape(r['level'])}</td><td>{r['best_accuracy']:.4f}</td></tr>"
        )
    lv.append("</table>")
    proto = payload["protocol"]
    name, preset = html.escape(payload["experiment"]), html.escape(str(payload["preset"]))
    page = f"""<!doctype html>
<html><head><meta charset="utf-8"><title>{name}</title><style>{STYLE}</style></head>
<body><h1>{name} <small>(preset {preset})</small></h1>
<p>Source: {html.escape(payload["paper"])}. MAD score = mean over a task's levels of the best
{html.escape(proto["metric"])} over lr {proto["learning_rates"]} x weight decay {proto["weight_decays"]};
runs finished {payload["runs"]["finished"]}/{payload["runs"]["planned"]}.</p>
<h2>Claims</h2>{claims_table(payload["claims"])}
<h2>MAD scores</h2>{"".join(rows)}
<h2>Best run per level</h2>{"".join(lv)}
</body></html>
"""
    out.write_text(page)
    return out


# -- Python API --------------------------------------------------------------------------
def score_mad(
    model: dict[str, Any] | str,
    preset: str = "quick",
    results: str | Path | None = None,
    sets: dict[str, Any] | None = None,
    levels: dict[str, list[dict[str, Any]]] | None = None,
    n_levels: int | None | str = "preset",
    workers: int = 1,
    progress: bool = False,
    experiment: str | Path | dict[str, Any] = "mad",
) -> MadScores:
    """Run the MAD protocol for one model and return its scores (resumable through ``results``).

    ``model``: a mad.yaml variant or sequence-mixer name, or a mapping merged into the file's
    ``base.model`` (e.g. ``{"mixer": "my_mixer", "d_model": 64}``). A mixer defined outside
    mixerzoo is scored after registering it in this process
    (``SEQUENCE_MIXERS.register("my_mixer")(MyMixer)``); keep ``workers=1`` then, since worker
    processes would not see the registration. ``sets``: further ``--set`` overrides.
    """
    from mixerzoo.experiments.results_store import ResultsStore
    from mixerzoo.experiments.sweep import run_sweep

    exp = mad_experiment(experiment, preset, {"model": model, **(sets or {})}, levels, n_levels)
    store = ResultsStore(results)
    run_sweep(exp, store, executor="local", workers=workers, progress=progress)
    return score_runs(runs_of(exp, store))


def plot_mad(payload: dict[str, Any], out_dir: str | Path) -> list[Path]:
    """A bar chart of the MAD scores (one group per task, one bar per variant): PNG and SVG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    per_task, overall = payload["mad_scores"]["per_task"], payload["mad_scores"]["overall"]
    tasks = [*payload["protocol"]["levels_per_task"], MEAN]
    variants = list(dict.fromkeys([*payload.get("variants", []), *per_task, *overall]))
    fig, ax = plt.subplots(figsize=(max(6.0, 1.4 * len(tasks)), 3.5))
    width = 0.8 / max(len(variants), 1)
    for i, v in enumerate(variants):
        ys = [overall.get(v) if t == MEAN else per_task.get(v, {}).get(t) for t in tasks]
        xs = [j + i * width for j in range(len(tasks))]
        ax.bar(xs, [y if y is not None else 0.0 for y in ys], width, label=v)
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(tasks))])
    ax.set_xticklabels([t.removeprefix("mad_") for t in tasks], rotation=20, fontsize=8)
    ax.set_ylim(0, 1)
    ax.set_ylabel("MAD score")
    ax.set_title(f"{payload['experiment']} ({payload['preset']})", fontsize=9)
    if variants:
        ax.legend(fontsize=7)
    fig.tight_layout()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / f"{payload['experiment']}.png", out / f"{payload['experiment']}.svg"]
    for p in paths:
        fig.savefig(p)
    plt.close(fig)
    return paths
