"""One mixer's whole scorecard: every item of the battery trained (resumable through the results
store), MAD's six tasks, the efficiency columns, and the card read back with its provenance.

    cand = candidate("gla")
    card = run_card(cand, load_battery(), "quick", ResultsStore("results"), log=print)
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import platform
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mixerzoo.store.results import ResultsStore
from mixerzoo.studies.scorecard.battery import Battery, MadItem, narrowed_grid
from mixerzoo.studies.scorecard.candidate import Candidate, inference_state
from mixerzoo.studies.scorecard.items import Score, read_item, run_item

#: the folder of a results store where a scorecard's efficiency measurements are kept
EFFICIENCY_DIR = "scorecard"


@dataclass
class Card:
    """A mixer's scores: ``scores`` per item key (``mad`` included), ``efficiency``, provenance."""

    label: str
    given: Any
    preset: str
    scores: dict[str, Score] = field(default_factory=dict)
    efficiency: dict[str, Any] | None = None
    wall_s: float = 0.0
    made: dict[str, Any] = field(default_factory=dict)
    stale: list[str] = field(default_factory=list)  # columns made by other code or recipe than this

    def as_dict(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "given": self.given,
            "preset": self.preset,
            "scores": {k: s.as_dict() for k, s in self.scores.items()},
            "efficiency": self.efficiency,
            "wall_s": self.wall_s,
            "made": self.made,
        }

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> Card:
        scores = {}
        for key, s in raw.get("scores", {}).items():
            s = {k: v for k, v in s.items() if k != "learned"}
            scores[key] = Score(**s)
        return cls(
            label=raw["label"],
            given=raw.get("given"),
            preset=raw["preset"],
            scores=scores,
            efficiency=raw.get("efficiency"),
            wall_s=raw.get("wall_s", 0.0),
            made=raw.get("made", {}),
        )


def machine() -> dict[str, Any]:
    """Where a card was made: the machine and the date, as references record it. The CPU's vector
    instructions are named: the same run on another CPU kind rounds differently, and a cell near a
    learning threshold can end on either side of it."""
    import torch

    simd = torch.backends.cpu.get_cpu_capability()
    return {
        "date": datetime.date.today().isoformat(),
        "machine": f"{platform.machine()} ({simd}), {os.cpu_count()} CPU cores, torch {torch.__version__}",
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
    }


def run_card(
    cand: Candidate,
    battery: Battery,
    preset: str,
    store: ResultsStore,
    log=print,
    efficiency: bool = True,
    progress: bool = False,
    done: dict[str, Score] | None = None,
    on_item: Callable[[Card], Any] | None = None,
    workers: int = 1,
) -> Card:
    """Train everything ``cand``'s card needs that ``store`` lacks, then read the card; with
    ``progress``, each item's bar (on stderr) shows the training run's step. ``done``: items
    already scored elsewhere (an earlier rebuild's partial card), taken as they are; ``on_item``:
    called with the card so far after each item (with several ``workers``: once all have trained).
    ``workers`` > 1: every item's runs together in one pool of that many processes, the
    longest first, each process with its share of the cores (:func:`train_together`)."""
    spec = battery.preset(preset)
    done = done or {}
    t0 = time.perf_counter()
    steps = [*spec.items, *([spec.mad] if spec.mad else [])]
    keys = [s.key if not isinstance(s, MadItem) else "mad" for s in steps]
    if workers > 1:
        train_together([(cand, [k for k in keys if k not in done])], battery, preset, store, workers, log)
        if on_item is not None:
            on_item(_with_done(read_card(cand, battery, preset, store), done))
    else:
        for i, (item, key) in enumerate(zip(steps, keys), 1):
            log(f"[{i}/{len(steps) + bool(spec.efficiency)}] {cand.label}: {key}{' (kept)' * (key in done)}")
            if key in done:
                continue
            if isinstance(item, MadItem):
                _run_mad(cand, item, preset, store, progress)
            else:
                run_item(item, preset, cand, store, log=_quiet(log), progress=progress)
            if on_item is not None:
                on_item(_with_done(read_card(cand, battery, preset, store), done))
    if spec.efficiency is not None and efficiency:
        log(f"[{len(steps) + 1}/{len(steps) + 1}] {cand.label}: efficiency")
        _efficiency(cand, battery, preset, store, log)
    card = _with_done(read_card(cand, battery, preset, store), done)
    card.wall_s = round(time.perf_counter() - t0 + sum(s.wall_s for s in done.values()), 1)
    return card


def train_together(
    wanted: list[tuple[Candidate, list[str]]],
    battery: Battery,
    preset: str,
    store: ResultsStore,
    workers: int,
    log,
) -> None:
    """The runs of the items each candidate of ``wanted`` lists (``mad``: MAD's six tasks) not yet
    finished in ``store``, trained in one local pool of ``workers`` processes, the costliest first
    (planned training tokens times FLOPs per token), so that the last run to start is a short one.
    Several candidates (a rebuild of several references) share the pool: no core waits while one
    mixer's last long run finishes."""
    from mixerzoo.studies.scorecard.items import item_experiment, tag
    from mixerzoo.studies.sweep.cost import planned_flops
    from mixerzoo.studies.sweep.runner import run_sweeps

    spec, sweeps = battery.preset(preset), []
    for cand, keys in wanted:
        sweeps += [(item_experiment(i, preset, cand), tag(i, cand)) for i in spec.items if i.key in keys]
        if spec.mad is not None and "mad" in keys:
            sweeps.append((mad_item_experiment(cand, spec.mad, preset), f"scorecard/mad/{cand.label}"))
    if not sweeps:
        return
    who = wanted[0][0].label if len(wanted) == 1 else f"{len(wanted)} mixers"
    log(f"{who}: {len(sweeps)} items trained together in {workers} worker processes")
    run_sweeps(
        sweeps,
        store,
        workers,
        log=_quiet(log),
        order=lambda p: planned_flops(p.config),
    )


def default_workers() -> int:
    """The scorecard's worker processes when none are asked for: one per CPU core on a machine
    without a GPU (each run then uses one core: on 2 cores, two one-thread runs at once trained
    1.4 to 1.95 times as fast as one two-thread run after the other, docs/measurements.md), one
    with a GPU."""
    import torch

    return 1 if torch.cuda.is_available() else max(1, os.cpu_count() or 1)


def _with_done(card: Card, done: dict[str, Score]) -> Card:
    """``card`` with the items scored elsewhere where this store holds none of their runs."""
    for key, score in done.items():
        if card.scores.get(key) is None or card.scores[key].value is None:
            card.scores[key] = score
    return card


def _quiet(log):
    """A sweep's lines, indented under the item's line."""
    return lambda line: log(f"  {line}")


def read_card(cand: Candidate, battery: Battery, preset: str, store: ResultsStore) -> Card:
    """The card from what ``store`` holds (items not yet trained have no value)."""
    spec = battery.preset(preset)
    card = Card(cand.label, cand.given, preset, made=machine())
    for item in spec.items:
        score = read_item(item, preset, cand, store)
        seq_len = _seq_len(item, preset, cand)
        if seq_len is not None:
            model = _item_model(item, preset, cand)
            score.state, score.fixed_state = inference_state(model, seq_len)
        card.scores[item.key] = score
    if spec.mad is not None:
        card.scores["mad"] = _read_mad(cand, spec.mad, preset, store)
    card.efficiency = _stored_efficiency(cand, preset, store)
    card.wall_s = round(sum(s.wall_s for s in card.scores.values()), 1)
    return card


def _item_model(item, preset: str, cand: Candidate) -> dict[str, Any]:
    from mixerzoo.studies.scorecard.items import planned_configs

    cfg = planned_configs(item, preset, cand)[0]
    return cfg.model.model_dump(mode="json")


def _seq_len(item, preset: str, cand: Candidate) -> int | None:
    from mixerzoo.studies.scorecard.items import planned_configs

    seq_len = planned_configs(item, preset, cand)[0].data.task.params.get("seq_len")
    return seq_len if isinstance(seq_len, int) else None


# -- MAD ------------------------------------------------------------------------------------
def mad_item_experiment(cand: Candidate, mad: MadItem, preset: str):
    from mixerzoo.studies.mad.levels import mad_experiment

    sets = {"model": cand.model, **mad.sets}
    exp = mad_experiment(mad.study, preset, sets, n_levels=mad.n_levels, normalise=mad.normalise)
    return narrowed_grid(exp, mad.grid) if mad.grid else exp


def _run_mad(cand: Candidate, mad: MadItem, preset: str, store: ResultsStore, progress: bool = False) -> None:
    from mixerzoo.studies.sweep.runner import run_sweep

    exp = mad_item_experiment(cand, mad, preset)
    run_sweep(exp, store, experiment_tag=f"scorecard/mad/{cand.label}", progress=progress, log=lambda _: None)


def _read_mad(cand: Candidate, mad: MadItem, preset: str, store: ResultsStore) -> Score:
    """The MAD score (mean over tasks of the best run per level) with the error of that mean."""
    from mixerzoo.claims.noise import mean_error, standard_error
    from mixerzoo.studies.mad import runs_of, score_runs
    from mixerzoo.studies.scorecard.items import planned_hashes
    from mixerzoo.studies.sweep.cells import collect_results

    exp = mad_item_experiment(cand, mad, preset)
    runs = runs_of(exp, store)
    scores = score_runs(runs)
    score = Score("mad", "mad", "mad_score", planned=len(runs), finished=sum(r.finished for r in runs))
    score.configs = planned_hashes(exp)
    records = [r for c in collect_results(exp, store).cells for r in c.records if r is not None]
    score.wall_s = round(sum(r.wall_s or 0.0 for r in records), 1)
    score.fingerprints = sorted({r.code for r in records if r.code and r.status == "finished"})
    if not scores.overall:
        return score
    (per_task,) = scores.per_task.values()
    n_test = exp.expand()[0].config.data.n_test
    errors = [standard_error({"accuracy": v, "n_test": n_test}, "accuracy") for v in per_task.values()]
    score.value, score.se = next(iter(scores.overall.values())), mean_error(errors)
    score.n_test, score.seeds = n_test, 1
    score.extra = {task.removeprefix("mad_"): v for task, v in per_task.items()}
    return score


# -- efficiency -----------------------------------------------------------------------------
def _efficiency_path(cand: Candidate, preset: str, store: ResultsStore) -> Path:
    """Where the measurement of ``cand``'s model is kept: named by the model mapping, not the row's
    label, so that ``--name`` finds a measurement under another name and two models never share one."""
    digest = hashlib.sha256(json.dumps(cand.model, sort_keys=True, default=str).encode()).hexdigest()[:16]
    return Path(store.root) / EFFICIENCY_DIR / "efficiency" / f"{preset}-{digest}.json"


def _efficiency(cand: Candidate, battery: Battery, preset: str, store: ResultsStore, log) -> None:
    """Measure once per mixer code: a stored measurement by the same code is kept."""
    from mixerzoo.store.fingerprint import code_fingerprint
    from mixerzoo.studies.scorecard.efficiency import measure
    from mixerzoo.studies.verdict_log import write_atomic

    code = code_fingerprint({"model": cand.model})
    held = _stored_efficiency(cand, preset, store)
    if held is not None and held.get("code") == code:
        return
    result = {**measure(cand, battery.preset(preset).efficiency, log=_quiet(log)), "code": code}
    path = _efficiency_path(cand, preset, store)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps(result, indent=1))


def _stored_efficiency(cand: Candidate, preset: str, store: ResultsStore) -> dict[str, Any] | None:
    path = _efficiency_path(cand, preset, store)
    return json.loads(path.read_text()) if path.is_file() else None
