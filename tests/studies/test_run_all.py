"""``study run --all``: every study's preset in one folder, checked, resumable, one study's failure
one line; the verdict table written from what was measured."""

from __future__ import annotations

import json

import yaml

from mixerzoo.studies.base import Console, ResultsDir, RunOptions
from mixerzoo.studies.run_all import FAILED, FINISHED, run_all

TINY = {
    "kind": "sweep",
    "name": "tiny-all",
    "paper": "test Fig. 0",
    "base": {
        "data": {"task": {"name": "mqar_cat", "vocab_size": 30, "seq_len": 8}, "n_train": 32, "n_test": 16},
        "model": {"d_model": 8, "n_layers": 1, "mixer": "attention"},
        "train": {"epochs": 1, "batch_size": 16, "device": "cpu"},
    },
    "variants": {"attention-1L": {}},
    "aggregate": {"metric": "accuracy_per_query", "reduce": "max", "over": []},
    "claims": [
        {
            "claim": "attention learns it",
            "paper_ref": "test Fig. 0",
            "test": {"op": ">=", "value": 0.0},
        }
    ],
    "presets": {"quick": {}, "paper": {}},
}


def console(lines):
    return Console(
        echo=lambda text="", err=False: lines.append(str(text)),
        write_json=lambda path, data: None,
        check_dir=lambda path, what: None,
    )


def studies(tmp_path):
    good = tmp_path / "tiny-all.yaml"
    good.write_text(yaml.safe_dump(TINY))
    broken = tmp_path / "broken.yaml"  # planned fine, fails when its runs are built
    broken.write_text(
        yaml.safe_dump({**TINY, "name": "broken", "base": {**TINY["base"], "model": {"mixer": 3}}})
    )
    return [str(broken), str(good)]


def test_every_study_runs_is_checked_and_a_failure_is_one_line(tmp_path):
    where = ResultsDir(tmp_path / "r", explicit=True)
    lines: list[str] = []
    code = run_all("quick", where, RunOptions(quiet=True), console(lines), names=studies(tmp_path))
    assert code == 1  # one study failed to run
    record = json.loads((tmp_path / "r" / "run-all" / "quick.json").read_text())["studies"]
    broken, good = studies(tmp_path)
    assert record[good]["status"] == FINISHED and record[good]["counts"]["reproduced"] == 1
    assert record[broken]["status"] == FAILED and "\n" not in record[broken]["error"]
    assert any(line.startswith(f"{broken}: failed:") for line in lines)
    # the good study's verdicts are logged like a check's, and the table is written
    assert (tmp_path / "r" / "verdicts" / "tiny-all__quick.json").is_file()
    table = (tmp_path / "r" / "run-all" / "quick.md").read_text()
    assert f"| {good} | finished |" in table and "| total |" in table
    assert "1 of 2 studies finished, 1 failed" in lines[-1]


def test_a_second_batch_skips_what_finished_and_retries_what_failed(tmp_path):
    where = ResultsDir(tmp_path / "r", explicit=True)
    names = studies(tmp_path)
    run_all("quick", where, RunOptions(quiet=True), console([]), names=names)
    lines: list[str] = []
    run_all("quick", where, RunOptions(quiet=True), console(lines), names=names)
    assert any(line.endswith("skipped") and names[1] in line for line in lines)
    assert any(line.startswith(f"{names[0]}: failed:") for line in lines)  # tried again
    lines.clear()
    run_all("quick", where, RunOptions(quiet=True), console(lines), again=True, names=names[1:])
    assert not any("skipped" in line for line in lines)  # --again runs it again (resumed: no training)


def test_the_command_refuses_a_name_or_sets_with_all(run_cli, tmp_path):
    code, _, err = run_cli(["study", "run", "cat-mqar", "--all", "--results", tmp_path])
    assert code == 2 and "--all runs every shipped study; drop 'cat-mqar'" in err
    code, _, err = run_cli(["study", "run", "--all", "--set", "train.lr=1", "--results", tmp_path])
    assert code == 2 and "--set: not with --all" in err
    code, _, err = run_cli(["study", "run", "--all", "--dry-run", "--results", tmp_path])
    assert code == 2 and "--dry-run: not with --all" in err
    code, _, err = run_cli(["study", "run", "--results", tmp_path])
    assert code == 2 and "give a study NAME" in err
