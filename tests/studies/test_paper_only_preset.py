"""A preset that can decide none of a study's claims says so: it plans no runs, ``study run``
prints why, and every claim reads "not run" there with that reason (the paper preset decides)."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from mixerzoo.registry import ConfigError
from mixerzoo.studies.base import ResultsDir, RunOptions
from mixerzoo.studies.run_all import run_all
from mixerzoo.studies.sweep.config import load_experiment
from tests.studies.conftest import TINY, console

WHY = "the model stays on its plateau after 1,600 steps (measured); the paper trains 96,000"


def _paper_only(name: str = "tiny-paper-only") -> dict:
    raw = copy.deepcopy(TINY)
    raw["name"] = name
    raw["presets"] = {"quick": {"paper_only": WHY}, "paper": {}}
    return raw


def test_a_paper_only_preset_plans_no_runs_and_the_paper_preset_plans_its_own():
    assert load_experiment(_paper_only(), "quick").expand() == []
    assert len(load_experiment(_paper_only(), "paper").expand()) == 1


def test_the_paper_preset_cannot_be_paper_only():
    raw = _paper_only()
    raw["presets"]["paper"] = {"paper_only": "no"}
    with pytest.raises(ConfigError, match="presets.paper.paper_only"):
        load_experiment(raw)


def test_study_run_says_why_and_every_claim_reads_not_run_with_the_reason(tmp_path):
    path = tmp_path / "tiny-paper-only.yaml"
    path.write_text(yaml.safe_dump(_paper_only()))
    lines: list[str] = []
    where = ResultsDir(tmp_path / "r", explicit=True)
    code = run_all("quick", where, RunOptions(quiet=True), console(lines), names=[str(path)])
    assert code == 0
    said = "\n".join(lines)
    assert f"tiny-paper-only (quick): no runs; its claims are for the paper preset only: {WHY}" in said
    (log,) = (tmp_path / "r" / "verdicts").glob("tiny-paper-only__quick.json")
    (entry,) = yaml.safe_load(log.read_text())
    (claim,) = entry["claims"]
    assert claim["verdict"] == "not run"
    assert claim["evidence"] == f"paper preset only: {WHY}"


def test_a_dry_run_of_a_paper_only_preset_says_why_and_creates_nothing(tmp_path, run_cli):
    path = tmp_path / "tiny-paper-only.yaml"
    path.write_text(yaml.safe_dump(_paper_only()))
    code, out, err = run_cli(["study", "run", str(path), "--dry-run", "--results", str(tmp_path / "r")])
    assert code == 0 and "claims are for the paper preset only" in out and WHY in out
    assert not (tmp_path / "r").exists()


def _computed_paper_only(tmp_path) -> str:
    """las-fig1-kernels (cheap, no training) with its quick preset made paper only."""
    from mixerzoo.studies.computed.files import theory_path

    raw = yaml.safe_load(theory_path("las-fig1-kernels").read_text())
    raw["name"] = "kernels-paper-only"
    raw["presets"] = {"quick": {"paper_only": WHY}, "paper": {}}
    path = tmp_path / "kernels-paper-only.yaml"
    path.write_text(yaml.safe_dump(raw))
    return str(path)


def test_a_computed_studys_paper_only_preset_runs_nothing_and_its_claims_say_why(tmp_path, run_cli):
    path = _computed_paper_only(tmp_path)
    results = tmp_path / "r"
    code, out, err = run_cli(["study", "run", path, "--dry-run", "--results", str(results)])
    assert code == 0 and "no run; its claims are for the paper preset only" in out
    assert not results.exists()  # a dry run creates nothing
    code, out, err = run_cli(["study", "run", path, "--results", str(results)])
    assert code == 0, err
    assert f"kernels-paper-only (quick): no run; its claims are for the paper preset only: {WHY}" in out
    assert results.is_dir() and not (results / "theory" / "kernels-paper-only.json").exists()
    code, out, err = run_cli(["study", "check", path, "--preset", "quick", "--results", str(results)])
    assert code == 0, err
    (entry,) = yaml.safe_load((results / "verdicts" / "kernels-paper-only__quick.json").read_text())
    assert entry["preset"] == "quick" and entry["claims"]
    assert all(c["verdict"] == "not run" for c in entry["claims"])
    assert all(c["evidence"] == f"paper preset only: {WHY}" for c in entry["claims"])


def test_a_computed_paper_only_note_is_no_parameter_and_the_paper_preset_cannot_carry_one(tmp_path):
    from mixerzoo.studies.computed.files import load_theory, resolve_params

    exp = load_theory(_computed_paper_only(tmp_path))
    assert exp.paper_only("quick") == WHY and exp.paper_only("paper") == ""
    _, params = resolve_params(exp, "quick", {})
    assert "paper_only" not in params.model_dump()
    raw = yaml.safe_load(Path(_computed_paper_only(tmp_path)).read_text())
    raw["presets"]["paper"] = {"paper_only": "no"}
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(raw))
    with pytest.raises(ConfigError, match="presets.paper.paper_only"):
        load_theory(str(bad))


def _claims_paper_only() -> dict:
    raw = copy.deepcopy(TINY)
    raw["name"] = "tiny-claims-paper-only"
    raw["presets"] = {"quick": {"claims_paper_only": WHY}, "paper": {}}
    return raw


def test_a_preset_whose_claims_are_paper_only_still_runs_and_every_claim_reads_not_run(tmp_path):
    assert len(load_experiment(_claims_paper_only(), "quick").expand()) == 1  # planned as usual
    path = tmp_path / "tiny-claims-paper-only.yaml"
    path.write_text(yaml.safe_dump(_claims_paper_only()))
    lines: list[str] = []
    where = ResultsDir(tmp_path / "r", explicit=True)
    assert run_all("quick", where, RunOptions(quiet=True), console(lines), names=[str(path)]) == 0
    assert f"tiny-claims-paper-only (quick): its claims are for the paper preset only: {WHY}" in lines
    (log,) = (tmp_path / "r" / "verdicts").glob("tiny-claims-paper-only__quick.json")
    (entry,) = yaml.safe_load(log.read_text())
    (claim,) = entry["claims"]
    # the same claim, with the run finished, reads "reproduced" without the note (>= 0 always holds)
    assert claim["verdict"] == "not run"
    assert claim["evidence"] == f"paper preset only: {WHY}"
    assert list((tmp_path / "r").rglob("*.json"))  # the run was stored


def test_the_paper_preset_cannot_have_its_claims_made_paper_only():
    raw = _claims_paper_only()
    raw["presets"]["paper"] = {"claims_paper_only": "no"}
    with pytest.raises(ConfigError, match="presets.paper.claims_paper_only"):
        load_experiment(raw)


def test_mads_quick_preset_runs_attention_and_show_gives_why_its_claims_are_paper_only(run_cli):
    quick = load_experiment("mad", "quick")
    assert quick.expand() and quick.claims_paper_only and not quick.paper_only  # attention is planned
    assert "903 s" in quick.claims_paper_only and "0.297" in quick.claims_paper_only  # measured
    code, out, err = run_cli(["study", "show", "mad"])
    assert code == 0, err
    assert "quick: runs; its claims are for the paper preset only: measured:" in out


# -- one claim that a preset cannot decide -------------------------------------------------
def _claim(**extra) -> dict:
    base = {"claim": "every cell learns", "paper_ref": "Fig. 1", "test": {"op": ">=", "value": 0.9}}
    return base | extra


def test_a_claim_paper_only_at_a_preset_reads_not_run_there_with_the_reason_and_its_measurement():
    from mixerzoo.claims import NOT_REPRODUCED, NOT_RUN, Claim, evaluate_claims

    claim = Claim(**_claim(paper_only={"quick": WHY}))
    cells = [{"variant": "a", "accuracy": 0.5}]
    (quick,) = evaluate_claims([claim], cells, "accuracy", preset="quick")
    (paper,) = evaluate_claims([claim], cells, "accuracy", preset="paper")
    assert quick["verdict"] == NOT_RUN
    assert quick["evidence"].startswith(f"paper preset only: {WHY}; measured here: not reproduced: accuracy")
    assert "0.5" in quick["evidence"]
    assert paper["verdict"] == NOT_REPRODUCED and not paper["evidence"].startswith("paper preset only")


def test_a_claim_cannot_be_paper_only_at_the_paper_preset_or_without_a_reason():
    from mixerzoo.claims import Claim

    with pytest.raises(ValueError, match="the paper preset is the one that decides"):
        Claim(**_claim(paper_only={"paper": WHY}))
    with pytest.raises(ValueError, match="paper_only.quick: say why"):
        Claim(**_claim(paper_only={"quick": "  "}))


def test_study_show_names_the_preset_that_cannot_decide_a_claim(tmp_path, run_cli):
    raw = copy.deepcopy(TINY)
    raw["name"] = "tiny-one-claim-paper-only"
    raw["claims"][0]["paper_only"] = {"quick": WHY}
    path = tmp_path / "tiny-one-claim-paper-only.yaml"
    path.write_text(yaml.safe_dump(raw))
    code, out, err = run_cli(["study", "show", str(path)])
    assert code == 0, err
    assert f"    quick: paper preset only: {WHY}" in out
