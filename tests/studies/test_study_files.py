"""One study-file format: every file says its ``kind:``, and the key is checked against the content.

Before, sweeps and MAD lived in ``experiments/configs/`` and computed, LM and probe studies in
``theory/configs/``; which kind a file was followed from its folder, its name or its keys.
"""

from __future__ import annotations

import pytest
import yaml

from mixerzoo.registry import ConfigError
from mixerzoo.studies import files as study_files
from mixerzoo.studies.computed.files import load_theory, theory_experiments
from mixerzoo.studies.dispatch import find_study
from mixerzoo.studies.kinds import KINDS
from mixerzoo.studies.sweep.config import load_experiment, shipped_experiments

SWEEP = {
    "kind": "sweep",
    "name": "kinds-tiny",
    "base": {
        "data": {"task": {"name": "mqar_cat", "vocab_size": 30, "seq_len": 8}, "n_train": 64, "n_test": 32},
        "model": {"d_model": 16, "n_layers": 1, "mixer": "cat"},
        "train": {"epochs": 1, "batch_size": 32},
    },
    "grid": {"model.d_model": [8, 16]},
    "presets": {"quick": {}, "paper": {}},
}
ALLOWED = "sweep, mad, computed, lm, probe"


def write(tmp_path, raw: dict, name: str = "study.yaml"):
    path = tmp_path / name
    path.write_text(yaml.safe_dump(raw))
    return path


def one_line(err: pytest.ExceptionInfo, *needles: str) -> None:
    message = str(err.value)
    assert "\n" not in message, message
    for needle in needles:
        assert needle in message, f"{needle!r} not in {message!r}"


def computed_raw() -> dict:
    return yaml.safe_load(study_files.shipped_files()["zoology-baseconv-primitives"].read_text())


def test_every_shipped_study_is_in_one_folder_with_its_kind():
    files = study_files.shipped_files()
    assert {path.parent for path in files.values()} == {study_files.SHIPPED_DIR}
    for name, path in files.items():
        assert yaml.safe_load(path.read_text())["kind"] in KINDS, name
    scorecards = set(study_files.shipped_of_kind("scorecard"))
    assert set(shipped_experiments()) | set(theory_experiments()) | scorecards == set(files)
    assert not set(shipped_experiments()) & set(theory_experiments())
    assert study_files.shipped_kind(files["mad"]) == "mad"
    for name in theory_experiments():  # the loader checks each kind against its result
        assert load_theory(name).kind == study_files.shipped_kind(files[name])


def test_the_kind_picks_the_study():
    kinds = {name: find_study(name).kind for name in ("cat-mqar", "mad", "cat-fig4")}
    assert kinds == {"cat-mqar": "sweep", "mad": "mad", "cat-fig4": "computed"}
    assert find_study("icll-fig5").kind == "probe" and find_study("zoology-lm-ar-gap").kind == "lm"


@pytest.mark.parametrize("load", [load_experiment, load_theory, find_study])
def test_a_missing_or_unknown_kind_is_one_line_naming_the_file(tmp_path, load):
    path = write(tmp_path, {k: v for k, v in SWEEP.items() if k != "kind"})
    with pytest.raises(ConfigError) as err:
        load(str(path))
    one_line(err, str(path), "no `kind:`", ALLOWED)
    path = write(tmp_path, {**SWEEP, "kind": "grid"})
    with pytest.raises(ConfigError) as err:
        load(str(path))
    one_line(err, str(path), "kind 'grid' is not one of", ALLOWED)


def test_a_kind_the_content_contradicts_is_one_line(tmp_path):
    cases = [
        ({**SWEEP, "kind": "computed"}, load_theory, "kind 'computed', but the file has `base:`"),
        ({**computed_raw(), "kind": "sweep"}, load_experiment, "kind 'sweep', but the file has `result:`"),
        ({**computed_raw(), "kind": "lm"}, load_theory, "result 'zoology-primitives' is a computed study"),
        ({**SWEEP, "kind": "mad"}, load_experiment, "no data.task.name list"),
    ]
    for raw, load, needle in cases:
        path = write(tmp_path, raw)
        with pytest.raises(ConfigError) as err:
            load(str(path))
        one_line(err, str(path), needle)


def test_a_loader_refuses_a_study_of_another_kind_in_one_line():
    with pytest.raises(ConfigError) as err:
        load_experiment("cat-fig4")
    one_line(err, "kind 'computed' is not a grid sweep", "mixerzoo study run cat-fig4")
    with pytest.raises(ConfigError) as err:
        load_theory("cat-mqar")
    one_line(err, "kind 'sweep' is not a computed, LM or probe study")


def test_the_cli_reports_a_bad_kind_as_a_usage_error(tmp_path, run_cli):
    path = write(tmp_path, {**SWEEP, "kind": "grid"})
    code, out, err = run_cli(["study", "show", path])
    assert code == 2 and "kind 'grid' is not one of" in err and "Traceback" not in err


def test_the_kind_never_enters_a_run_config(tmp_path):
    from_file = load_experiment(str(write(tmp_path, SWEEP)), "quick").expand()
    from_dict = load_experiment({k: v for k, v in SWEEP.items() if k != "kind"}, "quick").expand()
    assert [p.config_hash for p in from_file] == [p.config_hash for p in from_dict]
    assert all("kind" not in p.config.model_dump() for p in from_file)
