"""A dry run's expected wall time here (``studies/sweep/cost.py: wall_time_line``): the planned
steps are the training loop's own count, a model's steps are timed once and cached
(``training/step_times.py``), and a model the store has finished runs of is not timed again."""

from __future__ import annotations

import pytest

from mixerzoo.config import RunConfig
from mixerzoo.params import validate
from mixerzoo.runs.task import execute_run
from mixerzoo.store.results import ResultsStore
from mixerzoo.studies.sweep.cost import (
    combined,
    duration_text,
    evaluated_examples,
    planned_steps,
    wall_time,
    wall_time_line,
)
from mixerzoo.training import step_times
from mixerzoo.training.step_times import cached_step_time

RAW = {
    "data": {"task": {"name": "mqar_cat", "vocab_size": 30, "seq_len": 8}, "n_train": 40, "n_test": 16},
    "model": {"d_model": 8, "n_layers": 1, "mixer": "attention"},
    "train": {"epochs": 3, "batch_size": 16, "device": "cpu"},
}


def config(**train) -> RunConfig:
    return validate(RunConfig, {**RAW, "train": {**RAW["train"], **train}})


def test_planned_steps_are_the_steps_the_training_loop_takes(tmp_path):
    for cfg in (config(), config(max_steps=4)):
        record = execute_run(cfg, ResultsStore(tmp_path / "r"), progress=False)
        assert record.metrics["steps"] == planned_steps(cfg)
    assert planned_steps(config()) == 9  # ceil(40 / 16) x 3
    assert evaluated_examples(config()) == 3 * (16 + 16)  # every epoch: test and validation
    assert evaluated_examples(config(eval_every=2)) == 2 * 32  # epoch 2 and the last


@pytest.fixture
def quiet(monkeypatch):
    """The machine counts as quiet, whatever else runs beside the tests."""
    monkeypatch.setattr(step_times, "machine_busy", lambda: False)


def test_a_model_is_timed_once_then_read_from_the_cache(tmp_path, quiet):
    first, cached = cached_step_time(config(), tmp_path)
    assert not cached and first.step_s > 0 and first.eval_s_per_example > 0
    again, cached = cached_step_time(config(lr=0.5, epochs=9), tmp_path)  # the same model, batch, length
    assert cached and again == first
    _, cached = cached_step_time(config(batch_size=8), tmp_path)
    assert not cached


def test_the_estimate_reads_the_stores_finished_runs_before_timing(tmp_path):
    store = ResultsStore(tmp_path / "r")
    record = execute_run(config(), store, progress=False)
    est = wall_time([config(epochs=6)], store.runs(status="finished"), where=tmp_path / "cache")
    assert (est.stored, est.timed, est.cached) == (1, 0, 0)
    assert est.seconds == pytest.approx(18 * record.wall_s / 9)
    assert not (tmp_path / "cache").exists()


def test_the_dry_run_line_says_how_long_and_from_what(tmp_path, monkeypatch, quiet):
    monkeypatch.setenv("MIXERZOO_CACHE", str(tmp_path))
    line = wall_time_line([config(), config(lr=0.1)])
    assert line.startswith("expected wall time here: at most ~")
    assert "for 2 runs, one after another on this CPU" in line
    assert "3 timed steps of each of 1 model" in line
    assert "early stopping shortens it" in line and "busy" not in line
    assert "none" in wall_time_line([])


def test_a_timing_on_a_busy_machine_is_marked_and_never_cached(tmp_path, monkeypatch):
    """Beside another job a step is many times slower: such a timing is used once, said to be too
    high, and not kept for later dry runs."""
    monkeypatch.setattr(step_times, "machine_busy", lambda: True)
    found, cached = cached_step_time(config(), tmp_path)
    assert found.busy and not cached and found.step_s > 0
    assert not (tmp_path / step_times.CACHE_FILE).exists()
    monkeypatch.setenv("MIXERZOO_CACHE", str(tmp_path))
    line = wall_time_line([config()])
    assert "1 model was timed while other work kept the CPU busy" in line
    monkeypatch.setattr(step_times, "machine_busy", lambda: False)
    again, cached = cached_step_time(config(), tmp_path)
    assert not again.busy and not cached  # timed afresh, now kept
    assert cached_step_time(config(), tmp_path) == (again, True)


def test_busy_is_the_load_average_against_the_cores(monkeypatch):
    monkeypatch.setattr(step_times.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(step_times.os, "getloadavg", lambda: (1.2, 0.5, 0.5))
    assert step_times.machine_busy()
    monkeypatch.setattr(step_times.os, "getloadavg", lambda: (0.3, 0.5, 0.5))
    assert not step_times.machine_busy()


def test_durations_read_in_the_unit_that_fits():
    assert [duration_text(s) for s in (40, 14 * 60, 3.2 * 3600, 5.1 * 86400)] == [
        "~40 s",
        "~14 min",
        "~3.2 h",
        "~5.1 days",
    ]


def test_a_total_of_disjoint_estimates_adds_them_without_timing_again(tmp_path, monkeypatch, quiet):
    """A scorecard's dry run estimates each item, then states the total from those estimates."""
    calls = []
    real = step_times.time_steps
    monkeypatch.setattr(step_times, "time_steps", lambda cfg: calls.append(1) or real(cfg))
    parts = [wall_time([config()], [], where=tmp_path), wall_time([config(batch_size=8)], [], where=tmp_path)]
    total = combined(parts)
    line = wall_time_line([config(), config(batch_size=8)], est=total)
    assert len(calls) == 2  # one timing per model, none for the total
    assert total.seconds == pytest.approx(parts[0].seconds + parts[1].seconds)
    assert (total.runs, total.timed) == (2, 2)
    assert f"at most {duration_text(total.seconds)} for 2 runs" in line


def test_a_pools_wall_time_times_each_run_on_a_workers_share_and_hands_the_longest_out_first(monkeypatch):
    """``pool_wall_time``: every run's steps found with a worker's share of the cores (the threads
    restored after), then the runs placed longest first on the worker free first: runs of 5, 4, 3,
    3 and 1 s on 2 workers end at 8 s (5 + 3 on one, 4 + 3 + 1 on the other), not their mean 8 and
    not the longest run alone."""
    import torch

    from mixerzoo.studies.sweep import cost
    from mixerzoo.studies.sweep.cost import WallTime, pool_wall_time

    before = torch.get_num_threads()
    seconds = {3: 5.0, 4: 4.0, 5: 3.0, 6: 3.0, 7: 1.0}  # by max_steps
    seen_threads = []

    def fake(configs, stored, budget_s, where):  # wall_time's estimate, the store's times given
        seen_threads.append(torch.get_num_threads())
        return WallTime(seconds=seconds[configs[0].train.max_steps], runs=1)

    monkeypatch.setattr(cost, "_estimate", fake)
    monkeypatch.setattr("os.cpu_count", lambda: 4)
    configs = [config(max_steps=n) for n in (7, 3, 5, 4, 6)]
    assert pool_wall_time(configs, [], workers=2) == 8.0
    assert seen_threads == [2] * 5 and torch.get_num_threads() == before
    assert pool_wall_time(configs, [], workers=4) == 5.0  # the longest run alone
    assert pool_wall_time(configs, [], workers=1) == 16.0
