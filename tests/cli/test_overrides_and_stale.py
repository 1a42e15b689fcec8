"""A study run with --set records its overrides per run; report, plot, check and their JSON name
them and label the verdicts "modified preset". A run made by other code is trained again by
`run`, or reused with --reuse-stale and then counted by run, check and report --json."""

import importlib
import json
import sys

import pytest
import yaml

from mixerzoo.mixers import SEQUENCE_MIXERS
from mixerzoo.store.results import ResultsStore

STUDY = {
    "kind": "sweep",
    "name": "tiny-overrides",
    "claim": "paper: n/a",
    "base": {
        "data": {"task": {"name": "mqar_cat", "vocab_size": 30, "seq_len": 8}, "n_train": 32, "n_test": 16},
        "model": {"d_model": 8, "n_layers": 1, "mixer": "cat"},
        "train": {"epochs": 1, "batch_size": 16, "max_steps": 3, "device": "cpu"},
    },
    "variants": {"cat": {}, "attention": {"model": {"mixer": "attention"}}},
    "grid": {"train.lr": [1e-2]},
    "figure": {"x": "train.lr", "lines": "variant"},
    "presets": {"quick": {}, "paper": {}},
    "claims": [
        {
            "claim": "cat above attention",
            "paper_ref": "test",
            "compare": {"left": {"variant": "cat"}, "right": {"variant": "attention"}, "op": ">="},
        }
    ],
}


@pytest.fixture
def study(tmp_path):
    path = tmp_path / "tiny-overrides.yaml"
    path.write_text(yaml.safe_dump(STUDY))
    return str(path), str(tmp_path / "res")


def test_overrides_are_recorded_per_run_and_named_by_report_plot_and_check(study, run_cli, tmp_path):
    path, res = study
    sets = ["--set", "train.max_steps=2"]
    code, out, err = run_cli(["study", "run", path, "--preset", "quick", "--results", res, "--quiet", *sets])
    assert code == 0, err
    assert "tiny-overrides (quick, modified: train.max_steps=2): 2 runs" in out
    runs = ResultsStore(res).runs()
    assert len(runs) == 2 and all(r.overrides == {"train.max_steps": 2} for r in runs)

    code, out, err = run_cli(
        ["study", "report", path, "--preset", "quick", "--results", res, "--json", *sets]
    )
    assert code == 0, err
    payload = json.loads(out)
    assert payload["overrides"] == {"train.max_steps": 2} and payload["modified_preset"] is True
    assert payload["claims"] and all(c["modified_preset"] for c in payload["claims"])
    html = (tmp_path / "res" / "reports" / "tiny-overrides-modified.html").read_text()
    assert "preset quick, modified: train.max_steps=2" in html

    code, out, _ = run_cli(["study", "report", path, "--preset", "quick", "--results", res, *sets])
    assert "tiny-overrides (preset quick, modified: train.max_steps=2)" in out
    assert ", modified preset]" in out

    code, out, _ = run_cli(["study", "check", path, "--preset", "quick", "--results", res, *sets])
    assert "tiny-overrides (preset quick, modified: train.max_steps=2)" in out
    assert ", modified preset]" in out

    code, out, err = run_cli(["study", "plot", path, "--preset", "quick", "--results", res, *sets])
    assert code == 0, err
    assert "modified preset: train.max_steps=2" in out


def test_the_preset_as_shipped_is_not_labelled_modified(study, run_cli):
    path, res = study
    assert run_cli(["study", "run", path, "--preset", "quick", "--results", res, "--quiet"])[0] == 0
    code, out, _ = run_cli(["study", "report", path, "--preset", "quick", "--results", res, "--json"])
    payload = json.loads(out)
    assert payload["overrides"] == {} and payload["modified_preset"] is False and payload["stale_runs"] == 0
    assert not any(c["modified_preset"] for c in payload["claims"])
    code, out, _ = run_cli(["study", "check", path, "--preset", "quick", "--results", res])
    assert "tiny-overrides (preset quick):" in out and "modified" not in out


MIXER = """
from torch import nn

from mixerzoo.mixers import SequenceMixer


class Doubler(SequenceMixer):
    def __init__(self, d_model, max_len=2048, **params):
        super().__init__(d_model, max_len, **params)
        self.proj = nn.Linear(d_model, d_model)

    def forward(self, x, input_ids=None, rope=None):
        return self.proj(2 * x.cumsum(1)){tail}
"""


def test_run_retrains_a_run_made_by_other_code_or_reuses_it_when_asked(study, run_cli, tmp_path, monkeypatch):
    module = tmp_path / "user_doubler_mod.py"
    module.write_text(MIXER.format(tail=""))
    monkeypatch.syspath_prepend(str(tmp_path))
    cls = importlib.import_module("user_doubler_mod").Doubler
    monkeypatch.setitem(SEQUENCE_MIXERS._items, "user_doubler", cls)
    monkeypatch.setitem(sys.modules, "user_doubler_mod", sys.modules["user_doubler_mod"])  # gone after
    path, res = study
    args = ["study", "run", path, "--preset", "quick", "--results", res, "--set", "model=user_doubler"]
    assert run_cli([*args, "--quiet"])[0] == 0
    module.write_text(MIXER.format(tail="  # edited"))  # and imported again, as a fresh process would
    edited = importlib.reload(sys.modules["user_doubler_mod"]).Doubler
    monkeypatch.setitem(SEQUENCE_MIXERS._items, "user_doubler", edited)
    code, out, _ = run_cli([*args, "--dry-run"])
    assert out.startswith("stale ") and "0 finished, 1 to run" in out

    code, out, err = run_cli([*args, "--quiet", "--reuse-stale"])
    assert code == 0, err
    assert "1 run reused from other code" in out
    (run,) = ResultsStore(res).runs()
    assert run.stale and len(run.attempts) == 1
    check = ["study", "check", path, "--preset", "quick", "--results", res, "--set", "model=user_doubler"]
    code, out, _ = run_cli(check)
    assert "1 run reused from other code" in out
    code, out, _ = run_cli(["results", "--results", res, "--columns", "mixer,stale"])
    assert out.splitlines()[1].split() == ["user_doubler", "yes"]
    code, out, _ = run_cli(["study", "report", *check[2:], "--json"])
    assert json.loads(out)["stale_runs"] == 1

    code, out, err = run_cli([*args, "--quiet"])
    assert code == 0, err
    assert "1 run made by other code trained again" in out
    (run,) = ResultsStore(res).runs()
    assert not run.stale and [a.outcome for a in run.attempts] == ["finished", "finished"]
    code, out, _ = run_cli(["results", "--results", res, "--attempts"])
    assert "#1 finished" in out and "(stale: other code)" in out.split("#2")[0]


def test_a_computed_study_run_with_set_is_labelled_a_modified_preset(run_cli, tmp_path):
    sets = {"seq_lens": [24, 40], "num_tokens_to_copy": 4, "n_test": 20}
    args = [a for k, v in sets.items() for a in ("--set", f"{k}={json.dumps(v)}")]
    res = str(tmp_path / "res")
    code, _, err = run_cli(["study", "run", "cat-thm3-selective-copy", *args, "--results", res])
    assert code == 0, err
    (run,) = ResultsStore(res).runs()
    assert run.kind == "computed" and run.overrides == sets
    code, out, _ = run_cli(["study", "report", "cat-thm3-selective-copy", "--results", res, "--json"])
    payload = json.loads(out)
    assert payload["overrides"] == sets and payload["modified_preset"] is True
    assert all(c["modified_preset"] for c in payload["claims"])
    code, out, _ = run_cli(["study", "check", "cat-thm3-selective-copy", "--results", res])
    assert "[reproduced, modified preset]" in out and "modified: seq_lens=[24, 40]" in out


def test_a_mad_study_run_with_set_names_its_overrides(run_cli, tmp_path):
    from tests.studies.conftest import tiny_mad

    spec = tiny_mad("mad-overrides")
    path = tmp_path / "mad-overrides.yaml"
    path.write_text(yaml.safe_dump(spec))
    args = [str(path), "--preset", "quick", "--results", str(tmp_path / "res"), "--set", "model.d_model=16"]
    code, _, err = run_cli(["study", "run", *args, "--quiet"])
    assert code == 0, err
    code, out, _ = run_cli(["study", "report", *args, "--json"])
    payload = json.loads(out)
    assert payload["overrides"] == {"model.d_model": 16} and payload["modified_preset"] is True
    assert all(c["modified_preset"] for c in payload["claims"])
    code, out, _ = run_cli(["study", "check", *args])
    assert "mad-overrides (preset quick, modified: model.d_model=16)" in out and ", modified preset]" in out
