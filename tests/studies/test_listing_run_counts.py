"""``study list`` counts a sweep's runs without planning them (``studies/sweep/run_count.py``):
the count equals the number of runs the plan holds, for every shipped study and for grids whose
rules, exclusions, variants and repeated values make two grid points one run."""

from __future__ import annotations

import copy

import pytest

from mixerzoo.studies.dispatch import find_study
from mixerzoo.studies.files import shipped_kind
from mixerzoo.studies.kinds import of_family
from mixerzoo.studies.sweep.config import load_experiment, shipped_experiments
from mixerzoo.studies.sweep.run_count import count_planned

CASES = [
    pytest.param(name, preset, id=f"{name}-{preset}")
    for name, path in shipped_experiments().items()
    if shipped_kind(path) in of_family("grid")
    for preset in find_study(name).file().presets
]

BASE = {
    "kind": "sweep",
    "name": "count-check",
    "claim": "paper: n/a",
    "base": {
        "data": {"task": {"name": "mqar_cat", "vocab_size": 30, "seq_len": 8}, "n_train": 32, "n_test": 16},
        "model": {"d_model": 16, "n_layers": 1, "mixer": "cat"},
        "train": {"epochs": 1, "batch_size": 16, "device": "cpu"},
    },
    "grid": {"data.task.seq_len": [8, 12], "train.lr": [1e-2, 3e-3, 1e-3]},
    "seeds": [0, 1],
    "presets": {"quick": {}, "paper": {}},
}


def experiment(**changes):
    raw = copy.deepcopy(BASE)
    raw.update(changes)
    return load_experiment(raw)


@pytest.mark.parametrize("name,preset", CASES)
def test_the_fast_count_is_the_number_of_planned_runs(name, preset):
    exp = find_study(name).load(preset)
    assert count_planned(exp) == len(exp.expand())


@pytest.mark.parametrize(
    "changes,runs",
    [
        ({}, 12),
        # a rule that sets the lr at seq_len 12 makes its three lrs one run (x 2 seeds)
        ({"rules": [{"when": {"data.task.seq_len": 12}, "set": {"train.lr": 0.5}}]}, 6 + 2),
        # a rule that rewrites the task over the seq_len axis: both lengths become one
        ({"rules": [{"when": {}, "set": {"data.task": {"name": "mqar_cat", "seq_len": 8}}}]}, 6),
        # a rule on a config value that is no axis
        ({"rules": [{"when": {"model.d_model": 16}, "set": {"train.lr": 0.5}}]}, 4),
        ({"exclude": [{"data.task.seq_len": 12, "train.lr": 1e-2}]}, 10),
        ({"grid": {"data.task.seq_len": [8, 8, 12], "train.lr": [1e-2]}}, 4),
        # variants that differ only where an axis writes are the same runs
        (
            {
                "variants": {"a": {"model": {"d_model": 16}}, "b": {"model": {"d_model": 32}}},
                "grid": {"model.d_model": [8, 24]},
            },
            4,
        ),
        ({"variants": {"a": {"model": {"mixer": "cat"}}, "b": {"model": {"mixer": "attention"}}}}, 24),
        # a written path through a bare mixer name: counted on whole configs
        ({"grid": {"model.mixer.name": ["cat", "attention"]}}, 4),
    ],
)
def test_the_fast_count_sees_points_that_are_one_run(changes, runs):
    exp = experiment(**changes)
    assert len(exp.expand()) == runs
    assert count_planned(exp) == runs
