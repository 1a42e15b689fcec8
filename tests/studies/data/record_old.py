"""Record results without training and report them with the mixerzoo before the study redesign.

Run from the repository root against a copy of that version (see README.md in this folder)::

    PYTHONPATH=/tmp/pre .venv/bin/python tests/studies/data/record_old.py tests/studies/data

It writes ``recorded/`` (the results: made-up but plausible run metrics, a language-model
study's held-out losses, a probe study's pairwise distances, and the cells of one computed
result measured by running it) and ``old/`` (what that version's ``mixerzoo report NAME --json``
printed from them, and the result files its ``mixerzoo theory run`` wrote).
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import sys
import tempfile
from importlib import import_module
from pathlib import Path

SWEEP, SWEEP_PRESET = "zoology-input-dependent", "quick"
MAD_SET = "model=attention"
COMPUTED, LM, PROBE = "zoology-baseconv-primitives", "icll-lm-ngram-heads", "icll-fig5"

#: best test accuracy per variant (one run each in the quick preset)
SWEEP_ACCURACY = {"base_conv": 0.4125, "programmatic": 0.9725, "attention-hybrid": 0.3850}
#: mean held-out loss (nats per character) and parameters of each model of the LM study
LM_LOSS = {
    "transformer": 1.6234,
    "transformer+ngh111": 1.6031,
    "transformer+ngh123": 1.5512,
    "gla": 1.7048,
    "gla+ngh123": 1.6817,
}
LM_PARAMS = {"transformer": 104512, "transformer+ngh111": 106688, "transformer+ngh123": 108864}
LM_PARAMS |= {"gla": 99136, "gla+ngh123": 103488}
#: the probe study's predictors and their pairwise TVD (upper triangle, row by row)
PROBE_NAMES = ["TF", "TF/2", "1-gram", "2-gram", "3-gram", "LNW", "LNW_r", "BW", "DFA"]
PROBE_TVD = [
    [0.214, 0.561, 0.302, 0.258, 0.233, 0.187, 0.344, 0.391],
    [0.498, 0.221, 0.276, 0.265, 0.249, 0.367, 0.402],
    [0.512, 0.547, 0.489, 0.503, 0.566, 0.601],
    [0.149, 0.183, 0.201, 0.322, 0.358],
    [0.172, 0.169, 0.298, 0.331],
    [0.094, 0.311, 0.342],
    [0.305, 0.337],
    [0.176],
]


#: a command in today's form -> its form in a version from before ``mixerzoo study``
EARLIER_FORMS = {("study", "run"): ["theory", "run"], ("study", "report"): ["report"]}


def cli(argv: list[str]) -> str:
    """The ``mixerzoo`` command ``argv`` (today's form) in this process; its stdout. A version
    without ``mixerzoo study`` runs the form it had (:data:`EARLIER_FORMS`)."""
    from mixerzoo.cli.main import cli as group
    from mixerzoo.cli.main import main

    if "study" not in group.commands:
        argv = [*EARLIER_FORMS[tuple(argv[:2])], *argv[2:]]
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        try:
            main(argv)
        except SystemExit as exit_info:
            if exit_info.code not in (0, 1, None):  # 1: a claim not reproduced
                raise RuntimeError(f"mixerzoo {' '.join(argv)} exited {exit_info.code}") from None
    return out.getvalue()


def record_sweep() -> list[dict]:
    """One finished run per planned run of the sweep's quick preset, its metrics from the table."""
    from mixerzoo.studies.sweep.config import load_experiment

    runs = []
    for p in load_experiment(SWEEP, SWEEP_PRESET).expand():
        acc = SWEEP_ACCURACY[p.point["variant"]]
        metrics = {
            "accuracy_per_query": acc,
            "accuracy_per_seq": round(acc**4, 4),
            "loss": round(3 * (1 - acc), 4),
        }
        runs.append({"config_hash": p.config_hash, "name": p.config.name, "metrics": metrics})
    return runs


def mad_point(p, levels) -> dict:
    """A planned MAD run as (variant, task, level index, lr, weight decay): what identifies its
    results when the runs' configs (hence hashes) differ between versions."""
    data = p.point["data"]  # mad.LEVEL_AXIS: one data section per (task, level)
    task = data["task"]["name"]
    return {
        "variant": p.point["variant"],
        "task": task,
        "level": levels[task].index(data),
        "lr": p.point["train.lr"],
        "weight_decay": p.point["train.weight_decay"],
    }


def record_mad() -> list[dict]:
    """Every planned run of MAD's quick preset: a per-position accuracy that depends on task,
    level and learning rate, and a macro accuracy a little below it."""
    from mixerzoo.studies.mad import LEVEL_AXIS, mad_experiment

    exp = mad_experiment("mad", "quick", dict([MAD_SET.split("=")]))
    levels: dict[str, list] = {}
    for value in exp.grid[LEVEL_AXIS]:
        levels.setdefault(value["task"]["name"], []).append(value)
    runs = []
    for i, p in enumerate(exp.expand()):
        point = mad_point(p, levels)
        t = list(levels).index(point["task"])
        acc = 0.95 - 0.12 * t - 0.08 * point["level"] - 150 * abs(point["lr"] - 5e-4) - 0.01 * (i % 3)
        acc = round(max(acc, 0.05), 4)
        metrics = {"accuracy_per_query": acc, "accuracy_macro": round(acc * 0.93, 4)}
        runs.append({**point, "metrics": metrics})  # its config hash differs between versions
    return runs


def fill_store(store, planned_by_hash: dict, runs: list[dict], experiment: str) -> None:
    for r in runs:
        p = planned_by_hash[r["config_hash"]]
        config = p.config.model_dump(mode="json")
        run_id = store.start_run(config, p.config_hash, name=p.config.name, experiment=experiment)
        store.finish_run(run_id, r["metrics"], wall_s=1.0, params=1000, checkpoint=None)


def patch_run(name: str, outcome) -> None:
    """The study's result module returns ``outcome`` instead of training or computing."""
    from mixerzoo.studies.computed.files import load_theory

    module = load_theory(name).module()
    module.run = lambda params, log=print: outcome(params, log)


def main(data: Path) -> None:
    from mixerzoo.store.results import ResultsStore
    from mixerzoo.studies.computed.files import load_theory
    from mixerzoo.studies.mad import mad_experiment
    from mixerzoo.studies.sweep.config import load_experiment

    recorded, old = data / "recorded", data / "old"
    for folder in (recorded, old):
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
    root = Path(tempfile.mkdtemp(prefix="record-old-"))
    store = ResultsStore(root)

    sweep_runs = record_sweep()
    planned = {p.config_hash: p for p in load_experiment(SWEEP, SWEEP_PRESET).expand()}
    fill_store(store, planned, sweep_runs, SWEEP)
    mad_runs = record_mad()
    mad = mad_experiment("mad", "quick", dict([MAD_SET.split("=")]))
    hashes = [p.config_hash for p in mad.expand()]  # record_mad lists the runs in this order
    mad_hashed = [{**r, "config_hash": h} for r, h in zip(mad_runs, hashes, strict=True)]
    fill_store(store, {p.config_hash: p for p in mad.expand()}, mad_hashed, mad.name)
    write(recorded / f"{SWEEP}.runs.json", sweep_runs)
    write(recorded / "mad.runs.json", mad_runs)

    # the computed result runs for real (well under a second); its outcome is kept as measured
    module = load_theory(COMPUTED).module()
    real = module.run
    captured = {}

    def computed(params, log):
        out = real(params, log=log)
        captured.update(axes=out.axes, metric=out.metric, cells=out.cells, lines=[list(x) for x in out.lines])
        return out

    patch_run(COMPUTED, computed)
    lm = {"loss": LM_LOSS, "unit": "char", "params": LM_PARAMS}
    lm_module = load_theory(LM).module()
    patch_run(LM, lambda params, log: lm_module.outcome_from(lm["loss"], lm["unit"], lm["params"], log))
    probe = probe_outcome()
    outcome = import_module("mixerzoo.theory.outcome").Outcome  # analysis/outcome.py later
    patch_run(PROBE, lambda params, log: outcome(**probe))
    for name in (COMPUTED, LM, PROBE):
        cli(["study", "run", name, "--preset", "quick", "--results", str(root)])
    write(recorded / f"{COMPUTED}.outcome.json", captured)
    write(recorded / f"{LM}.losses.json", lm)
    write(recorded / f"{PROBE}.outcome.json", probe)
    (old / "results").mkdir()
    shutil.copytree(root / "theory", old / "results" / "theory")

    report = ["study", "report", "--results", str(root), "--json"]
    reports = {
        SWEEP: cli([*report, SWEEP, "--preset", SWEEP_PRESET]),
        "mad": cli([*report, "mad", "--preset", "quick", "--set", MAD_SET]),
        **{name: cli([*report, name]) for name in (COMPUTED, LM, PROBE)},
    }
    for name, text in reports.items():
        write(old / f"{name}.report.json", json.loads(text))
    shutil.rmtree(root)


def probe_outcome() -> dict:
    cells = []
    for i, a in enumerate(PROBE_NAMES):
        for j, b in enumerate(PROBE_NAMES):
            if i != j:
                lo, hi = min(i, j), max(i, j)
                cells.append({"a": a, "b": b, "tvd": PROBE_TVD[lo][hi - lo - 1]})
    lines = [["closest to TF", "see the claims", "LNW_r 0.187, TF/2 0.214, 3-gram 0.233"]]
    return {"axes": ["a", "b"], "metric": "tvd", "cells": cells, "lines": lines}


def write(path: Path, payload) -> None:
    """JSON with one line per run (a list of runs) or indented (anything else)."""
    if isinstance(payload, list):
        path.write_text("[\n" + ",\n".join(json.dumps(r) for r in payload) + "\n]\n")
    else:
        path.write_text(json.dumps(payload, indent=1) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
