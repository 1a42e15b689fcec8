"""Several experiments trained together (``run_sweeps``): each run recorded under its own
experiment's tag and counted in its own summary, one pool shared by all, resumable."""

import collections

import pytest

from mixerzoo.registry import ConfigError
from mixerzoo.store.results import ResultsStore
from mixerzoo.studies.sweep.config import load_experiment
from mixerzoo.studies.sweep.runner import run_sweeps


def tiny(name, lrs=(), seq_len=8, grid=None):
    """A tiny sweep over ``lrs`` (or over ``grid``, a grid mapping, instead)."""
    return load_experiment(
        {
            "kind": "sweep",
            "name": name,
            "claim": "paper: n/a",
            "base": {
                "data": {
                    "task": {"name": "mqar_cat", "vocab_size": 30, "seq_len": seq_len},
                    "n_train": 32,
                    "n_test": 16,
                },
                "model": {"d_model": 16, "n_layers": 1, "mixer": "cat"},
                "train": {"epochs": 1, "batch_size": 16, "device": "cpu"},
            },
            "grid": grid or {"train.lr": list(lrs)},
            "presets": {"quick": {}, "paper": {}},
        }
    )


@pytest.mark.parametrize("workers", [1, 2])
def test_each_run_is_recorded_under_its_own_experiment(tmp_path, workers):
    a, b = tiny("a", (1e-2, 3e-3)), tiny("b", (1e-3,), seq_len=12)
    store = ResultsStore(tmp_path / "r")
    lines = []
    summaries = run_sweeps([(a, "tag/a"), (b, "tag/b")], store, workers=workers, log=lines.append)
    assert [(s.experiment, s.total, s.finished) for s in summaries] == [("tag/a", 2, 2), ("tag/b", 1, 1)]
    by_tag = collections.Counter(r.experiment for r in store.runs(status="finished"))
    assert by_tag == {"tag/a": 2, "tag/b": 1}
    hashes = {r.experiment: set() for r in store.runs()}
    for r in store.runs():
        hashes[r.experiment].add(r.config_hash)
    assert hashes["tag/a"] == {p.config_hash for p in a.expand()}
    assert hashes["tag/b"] == {p.config_hash for p in b.expand()}
    # the runs of two experiments interleave in the log: every run line names its experiment
    finished = [line for line in lines if " finished " in line]
    assert len(finished) == 3 and all(line.startswith(("tag/a ", "tag/b ")) for line in finished)
    # resumable: nothing is trained twice
    again = run_sweeps([(a, "tag/a"), (b, "tag/b")], store, workers=workers, log=lambda _: None)
    assert [(s.skipped, s.outcomes) for s in again] == [(2, []), (1, [])]


def test_the_largest_runs_go_first(tmp_path):
    a = tiny("a", (1e-2, 3e-3, 1e-3))
    store = ResultsStore(tmp_path / "r")
    run_sweeps([(a, "a")], store, workers=1, log=lambda _: None, order=lambda p: p.config.train.lr)
    started = sorted(store.runs(), key=lambda r: r.attempts[0].started_at)
    assert [r.config["train"]["lr"] for r in started] == [1e-2, 3e-3, 1e-3]


def test_fewer_than_one_worker_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="must be >= 1"):
        run_sweeps([(tiny("a", (1e-2,)), "a")], ResultsStore(tmp_path / "r"), workers=0)


def test_a_sweeps_pool_is_handed_its_longest_runs_first(tmp_path, monkeypatch):
    """A sweep in several workers hands out its runs by training FLOPs, largest first (as the dry
    run's pool estimate assumes); one worker keeps the planned order."""
    from mixerzoo.studies.sweep import runner

    exp = tiny("order", grid={"model.n_layers": [1, 4, 2]})
    handed = {}

    def record(name):
        return lambda todo, job, *args: handed.setdefault(name, [p.config.model.n_layers for p in todo])

    monkeypatch.setattr(runner, "run_pool", record("pool"))
    monkeypatch.setattr(runner, "run_inline", record("inline"))
    runner.run_sweep(exp, ResultsStore(tmp_path / "a"), workers=2, progress=False, log=lambda s: None)
    runner.run_sweep(exp, ResultsStore(tmp_path / "b"), workers=1, progress=False, log=lambda s: None)
    assert handed["pool"] == [4, 2, 1]
    assert handed["inline"] == [1, 4, 2]
