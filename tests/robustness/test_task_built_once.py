"""A value is resolved once: a run builds its task once (plus once per test length), not 3-5 times.

Before the fix, validating a run config built the task in ``DataConfig``'s check, again when
``RunConfig`` filled the model's defaults (validating the data a second time), again for
``max_len``, and ``train()`` and ``evaluate_lengths`` each built it once more.
"""

from __future__ import annotations

import collections

import pytest

from mixerzoo.config import load_run_config
from mixerzoo.evaluation.length_generalization import evaluate_lengths
from mixerzoo.tasks import TASKS
from mixerzoo.training import train

RUN = {
    "data": {"task": {"name": "mqar_cat", "vocab_size": 30, "seq_len": 8}, "n_train": 32, "n_test": 16},
    "model": {"d_model": 16, "n_layers": 1, "mixer": "cat"},
    "train": {"epochs": 1, "batch_size": 32},
}


@pytest.fixture
def constructions(monkeypatch):
    """Counts ``Task.__init__`` calls by the seq_len they were built with."""
    counts: collections.Counter = collections.Counter()
    cls = TASKS.get("mqar_cat")
    real_init = cls.__init__

    def counting_init(self, **params):
        counts[params.get("seq_len")] += 1
        real_init(self, **params)

    monkeypatch.setattr(cls, "__init__", counting_init)
    return counts


def test_a_run_builds_its_task_once(constructions):
    cfg = load_run_config(RUN)
    assert constructions == {8: 1}
    train(cfg, progress=False)
    assert constructions == {8: 1}


def test_each_test_length_is_built_once(constructions):
    cfg = load_run_config({**RUN, "data": {**RUN["data"], "test_seq_lens": [8, 16, 32]}})
    assert cfg.model.max_len == 32
    result = train(cfg, progress=False)
    metrics = evaluate_lengths(result.model, cfg)
    assert set(metrics) >= {"accuracy@8", "accuracy@16", "accuracy@32"}
    assert constructions == {8: 1, 16: 1, 32: 1}  # test length 8 is the training task itself


def test_the_built_task_is_reused_and_equal_to_a_fresh_one():
    from mixerzoo.tasks import build_task

    cfg = load_run_config(RUN)
    assert cfg.data.build_task() is cfg.data.build_task()
    fresh = build_task("mqar_cat", vocab_size=30, seq_len=8)
    a, b = cfg.data.build_task().make(4, 3, "test"), fresh.make(4, 3, "test")
    assert (a.inputs == b.inputs).all() and (a.labels == b.labels).all()
