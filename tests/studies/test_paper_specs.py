"""Every study's ``paper`` preset against the settings its paper states (mixerzoo/studies/paper_specs/).

Each shipped study has a spec table; its planned runs (expanded, never trained) must hold every
setting of it, one failure line per mismatch. Known deviations are named in the table, checked to
be what the preset runs, and printed.
"""

from __future__ import annotations

import copy
import functools

import pytest

from mixerzoo.registry import ConfigError
from mixerzoo.studies.paper_spec import (
    PROJECT,
    SPEC_DIR,
    Setting,
    check_spec,
    deviation_lines,
    load_spec,
    mismatch,
    paper_runs,
    spec_studies,
)

STUDIES = spec_studies()


@functools.cache
def runs_of(study: str):
    """The paper preset's runs, expanded once per study for the whole module (never trained)."""
    return paper_runs(study)


def test_every_shipped_study_has_a_spec_table_and_every_table_a_study():
    missing = [name for name in STUDIES if not (SPEC_DIR / f"{name}.yaml").is_file()]
    assert not missing, f"no paper spec table for: {', '.join(missing)}"
    stray = sorted(p.stem for p in SPEC_DIR.glob("*.yaml") if p.stem not in STUDIES)
    assert not stray, f"spec tables without a study: {', '.join(stray)}"


def test_the_scorecard_borrows_cells_and_carries_no_table_of_its_own():
    assert "scorecard" not in STUDIES and "zoology-mqar-dmodel" in STUDIES


def test_a_study_without_a_table_fails_in_one_line():
    with pytest.raises(ConfigError, match="no-such-study: no paper spec table"):
        load_spec("no-such-study")


@pytest.mark.parametrize("study", STUDIES)
def test_paper_preset_holds_every_setting_its_paper_states(study):
    problems = check_spec(study, runs_of(study))
    assert not problems, "\n".join(problems)


def test_a_source_names_a_paper_or_says_project():
    with pytest.raises(ValueError, match="start with a paper key"):
        Setting(path="train.lr", value=1e-3, source="somewhere")
    assert Setting(path="train.lr", value=1e-3, source=PROJECT).source == PROJECT
    assert Setting(path="train.lr", value=1e-3, source="Zoology App. E.2").source == "Zoology App. E.2"


def test_known_deviations_are_named_and_printed(capsys):
    lines = [line for study in STUDIES for line in deviation_lines(study)]
    with capsys.disabled():
        print(f"\nknown deviations of the paper presets ({len(lines)}):")
        for line in lines:
            print(f"  {line}")
    for study in STUDIES:
        for d in load_spec(study).known_deviations:
            assert d.reason.strip(), f"{study}: {d.path}: a known deviation without a reason"


# -- the check itself ------------------------------------------------------------------------
def test_a_changed_run_is_one_named_failure():
    runs = runs_of("cat-mqar")
    assert check_spec("cat-mqar", runs) == []
    changed = copy.deepcopy(runs)
    point, values = changed[0]
    values["train"]["batch_size"] = 7
    problems = check_spec("cat-mqar", changed)
    assert len(problems) == 1
    assert "train.batch_size" in problems[0] and "7" in problems[0]


def test_a_scalar_must_hold_in_every_run_and_a_list_is_the_set_of_values():
    runs = [({"variant": "a"}, {"train": {"lr": 1e-3}}), ({"variant": "b"}, {"train": {"lr": 1e-2}})]
    assert mismatch("s", "train.lr", [1e-2, 1e-3], {}, runs) is None
    assert "missing [0.1]" in mismatch("s", "train.lr", [1e-3, 1e-2, 1e-1], {}, runs)
    assert "not in the paper [0.01]" in mismatch("s", "train.lr", [1e-3], {}, runs)
    assert "the paper states 0.001" in mismatch("s", "train.lr", 1e-3, {}, runs)
    assert mismatch("s", "train.lr", 1e-3, {"variant": "a"}, runs) is None
    assert "no run" in mismatch("s", "train.lr", 1e-3, {"variant": "c"}, runs)


def test_a_list_valued_setting_is_a_set_of_one_list():
    runs = [({}, {"train": {"betas": [0.9, 0.999]}})]
    assert mismatch("s", "train.betas", [[0.9, 0.999]], {}, runs) is None
    assert mismatch("s", "train.betas", [[0.9, 0.99]], {}, runs) is not None


def test_spec_paths_read_mixer_parameters_as_study_files_write_them():
    runs = runs_of("cat-selective-copy")
    assert mismatch("s", "model.mixer.conv_width", 3, {"variant": ["cat", "lincat"]}, runs) is None
    assert mismatch("s", "model.mixer.conv_width", 16, {"variant": "cat-thm4"}, runs) is None


# -- positions: the original Transformer in ICLL's synthetic studies, RoPE in its LM study -------
ICLL_SYNTHETIC = ("icll-fig2", "icll-table1")


@pytest.mark.parametrize("study", ICLL_SYNTHETIC)
def test_icll_synthetic_transformers_have_learned_absolute_positions(study):
    from mixerzoo.model.language_model import LanguageModel

    run = next(values for point, values in runs_of(study) if point.get("variant") == "transformer")
    assert run["model"]["position"] == "learned"
    cfg = copy.deepcopy(run["model"])
    cfg.update(d_model=16, n_layers=1, max_len=32)
    cfg["mixer"] = {"name": "attention", "params": {"num_heads": 1}}
    from mixerzoo.model.config import ModelConfig

    model = LanguageModel(ModelConfig.model_validate(cfg))
    assert model.pos_embed is not None and model.rope is None


@pytest.mark.parametrize("study", ("icll-fig3", "icll-fig4", "icll-fig5", "icll-fig6"))
def test_icll_probe_transformers_have_learned_positions(study):
    ((_, params),) = runs_of(study)
    tf = {label: m for label, m in params["models"].items() if label.startswith("TF")}
    assert tf and all(m["position"] == "learned" for m in tf.values())


def test_fig2d_reads_the_very_runs_of_fig2():
    """ICLL Fig. 2 (d) is read from Fig. 2 (b, c)'s runs: the paper presets plan the same run set,
    so one results directory trains each run once for both studies."""
    import json

    def run_set(study):
        return {json.dumps(values, sort_keys=True) for _, values in runs_of(study)}

    assert run_set("icll-fig2d") == run_set("icll-fig2")
