"""A computed study through the executors: one Ray task recorded by the driver, ``--workers``
answered in one line, the Ray-only options refused without Ray."""

from __future__ import annotations

import json

import pytest

from mixerzoo.analysis.outcome import Outcome
from mixerzoo.store.results import ResultsStore
from mixerzoo.studies.computed.files import load_theory
from mixerzoo.studies.computed.remote import theory_task, write_figures

FAST = "cat-thm3-selective-copy"  # the fastest computed study (seconds)


def stored(root):
    """(the result file's claims, cells) and the store's computed runs."""
    payload = json.loads((root / "theory" / f"{FAST}.json").read_text())
    return payload, ResultsStore(root, create=False, read_only=True).runs(kind="computed")


def test_a_computed_study_runs_as_one_ray_task_into_the_drivers_store(run_cli, tmp_path):
    ray = pytest.importorskip("ray", reason="the ray extra is not installed: pip install 'mixerzoo[ray]'")
    res = ["--results", tmp_path / "r"]
    code, out, _ = run_cli(["study", "run", FAST, "--preset", "quick", "--executor", "ray", *res])
    assert code == 0 and "one Ray task" in out
    assert not ray.is_initialized()  # the instance the run started is shut down again
    by_ray, (run,) = stored(tmp_path / "r")
    assert run.status == "finished" and run.experiment == FAST and run.output.endswith(f"{FAST}.json")
    # the same result run in this process: the same numbers and verdicts, a second attempt of the run
    code, _, _ = run_cli(["study", "run", FAST, "--preset", "quick", *res])
    local, (again,) = stored(tmp_path / "r")
    assert code == 0 and again.run_id == run.run_id and len(again.attempts) == 2
    assert by_ray["cells"] == local["cells"] and by_ray["claims"] == local["claims"]


def test_workers_is_answered_in_one_line_and_the_study_runs(run_cli, tmp_path):
    code, _, err = run_cli(["study", "run", FAST, "--workers", "3", "--results", tmp_path / "r"])
    assert code == 0 and "--workers 3: cat-thm3-selective-copy is one computed run" in err
    _, (run,) = stored(tmp_path / "r")
    assert run.status == "finished"


@pytest.mark.parametrize("option", [["--address", "ray://head:10001"], ["--num-gpus", "1"]])
def test_ray_options_without_the_ray_executor_are_one_line(run_cli, tmp_path, option):
    code, _, err = run_cli(["study", "run", FAST, *option, "--results", tmp_path / "r"])
    assert code == 2 and f"{option[0]}: for --executor ray" in err and err.count("\n") == 1
    assert not (tmp_path / "r").exists()  # refused before any work


def test_the_task_ships_the_figures_back_to_the_driver(monkeypatch, tmp_path):
    exp = load_theory(FAST)

    def run(params, log=print):
        def plot(folder):
            (folder / "sub").mkdir()
            (folder / "sub" / "fig.svg").write_text("<svg/>")
            return [folder / "sub" / "fig.svg"]

        log("measured")
        cells = [{"seq_len": 64, "accuracy_per_example": 1.0}]
        return Outcome(["seq_len"], "accuracy_per_example", cells, [("L=64", "1", "1")], plot)

    monkeypatch.setattr(exp.module(), "run", run)
    shipped = theory_task(exp.model_dump(mode="json"), "quick", {}, threads=1)
    assert shipped["log"] == ["measured"] and shipped["figures"] == {"sub/fig.svg": b"<svg/>"}
    assert shipped["payload"]["claims"][0]["verdict"] == "reproduced"
    (path,) = write_figures(shipped["figures"], tmp_path / "out")
    assert path == str(tmp_path / "out" / "sub" / "fig.svg") and open(path).read() == "<svg/>"


def test_a_ray_cluster_that_cannot_be_reached_is_one_line_and_records_no_attempt(
    run_cli, tmp_path, monkeypatch
):
    ray = pytest.importorskip("ray", reason="the ray extra is not installed: pip install 'mixerzoo[ray]'")

    def unreachable(**kwargs):
        raise ConnectionError(f"could not connect to {kwargs['address']}")

    monkeypatch.setattr(ray, "init", unreachable)
    code, _, err = run_cli(
        ["study", "run", FAST, "--executor", "ray", "--address", "h:1", "--results", tmp_path]
    )
    assert code == 2 and "--address 'h:1': cannot reach a Ray cluster there" in err
    assert ResultsStore(tmp_path, create=False, read_only=True).runs() == []
