"""The command line grouped by noun: ``study``, ``lm``, ``mixers NAME``, ``tasks NAME``.

The old names (``run``, ``plot``, ``report``, ``check``, ``experiments``, ``theory list/run``,
``train-lm``, ``lm-eval``, ``bench --config``) are aliases: the same stdout as the new form and
one note line on stderr naming it; an old name that ends in a user error prints only the error.
"""

from __future__ import annotations

import json
import re

import pytest
import yaml

SWEEP = {
    "kind": "sweep",
    "name": "nouns-tiny",
    "claim": "paper: attention solves it",
    "base": {
        "data": {"task": {"name": "mqar_cat", "vocab_size": 30, "seq_len": 8}, "n_train": 32, "n_test": 16},
        "model": {"d_model": 8, "n_layers": 1, "mixer": "attention"},
        "train": {"epochs": 1, "batch_size": 16, "device": "cpu"},
    },
    "grid": {"train.lr": [1e-3, 1e-2]},
    "figure": {"x": "train.lr", "panels": None, "lines": None},
    "presets": {"quick": {}, "paper": {}},
    "claims": [
        {
            "claim": "accuracy is a fraction",
            "paper_ref": "test",
            "where": {},
            "metric": "accuracy_per_query",
            "test": {"op": ">=", "value": 0.0},
        }
    ],
}
THM3 = ["--set", "seq_lens=[24, 40]", "--set", "num_tokens_to_copy=4", "--set", "n_test=20"]


def note(old: str, new: str) -> str:
    return f"note: `mixerzoo {old}` is now `mixerzoo {new}`"


def assert_alias(run_cli, old: list, new: list, old_name: str, new_name: str) -> tuple[str, str]:
    """The old form prints what the new form prints, and on stderr one note line more."""
    code_new, out_new, err_new = run_cli(new)
    code_old, out_old, err_old = run_cli(old)
    assert code_old == code_new, err_old
    assert out_old == out_new and "note:" not in out_old and "note:" not in err_new
    lines = err_old.strip().splitlines()
    assert lines.count(note(old_name, new_name)) == 1
    assert [ln for ln in lines if ln != note(old_name, new_name)] == err_new.strip().splitlines()
    return out_new, err_old


@pytest.fixture
def sweep_file(tmp_path):
    path = tmp_path / "nouns-tiny.yaml"
    path.write_text(yaml.safe_dump(SWEEP))
    return path


# -- study ---------------------------------------------------------------------------------------
def test_study_list_json_holds_every_kind_of_study(run_cli):
    code, out, err = run_cli(["study", "list", "--json"])
    assert code == 0 and err == ""
    rows = {r["name"]: r for r in json.loads(out)}
    kinds = {name: r["kind"] for name, r in rows.items()}
    assert kinds["cat-mqar"] == "sweep" and kinds["mad"] == "mad"
    assert kinds["cat-fig4"] == "computed" and kinds["zoology-lm-ar-gap"] == "lm"
    assert kinds["icll-fig4"] == "probe"
    assert rows["cat-mqar"]["runs"]["quick"] == 8 and rows["cat-fig4"]["runs"] == {"quick": 1, "paper": 1}
    assert rows["cat-fig4"]["claims"][0]["paper_ref"] == "CAT Sec. 5, Prop. 1"
    from mixerzoo.experiments.experiment_config import shipped_experiments
    from mixerzoo.theory.experiments import theory_experiments

    assert set(rows) == set(shipped_experiments()) | set(theory_experiments())


def test_study_show_describes_a_sweep_and_a_computed_study(run_cli):
    code, out, _ = run_cli(["study", "show", "cat-mqar"])
    assert code == 0
    assert "cat-mqar (sweep): CAT-ws Fig. 3" in out and "quick (8 runs)" in out
    assert "axis model.d_model: 32, 64, 128" in out and "claims (3):" in out
    code, out, _ = run_cli(["study", "show", "cat-fig4", "--json"])
    info = json.loads(out)
    assert code == 0 and info["kind"] == "computed" and info["default_preset"] == "quick"
    assert (
        info["parameters"]["quick"]["seq_len"] == 65536 and info["parameters"]["paper"]["seq_len"] == 1048576
    )


def test_an_unknown_study_is_one_line_with_a_guess(run_cli):
    code, _, err = run_cli(["study", "show", "cat-mqr"])
    assert code == 2 and err.strip().count("\n") == 0 and "did you mean 'cat-mqar'" in err
    code, _, err = run_cli(["study", "run", "cat-fg4", "--dry-run"])
    assert code == 2 and "did you mean 'cat-fig4'" in err and "note:" not in err


def test_study_run_plot_report_check_a_sweep(run_cli, sweep_file, tmp_path):
    res = ["--results", tmp_path / "r"]
    code, out, _ = run_cli(["study", "run", sweep_file, *res, "--quiet"])
    assert code == 0 and "2 finished" in out and "next: mixerzoo study plot" in out
    code, out, _ = run_cli(["study", "plot", sweep_file, *res, "--out", tmp_path / "figs"])
    assert code == 0 and "2/2 runs finished" in out and (tmp_path / "figs" / "nouns-tiny.png").is_file()
    code, out, _ = run_cli(["study", "report", sweep_file, *res, "--json", "--out", tmp_path / "r.html"])
    assert code == 0 and json.loads(out)["claims"][0]["verdict"] == "reproduced"
    code, out, _ = run_cli(["study", "check", sweep_file, *res])
    assert code == 0 and "1 reproduced" in out
    # the old names: the same output, and the note on stderr
    for verb in ("check", "report"):
        extra = ["--json", "--out", tmp_path / "r.html"] if verb == "report" else []
        assert_alias(
            run_cli,
            [verb, sweep_file, *res, *extra],
            ["study", verb, sweep_file, *res, *extra],
            verb,
            f"study {verb}",
        )
    out, _ = assert_alias(
        run_cli,
        ["run", sweep_file, *res, "--dry-run"],
        ["study", "run", sweep_file, *res, "--dry-run"],
        "run",
        "study run",
    )
    assert "2 runs, 2 finished, 0 to run" in out


def test_study_serves_the_mad_protocol(run_cli, tmp_path):
    args = ["mad", "--preset", "quick", "--set", "model=attention", "--results", tmp_path / "r"]
    code, out, _ = run_cli(["study", "run", *args, "--dry-run"])
    assert code == 0 and "72 runs, 0 finished, 72 to run" in out  # 6 tasks x 2 levels x 3 lr x 2 wd
    (tmp_path / "r").mkdir()
    from mixerzoo.experiments.results_store import ResultsStore

    ResultsStore(tmp_path / "r")
    code, out, _ = run_cli(["study", "check", *args])
    assert code == 0 and "0/72 runs finished" in out and "not run" in out


def test_study_runs_and_checks_a_computed_study_as_theory_run_did(run_cli, tmp_path):
    res = ["--results", tmp_path]
    code, out, _ = run_cli(["study", "check", "cat-thm3-selective-copy", *res])
    assert code == 0 and "[not run]" in out and "(computed, not run)" in out
    code, new, _ = run_cli(["study", "run", "cat-thm3-selective-copy", *THM3, *res])
    assert code == 0 and "predicted" in new and "[reproduced]" in new
    assert (tmp_path / "theory" / "cat-thm3-selective-copy.json").is_file()
    code, old, err = run_cli(["theory", "run", "cat-thm3-selective-copy", *THM3, *res])
    assert code == 0 and err.strip() == note("theory run", "study run")

    def steady(text: str) -> str:  # the wall time and the attempt differ from run to run
        return re.sub(r"\n[\d.]+ s; wrote .*", "", text)

    assert steady(old) == steady(new)
    assert_alias(
        run_cli,
        ["check", "cat-thm3-selective-copy", *res],
        ["study", "check", "cat-thm3-selective-copy", *res],
        "check",
        "study check",
    )
    code, out, _ = run_cli(["study", "plot", "cat-thm3-selective-copy", *res])
    assert code == 0 and "predicted" in out


def test_a_sweep_option_on_a_computed_study_is_one_line(run_cli, tmp_path):
    code, _, err = run_cli(["study", "run", "cat-fig4", "--skip-failed", "--results", tmp_path])
    assert code == 2 and "--skip-failed: cat-fig4 is a computed study" in err and err.count("\n") == 1


# -- old names: the note ----------------------------------------------------------------------
def test_the_note_goes_to_stderr_once_and_json_stays_parseable(run_cli):
    code, out, err = run_cli(["theory", "list", "--json"])
    assert code == 0 and {r["name"] for r in json.loads(out)} >= {"cat-fig4"}
    assert err.strip() == note("theory list", "study list")
    code, out, err = run_cli(["experiments", "--json"])
    assert code == 0 and "cat-mqar" in {r["name"] for r in json.loads(out)}
    assert err.strip() == note("experiments", "study list")
    code, out, err = run_cli(["study", "list", "--json"])  # no note left over from before
    assert code == 0 and err == ""


def test_an_old_name_that_ends_in_a_user_error_prints_only_the_error(run_cli, tmp_path):
    code, _, err = run_cli(["check", "no-such-experiment", "--results", tmp_path])
    assert code == 2 and err.count("\n") == 1 and "unknown experiment" in err


# -- lm ----------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def lm_run(tmp_path_factory):
    """A tiny language-model run folder trained by `mixerzoo lm train`; returns (folder, config)."""
    from mixerzoo.cli.main import main

    root = tmp_path_factory.mktemp("lm_nouns")
    (root / "input.txt").write_text("the cat sat on the mat. " * 80)
    cfg = {
        "name": "nouns-lm",
        "corpus": {"name": "char", "data_dir": str(root)},
        "model": {"d_model": 8, "n_layers": 1, "mixer": "attention"},
        "train": {
            "steps": 2,
            "batch_size": 2,
            "block_size": 8,
            "eval_every": 0,
            "device": "cpu",
            "threads": 1,
        },
    }
    (root / "run.yaml").write_text(yaml.safe_dump(cfg))
    main(
        [
            "lm",
            "train",
            str(root / "run.yaml"),
            "--out",
            str(root / "run"),
            "--results",
            str(root / "r"),
            "--quiet",
        ]
    )
    return root / "run", root / "run.yaml"


def test_lm_train_writes_a_run_folder(lm_run):
    run, _ = lm_run
    assert (run / "result.json").is_file()


def test_lm_eval_is_lm_eval_under_a_new_name(run_cli, lm_run):
    run, _ = lm_run
    args = ["lengths", run, "--factors", "1,2", "--max-tokens", "64", "--json"]
    out, _ = assert_alias(run_cli, ["lm-eval", *args], ["lm", "eval", *args], "lm-eval", "lm eval")
    assert [r["factor"] for r in json.loads(out)["rows"]] == [1, 2]


def test_lm_bench_measures_a_config_and_bench_config_is_its_alias(run_cli, lm_run, tmp_path):
    _, config = lm_run
    args = ["--steps", "2", "--warmup", "0"]
    code, _, err = run_cli(["lm", "bench", config, *args, "--json", tmp_path / "new.json"])
    assert code == 0 and err == ""
    (row,) = json.loads((tmp_path / "new.json").read_text())["results"]
    assert row["config"] == "nouns-lm" and row["tokens_per_s"] == pytest.approx(2 * 8 / row["step_s"])
    code, _, err = run_cli(["bench", "--config", config, *args, "--json", tmp_path / "old.json"])
    assert code == 0 and err.strip() == note("bench --config", "lm bench")
    assert json.loads((tmp_path / "old.json").read_text())["results"][0]["config"] == "nouns-lm"


def test_train_lm_is_lm_train_with_a_note(run_cli, lm_run, tmp_path):
    _, config = lm_run
    args = [config, "--out", tmp_path / "o", "--results", tmp_path / "r", "--quiet"]
    code, out, err = run_cli(["train-lm", *args])
    assert code == 0 and "step 2:" in out and err.strip() == note("train-lm", "lm train")


# -- mixers NAME, tasks NAME -----------------------------------------------------------------
def test_mixers_name_shows_each_parameter_with_its_default_type_and_range(run_cli):
    code, out, _ = run_cli(["mixers", "cat"])
    assert code == 0 and out.startswith("cat (sequence mixer): ")
    (line,) = [ln for ln in out.splitlines() if ln.startswith("conv_width")]
    assert line.split()[:4] == ["conv_width", "int", "3", ">="] and "CAT" in out
    code, out, _ = run_cli(["mixers", "cat", "--json"])
    params = {p["name"]: p for p in json.loads(out)["parameters"]}
    assert params["conv_width"] == {
        "name": "conv_width",
        "type": "int",
        "default": 3,
        "allowed": ">= 1",
        "description": "filter length W",
    }
    assert params["conv_type"]["allowed"] == "per_head, multi_head"


def test_tasks_name_shows_defaults_and_bounds(run_cli):
    code, out, _ = run_cli(["tasks", "mqar", "--json"])
    params = {p["name"]: p for p in json.loads(out)["parameters"]}
    assert code == 0 and params["power_a"]["default"] == 0.01 and params["power_a"]["allowed"] == "> 0"


@pytest.mark.parametrize(("args", "close"), [(["mixers", "catt"], "cat"), (["tasks", "mqr"], "mqar")])
def test_an_unknown_entry_is_one_line_with_close_matches(run_cli, args, close):
    code, _, err = run_cli(args)
    assert code == 2 and err.count("\n") == 1 and f"close matches: {close}" in err


# -- help -------------------------------------------------------------------------------------
def test_help_lists_the_nouns_first_and_the_old_names_last(run_cli):
    code, out, _ = run_cli(["--help"])
    assert code == 0
    sections = [ln for ln in out.splitlines() if ln and not ln.startswith(" ") and ln.endswith(":")]
    assert sections[-1].startswith("Old names") and out.index("  study ") < out.index("  run ")
    assert re.search(r"\n  run +now `mixerzoo study run`", out)
