"""``results --study NAME`` lists the runs NAME's cells use: those it trained and those its presets
plan that another study trained first (a finished run is reused by config hash)."""

from __future__ import annotations

import json

import yaml

import mixerzoo
from mixerzoo.studies.listing import listed_runs, study_hashes

STUDY = {
    "kind": "sweep",
    "name": "first-study",
    "claim": "paper: n/a",
    "base": {
        "data": {"task": {"name": "mqar_cat", "vocab_size": 30, "seq_len": 8}, "n_train": 32, "n_test": 16},
        "model": {"d_model": 8, "n_layers": 1, "mixer": "attention"},
        "train": {"epochs": 1, "batch_size": 16, "device": "cpu"},
    },
    "presets": {"quick": {}, "paper": {"grid": {"train.lr": [0.01, 0.03]}}},
}


def test_a_study_lists_the_runs_another_study_trained_for_it(tmp_path, monkeypatch, run_cli):
    monkeypatch.setenv("MIXERZOO_CACHE", str(tmp_path / "cache"))
    first, second = tmp_path / "first.yaml", tmp_path / "second.yaml"
    first.write_text(yaml.safe_dump(STUDY))
    second.write_text(yaml.safe_dump({**STUDY, "name": "second-study"}))
    results = str(tmp_path / "res")
    mixerzoo.run(str(first), preset="quick", results=results, quiet=True)
    assert mixerzoo.run(str(second), preset="quick", results=results, quiet=True) == 0  # reuses the run
    _, runs = listed_runs(results, study=str(second))
    assert [r.study for r in runs] == ["first-study"]
    assert runs[0].config_hash in study_hashes(str(second))
    assert len(study_hashes(str(second))) == 3  # quick's run and paper's two
    _, none = listed_runs(results, study="second-study")  # a tag, no study file: its own runs only
    assert none == []
    code, out, err = run_cli(["results", "--results", results, "--study", str(second), "--json"])
    assert code == 0, err
    assert [r["run_id"] for r in json.loads(out)] == [runs[0].run_id]


def test_planned_hashes_are_cached_by_the_study_files_content(tmp_path, monkeypatch):
    first = tmp_path / "first.yaml"
    first.write_text(yaml.safe_dump(STUDY))
    hashes = study_hashes(str(first), where=tmp_path / "cache")
    (cached,) = (tmp_path / "cache" / "planned").iterdir()
    assert set(json.loads(cached.read_text())["hashes"]) == hashes
    first.write_text(yaml.safe_dump({**STUDY, "presets": {"quick": {}, "paper": {}}}))
    assert len(study_hashes(str(first), where=tmp_path / "cache")) == 1
    assert study_hashes("no-such-study") == set()
