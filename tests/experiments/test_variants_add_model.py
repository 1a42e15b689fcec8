"""``--add-model`` trains a model beside a study's own variants (``--set model=`` keeps only one);
a grid over a mixer parameter applies to the mixers that have it; a modified preset marks exactly
the claims and figures whose numbers differ from the preset's, and never overwrites the study's
own report or figure."""

from __future__ import annotations

import json

import pytest
import yaml

from mixerzoo.registry import ConfigError
from mixerzoo.studies.dispatch import find_study
from mixerzoo.studies.sweep.config import load_experiment
from mixerzoo.studies.sweep.overrides import load_with_sets

STUDY = {
    "kind": "sweep",
    "name": "tiny-add",
    "claim": "paper: n/a",
    "base": {
        "data": {"task": {"name": "mqar_cat", "vocab_size": 30, "seq_len": 8}, "n_train": 32, "n_test": 16},
        "model": {"d_model": 8, "n_layers": 1, "mixer": "cat"},
        "train": {"epochs": 1, "batch_size": 16, "max_steps": 2, "device": "cpu"},
    },
    "variants": {
        "cat": {},
        "attention": {"model": {"mixer": "attention"}},
        "conv": {"model": {"mixer": "base_conv"}},
    },
    "grid": {"train.lr": [1e-2]},
    "figure": {"x": "train.lr", "lines": "variant"},
    "presets": {"quick": {"variants": ["cat", "attention"]}, "paper": {}},
    "claims": [
        {
            "claim": "cat above attention",
            "paper_ref": "test",
            "compare": {"left": {"variant": "cat"}, "right": {"variant": "attention"}, "op": ">="},
        },
        {"claim": "every model learns something", "paper_ref": "test", "test": {"op": ">=", "value": 0.0}},
    ],
}


def _variants(sets):
    return list(load_with_sets(dict(STUDY), "quick", sets).variants)


# -- adding a model -------------------------------------------------------------------------------
def test_add_model_keeps_the_preset_variants_and_set_model_keeps_only_one():
    assert _variants({"+model": "gla"}) == ["cat", "attention", "gla"]
    assert _variants({"model": "gla"}) == ["gla"]  # --set model=X: only X
    exp = load_with_sets(dict(STUDY), "quick", {"+model": ["conv", {"mixer": "hyena"}, {"mixer": "gla"}]})
    assert list(exp.variants) == ["cat", "attention", "conv", "custom", "custom2"]
    assert exp.added_variants == ["custom", "custom2"]  # conv is the file's own: its claims may read it
    runs = {p.point["variant"]: p.config for p in exp.expand()}
    assert runs["custom"].model.layer_mixers()[0].name == "hyena"
    assert runs["custom2"].train.lr == runs["cat"].train.lr  # the same grid and rules
    assert [c.claim for c in exp.claims] == [c["claim"] for c in STUDY["claims"]]


def test_add_model_beside_set_model_and_paths():
    exp = load_with_sets(dict(STUDY), "quick", {"model": "attention", "+model": "gla", "train.max_steps": 1})
    assert list(exp.variants) == ["attention", "gla"]
    assert {p.config.train.max_steps for p in exp.expand()} == {1}


@pytest.mark.parametrize(
    "value,match",
    [
        ("nosuch", r"--add-model 'nosuch': not a variant of 'tiny-add' nor a sequence mixer; allowed: cat"),
        (3, r"--add-model 3: expected a variant or mixer name, or a mapping"),
        ("no_such_pkg.mod:Mixer", r"no_such_pkg"),
    ],
)
def test_a_bad_added_model_is_one_line(value, match):
    with pytest.raises(ConfigError, match=match) as err:
        load_with_sets(dict(STUDY), "quick", {"+model": value})
    assert "\n" not in str(err.value)


def test_a_study_file_cannot_name_added_variants(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump({**STUDY, "added_variants": ["conv"]}))
    with pytest.raises(ConfigError, match="added_variants is set by --add-model"):
        load_experiment(str(path))


def test_the_claims_are_planned_on_the_file_variants_only(tmp_path):
    path = tmp_path / "tiny-add.yaml"
    path.write_text(yaml.safe_dump(STUDY))
    plan = find_study(str(path)).claim_plan("quick", {"+model": "gla"})
    assert {c["variant"] for c in plan.cells} == {"cat", "attention"}


def test_cli_help_says_which_option_does_what(run_cli):
    code, out, _ = run_cli(["study", "run", "--help"])
    assert code == 0
    text = " ".join(out.split())
    assert "--add-model MODEL" in text and "BESIDE the study's own models" in text
    assert "model=NAME runs ONLY that model" in text
    for verb in ("report", "plot", "check"):
        assert "--add-model" in run_cli(["study", verb, "--help"])[1]


def test_cli_add_model_errors_are_one_line(run_cli):
    code, _, err = run_cli(["study", "run", "cat-fig4", "--add-model", "gla"])
    assert code != 0 and "--add-model: for sweep and MAD studies" in err and "Traceback" not in err
    code, _, err = run_cli(["study", "run", "icll-fig2", "--add-model", "nosuch", "--dry-run"])
    assert code != 0 and "not a variant of 'icll-fig2'" in err and "Traceback" not in err
    code, _, err = run_cli(["study", "run", "icll-fig2", "--set", "model=gla", "--set", "model=h3"])
    assert code != 0 and "given twice" in err


# -- a grid's mixer parameter applies to the mixers that have it ----------------------------------
def test_icll_grid_over_heads_skips_a_mixer_without_heads(run_cli):
    exp = load_with_sets("icll-fig2", "quick", {"model": "mamba"})
    assert {p.config.model.layer_mixers()[0].name for p in exp.expand()} == {"mamba"}
    assert all("num_heads" not in p.config.model.layer_mixers()[0].params for p in exp.expand())
    code, out, err = run_cli(
        ["study", "run", "icll-fig2", "--preset", "quick", "--set", "model=s4d", "--dry-run"]
    )
    assert code == 0, err
    assert "icll-fig2 (quick): 1 run," in out
    exp = load_with_sets("icll-table1", "quick", {"+model": "s4d"})
    s4d = [p for p in exp.expand() if p.point["variant"] == "s4d"]
    assert len(s4d) == 1 and s4d[0].config.model.layer_mixers()[0].params == {}


def test_points_that_differ_only_on_a_missing_parameter_are_one_run():
    spec = {
        **STUDY,
        "grid": {"train.lr": [1e-2], "model.mixer.num_heads": [1, 2]},
        "rules": [{"when": {"train.lr": 1e-2}, "set": {"model.mixer.num_heads": 2}}],
        "aggregate": {"over": ["model.mixer.num_heads"]},
        "presets": {"quick": {}, "paper": {}},
        "variants": {"attention": {"model": {"mixer": "attention"}}, "mamba": {"model": {"mixer": "mamba"}}},
        "claims": [],
    }
    exp = load_experiment(spec, "quick")
    runs = exp.expand()
    assert sorted(p.point["variant"] for p in runs) == ["attention", "mamba"]
    assert len(runs) == exp.count_runs() == 2
    by = {p.point["variant"]: p.config.model.layer_mixers()[0].params for p in runs}
    assert by == {"attention": {"num_heads": 2}, "mamba": {}}


@pytest.mark.parametrize(
    "variants",
    [
        {"attention": {"model": {"mixer": "attention"}}, "mamba": {"model": {"mixer": "mamba"}}},
        {"mamba": {"model": {"mixer": "mamba"}}, "lstm": {"model": {"mixer": "lstm"}}},
    ],
)
def test_a_mixer_parameter_no_variant_has_is_an_error(variants):
    spec = {**STUDY, "variants": variants, "presets": {"quick": {}, "paper": {}}, "claims": []}
    with pytest.raises(ConfigError, match=r"unknown field path 'model.mixer.num_headz'"):
        load_experiment({**spec, "grid": {"model.mixer.num_headz": [1, 2]}}, "quick")
    if "attention" not in variants:  # a real parameter, but of no mixer of this file
        with pytest.raises(ConfigError, match=r"unknown field path 'model.mixer.num_heads'"):
            load_experiment({**spec, "grid": {"model.mixer.num_heads": [1, 2]}}, "quick")


# -- a modified preset marks exactly what it modifies ----------------------------------------------
@pytest.fixture(scope="module")
def added(tmp_path_factory):
    """The quick preset run, then the same with gla added (one more run)."""
    from mixerzoo.cli.main import main

    root = tmp_path_factory.mktemp("added")
    path = root / "tiny-add.yaml"
    path.write_text(yaml.safe_dump(STUDY))
    res = root / "res"
    for extra in ([], ["--add-model", "gla"]):
        try:
            main(["study", "run", str(path), "--preset", "quick", "--results", str(res), "--quiet", *extra])
        except SystemExit as stop:
            assert stop.code in (0, None)
    return str(path), res


def test_added_model_marks_its_cells_not_the_file_claims(added, run_cli):
    path, res = added
    base = ["study", "report", path, "--preset", "quick", "--results", str(res)]
    code, _, err = run_cli(base)
    assert code == 0, err
    own = (res / "reports" / "tiny-add.html").read_text()
    code, out, err = run_cli([*base, "--json", "--add-model", "gla"])
    assert code == 0, err
    payload = json.loads(out)
    assert payload["added_variants"] == ["gla"] and payload["runs"] == {"finished": 3, "planned": 3}
    assert not any(c["modified_preset"] for c in payload["claims"])
    assert "gla" not in payload["claims"][1]["evidence"]  # a claim over every cell reads the file's own
    assert {c["variant"]: c["modified_preset"] for c in payload["cells"]} == {
        "cat": False,
        "attention": False,
        "gla": True,
    }
    assert (res / "reports" / "tiny-add.html").read_text() == own  # the study's own report is left alone
    assert "gla" in (res / "reports" / "tiny-add-modified.html").read_text()
    code, out, err = run_cli([*base, "--add-model", "gla", "--out", str(res / "mine.html")])
    assert code == 0 and (res / "mine.html").is_file()


def test_a_subset_of_the_variants_marks_no_claim_and_writes_modified_files(added, run_cli):
    path, res = added
    args = [path, "--preset", "quick", "--results", str(res), "--set", "model=cat"]
    code, out, err = run_cli(["study", "check", *args])
    assert code == 0, err
    assert "modified preset]" not in out  # cat's runs are the preset's own: no verdict reads a changed cell
    code, out, err = run_cli(["study", "plot", *args])
    assert code == 0, err
    assert (res / "figures" / "tiny-add-modified.png").is_file()
    assert not (res / "figures" / "tiny-add.png").exists()


def test_the_figure_of_an_added_model_carries_the_mark(added):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from mixerzoo.store.results import ResultsStore
    from mixerzoo.studies.sweep.cells import collect_results, series
    from mixerzoo.studies.sweep.plots import FigureStyle, draw_figure

    path, res = added
    study = find_study(path)
    sets = {"+model": "gla"}
    results = collect_results(study.load("quick", sets), ResultsStore(res, read_only=True), sets)
    changes = study.changes("quick", sets, [p for c in results.cells for p in c.planned])
    fig = draw_figure(results, series(results), {}, FigureStyle(), plt, changes)
    texts = " ".join(t.get_text() for t in [*fig.texts, fig._suptitle])
    assert "modified preset (added gla): gla" in texts and "(modified preset)" in texts
    plt.close(fig)
    plain = collect_results(study.load("quick"), ResultsStore(res, read_only=True))
    fig = draw_figure(plain, series(plain), {}, FigureStyle(), plt, study.changes("quick", {}, []))
    assert "modified" not in " ".join(t.get_text() for t in [*fig.texts, fig._suptitle])
    plt.close(fig)


def test_mad_adds_a_model_beside_its_variants(tmp_path):
    from mixerzoo.studies.mad.levels import mad_experiment

    spec = {
        "kind": "mad",
        "name": "mad-add",
        "claim": "paper: test",
        "base": {
            "data": {"task": {"name": "mad_memorization"}, "n_train": 64, "n_test": 32},
            "model": {"d_model": 8, "n_layers": 1, "mixer": "attention"},
            "train": {"batch_size": 32, "max_steps": 1},
        },
        "variants": {"attention": {}, "hyena": {"model": {"mixer": "hyena"}}},
        "grid": {"data.task.name": ["mad_memorization"], "train.lr": [1e-3], "train.weight_decay": [0.0]},
        "aggregate": {
            "metric": "accuracy_per_query",
            "reduce": "max",
            "over": ["train.lr", "train.weight_decay"],
        },
        "presets": {"quick": {}, "paper": {}},
    }
    path = tmp_path / "mad-add.yaml"
    path.write_text(yaml.safe_dump(spec))
    exp = mad_experiment(str(path), "quick", {"+model": "gla"})
    assert list(exp.variants) == ["attention", "hyena", "gla"] and exp.added_variants == ["gla"]
    plan = find_study(str(path)).claim_plan("quick", {"+model": "gla"})
    assert {c["variant"] for c in plan.cells} == {"attention", "hyena"}
