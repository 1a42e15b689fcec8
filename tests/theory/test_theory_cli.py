"""`mixerzoo study list / run` on theory experiments: files load, claims are judged, bad input is one line."""

from __future__ import annotations

import json

import pytest

from mixerzoo.studies.computed.files import load_theory, theory_experiments


def test_every_shipped_theory_experiment_loads_with_its_presets():
    names = theory_experiments()
    assert {"cat-fig4", "cat-thm1-mqar", "cat-thm2-length-generalization"} <= set(names)
    for name in names:
        exp = load_theory(name)
        assert exp.claims and {"quick", "paper"} <= set(exp.presets)


def test_list_names_every_experiment(run_cli):
    code, out, _ = run_cli(["study", "list"])
    assert code == 0
    for name in theory_experiments():
        assert name in out


SMALL = ["--set", "seq_lens=[24, 40]", "--set", "num_tokens_to_copy=4", "--set", "n_test=20"]


def test_run_prints_prediction_and_measurement_and_judges_claims(tmp_path, run_cli):
    out_json = tmp_path / "r.json"
    args = [
        "study",
        "run",
        "cat-thm3-selective-copy",
        *SMALL,
        "--results",
        str(tmp_path),
        "--json",
        str(out_json),
    ]
    code, out, _ = run_cli(args)
    assert code == 0, out
    assert "predicted" in out and "[reproduced]" in out
    payload = json.loads(out_json.read_text())
    assert [c["accuracy_per_example"] for c in payload["cells"]] == [1.0, 1.0]
    assert payload["claims"][0]["verdict"] == "reproduced"
    assert (tmp_path / "theory" / "cat-thm3-selective-copy.json").is_file()


def test_a_broken_construction_is_not_reproduced_and_exits_1(tmp_path, run_cli):
    args = ["study", "run", "cat-thm3-selective-copy", *SMALL, "--set", "query_filter=identity"]
    code, out, _ = run_cli([*args, "--results", str(tmp_path)])
    assert code == 1
    assert "[not reproduced]" in out


@pytest.mark.parametrize(
    "args,message",
    [
        (["study", "run", "no-such"], "unknown experiment 'no-such'"),
        (["study", "run", "cat-fig4", "--set", "trails=3"], "unknown field 'cat-fig4.trails'"),
        (["study", "run", "cat-fig4", "--set", "trials=0"], "cat-fig4.trials = 0"),
        (["study", "run", "cat-fig4", "--set", "trials"], "expected key=value"),
        (["study", "run", "cat-fig4", "--preset", "huge"], "has presets quick, paper"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, message, run_cli):
    code, out, err = run_cli(args)
    assert code == 2
    assert message in err and len(err.strip().splitlines()) == 1


def test_check_judges_the_claims_as_the_study_file_states_them_now(tmp_path, run_cli, monkeypatch):
    """A stored result is judged again over its cells: a claim changed after the run is read as it
    is now (as for sweeps); a result written before results kept their axes keeps its verdicts."""
    from mixerzoo.claims import Claim
    from mixerzoo.studies.computed import files as experiments

    code, _, _ = run_cli(["study", "run", "cat-thm3-selective-copy", *SMALL, "--results", tmp_path])
    assert code == 0
    path = tmp_path / "theory" / "cat-thm3-selective-copy.json"
    stored = json.loads(path.read_text())
    assert stored["axes"] == ["seq_len"] and stored["metric"] == "accuracy_per_query"
    real = experiments.load_theory

    def stricter(name):  # the same study file, its claim now asking for more than 1.0
        exp = real(name)
        claim = exp.claims[0].model_dump()
        claim["test"] = {"op": ">", "value": 1.0}
        return exp.model_copy(update={"claims": [Claim.model_validate(claim)]})

    monkeypatch.setattr(experiments, "load_theory", stricter)
    code, out, _ = run_cli(["study", "check", "cat-thm3-selective-copy", "--results", tmp_path])
    assert code == 1 and "[not reproduced, modified preset]" in out and "> 1" in out
    del stored["axes"]  # a result of an earlier version: its verdicts as it was written
    path.write_text(json.dumps(stored))
    code, out, _ = run_cli(["study", "check", "cat-thm3-selective-copy", "--results", tmp_path])
    assert code == 0 and "[reproduced, modified preset]" in out
