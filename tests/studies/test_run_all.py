"""``study run --all``: every study's preset in one folder, checked, resumable, one study's failure
one line; the verdict table written from what was measured."""

from __future__ import annotations

import json

from mixerzoo.studies.base import ResultsDir, RunOptions
from mixerzoo.studies.run_all import FAILED, FINISHED, run_all
from tests.studies.conftest import console


def test_every_study_runs_is_checked_and_a_failure_is_one_line(first_batch, read_only_use):
    results, lines = read_only_use(first_batch.results), first_batch.lines
    assert first_batch.code == 1  # one study failed to run
    record = json.loads((results / "run-all" / "quick.json").read_text())["studies"]
    broken, good = first_batch.names
    assert record[good]["status"] == FINISHED and record[good]["counts"]["reproduced"] == 1
    assert record[broken]["status"] == FAILED and "\n" not in record[broken]["error"]
    assert any(line.startswith(f"{broken}: failed:") for line in lines)
    # the good study's verdicts are logged like a check's, and the table is written
    assert (results / "verdicts" / "tiny-all__quick.json").is_file()
    table = (results / "run-all" / "quick.md").read_text()
    assert f"| {good} | finished |" in table and "| total |" in table
    assert "1 of 2 studies finished, 1 failed" in lines[-1]


def test_a_second_batch_skips_what_finished_and_retries_what_failed(first_batch_copy):
    where = ResultsDir(first_batch_copy.results, explicit=True)
    names = list(first_batch_copy.names)
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
    assert code == 2 and "--set / --add-model: not with --all" in err
    code, _, err = run_cli(["study", "run", "--all", "--dry-run", "--results", tmp_path])
    assert code == 2 and "--dry-run: not with --all" in err
    code, _, err = run_cli(["study", "run", "--results", tmp_path])
    assert code == 2 and "give a study NAME" in err
