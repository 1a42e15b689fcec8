"""A run's identity includes the code that made it: a finished run whose mixer (one registered
from outside the package), task or package version changed since is stale, trained again by the
next sweep (the old attempt kept), or reused only when asked."""

import importlib
import os
import sqlite3
import sys

import pytest

import mixerzoo
from mixerzoo.mixers import SEQUENCE_MIXERS
from mixerzoo.store.fingerprint import code_fingerprint, code_parts, named_classes
from mixerzoo.store.results import ResultsStore
from mixerzoo.studies.sweep.runner import run_sweep
from tests.experiments.conftest import tiny_study

MIXER_SOURCE = """
import torch
from torch import nn

from mixerzoo.mixers import SequenceMixer


class RunningMean(SequenceMixer):
    def __init__(self, d_model, max_len=2048, **params):
        super().__init__(d_model, max_len, **params)
        self.proj = nn.Linear(d_model, d_model)

    def forward(self, x, input_ids=None, rope=None):
        steps = torch.arange(1, x.shape[1] + 1, dtype=x.dtype).view(1, -1, 1)
        return self.proj(x.cumsum(1) / steps){tail}
"""


@pytest.fixture
def user_mixer(tmp_path, monkeypatch):
    """A mixer in a module outside the package, imported and registered in this process; returns
    a function that edits the module's source and, unless ``reload=False``, imports and registers
    it again, as a fresh process (or a notebook cell run again) would."""
    path = tmp_path / "user_mixers_fp.py"
    path.write_text(MIXER_SOURCE.format(tail=""))
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("user_mixers_fp")
    monkeypatch.setitem(SEQUENCE_MIXERS._items, "user_running_mean", module.RunningMean)

    def edit(tail: str, reload: bool = True) -> None:
        path.write_text(MIXER_SOURCE.format(tail=tail))
        if reload:
            fresh = importlib.reload(module)
            monkeypatch.setitem(SEQUENCE_MIXERS._items, "user_running_mean", fresh.RunningMean)

    yield edit
    sys.modules.pop("user_mixers_fp", None)


def sweep(exp, store, **kwargs):
    lines = []
    summary = run_sweep(exp, store, progress=False, log=lines.append, **kwargs)
    return summary, lines


def test_the_fingerprint_names_every_mixer_state_mixer_and_task_of_a_config():
    config = tiny_study("cat").expand()[0].config.model_dump(mode="json")
    config["model"]["mixer"] = [{"name": "cat"}, {"name": "attention"}]
    assert named_classes(config) == [
        ("mixer", "attention"),
        ("mixer", "cat"),
        ("state_mixer", "mlp"),
        ("task", "mqar_cat"),
    ]
    parts = code_parts(config)
    assert parts["mixer cat"].startswith("mixerzoo.mixers.cat:")
    assert parts["task mqar_cat"].split(":")[0].startswith("mixerzoo.tasks.")
    assert code_fingerprint(config).startswith(f"{mixerzoo.__version__}:")
    config["model"]["mixer"] = [{"name": "cat"}, {"name": "cat"}]
    assert code_fingerprint(config) != code_fingerprint(
        {**config, "model": {**config["model"], "mixer": "attention"}}
    )


def test_an_edited_outside_mixer_makes_its_finished_run_stale_and_the_next_sweep_retrains_it(
    tmp_path, user_mixer
):
    exp, store = tiny_study(), ResultsStore(tmp_path / "r")
    first, _ = sweep(exp, store)
    assert first.finished == 1 and first.stale == 0
    (run,) = store.runs()
    assert run.code == code_fingerprint(run.config) and not run.stale
    again, _ = sweep(exp, store)
    assert again.skipped == 1 and again.outcomes == []  # same code: reused

    user_mixer("\n\n# edited: a comment is enough to change the source\n")
    (run,) = store.runs()
    assert run.stale
    redo, lines = sweep(exp, store)
    assert redo.stale == 1 and redo.finished == 1 and redo.skipped == 0
    assert "1 run made by other code trained again" in redo.line()
    assert any("made by other code" in line for line in lines)
    (run,) = store.runs()
    assert not run.stale and [a.outcome for a in run.attempts] == ["finished", "finished"]
    old, new = run.attempts
    assert old.code != new.code == run.code  # the old attempt is kept, with the code that made it
    assert [a["stale"] for a in run.to_json()["attempts"]] == [True, False]


def test_reuse_stale_reuses_and_says_so(tmp_path, user_mixer):
    exp, store = tiny_study(), ResultsStore(tmp_path / "r")
    sweep(exp, store)
    user_mixer("\n\nEDITED = True\n")
    summary, lines = sweep(exp, store, reuse_stale=True)
    assert summary.outcomes == [] and summary.skipped == 1 and summary.stale == 1
    assert "1 run reused from other code" in summary.line()
    (run,) = store.runs()
    assert run.stale and len(run.attempts) == 1


def test_a_package_version_change_makes_every_finished_run_stale(finished_fp_study_copy, monkeypatch):
    exp, store = tiny_study("cat"), finished_fp_study_copy
    assert not store.runs()[0].stale
    monkeypatch.setattr(mixerzoo, "__version__", "99.0.0")
    assert store.runs()[0].stale
    summary, _ = sweep(exp, store)
    assert summary.stale == 1 and summary.finished == 1
    assert store.runs()[0].code.startswith("99.0.0:")


def test_a_store_from_before_fingerprints_keeps_working_and_its_runs_count_as_stale(
    finished_fp_study_copy, tmp_path
):
    exp, store = tiny_study("cat"), finished_fp_study_copy
    con = sqlite3.connect(store.db_path)  # back to schema 3: no code, no overrides per attempt
    con.execute("CREATE TABLE a3 AS SELECT * FROM attempts")
    con.execute("DROP TABLE attempts")
    con.execute("ALTER TABLE a3 DROP COLUMN code")
    con.execute("ALTER TABLE a3 DROP COLUMN overrides_json")
    con.execute("ALTER TABLE a3 RENAME TO attempts")
    con.execute("PRAGMA user_version = 3")
    con.commit()
    con.close()
    (read,) = ResultsStore(tmp_path / "r", read_only=True).runs()
    assert read.status == "finished" and read.code is None and read.stale
    summary, _ = sweep(exp, ResultsStore(tmp_path / "r"))
    assert summary.stale == 1 and summary.finished == 1
    assert not ResultsStore(tmp_path / "r").runs()[0].stale


MAD_SPEC = {
    "name": "mad-fp",
    "claim": "paper: test",
    "base": {
        "data": {"task": {"name": "mqar"}, "n_train": 32, "n_test": 16},
        "model": {"d_model": 8, "n_layers": 1, "mixer": "attention"},
        "train": {"epochs": 1, "batch_size": 16, "max_steps": 2},
    },
    "variants": {"attn": {"model": {"mixer": "attention"}}},
    "grid": {"data.task.name": ["mqar"], "train.lr": [1e-3], "train.weight_decay": [0.0]},
    "aggregate": {
        "metric": "accuracy_per_query",
        "reduce": "max",
        "over": ["train.lr", "train.weight_decay"],
    },
    "presets": {"quick": {}, "paper": {}},
}
MAD_LEVELS = {"mqar": [{"vocab_size": 40, "seq_len": 16, "num_kv_pairs": 2, "num_train_examples": 32}]}


def test_score_mad_trains_a_run_of_an_edited_mixer_again_unless_told_to_reuse_it(tmp_path, user_mixer):
    from mixerzoo.studies.mad import score_mad

    def score(**kwargs):
        model = {"mixer": "user_running_mean"}
        return score_mad(
            model, "quick", tmp_path / "r", levels=MAD_LEVELS, n_levels=1, experiment=MAD_SPEC, **kwargs
        )

    score()
    user_mixer("\n\n# edited\n")
    score(reuse_stale=True)
    (run,) = ResultsStore(tmp_path / "r").runs()
    assert run.stale and len(run.attempts) == 1  # reused, and still marked
    score()
    (run,) = ResultsStore(tmp_path / "r").runs()
    assert not run.stale and len(run.attempts) == 2  # trained again, the old attempt kept


def test_an_edit_the_process_has_not_imported_does_not_change_the_code_it_runs(tmp_path, user_mixer):
    config = tiny_study().expand()[0].config
    before = code_fingerprint(config)
    user_mixer("\n\n# edited, not imported again\n", reload=False)
    assert code_fingerprint(config) == before  # the class in the registry is still the old code
    user_mixer("\n\n# edited, imported again\n")
    assert code_fingerprint(config) != before


FINGERPRINT_IN_A_FRESH_PROCESS = """
import sys
from mixerzoo.store.fingerprint import code_fingerprint, code_parts
config = {"model": {"mixer": {"name": "user_mixers_fp:RunningMean"}}, "data": {"task": {"name": "mqar"}}}
assert code_parts(config)["mixer user_mixers_fp:RunningMean"].startswith("user_mixers_fp:")
print(code_fingerprint(config))
"""


def test_a_mixer_named_by_import_path_is_fingerprinted_by_its_source(tmp_path, user_mixer):
    import subprocess

    def fingerprint() -> str:
        run = [sys.executable, "-c", FINGERPRINT_IN_A_FRESH_PROCESS]
        env = {**os.environ, "PYTHONPATH": str(tmp_path)}
        done = subprocess.run(run, capture_output=True, text=True, env=env, check=True)
        return done.stdout.strip()

    before = fingerprint()
    user_mixer("\n\n# edited\n", reload=False)
    assert fingerprint() != before
    assert code_parts({"model": {"mixer": "no_such_module_here:X"}}) == {
        "mixer no_such_module_here:X": "unresolved"
    }
