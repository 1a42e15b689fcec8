"""The command line grouped by noun: ``study``, ``lm``, ``mixers NAME``, ``tasks NAME``.

The retired names (``run``, ``plot``, ``report``, ``check``, ``experiments``, ``theory list/run``,
``train-lm``, ``lm-eval``, ``bench --config``) are one line naming the form that replaced them.
"""

from __future__ import annotations

import json

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
    assert rows["cat-mqar"]["runs"]["quick"] == 10 and rows["cat-fig4"]["runs"] == {"quick": 1, "paper": 1}
    assert rows["cat-fig4"]["claims"][0]["paper_ref"] == "CAT Sec. 5, Prop. 1"
    from mixerzoo.studies.computed.files import theory_experiments
    from mixerzoo.studies.sweep.config import shipped_experiments

    assert set(rows) == set(shipped_experiments()) | set(theory_experiments()) | {"scorecard"}
    assert kinds["scorecard"] == "scorecard" and rows["scorecard"]["claims"] == []


def test_study_show_describes_a_sweep_and_a_computed_study(run_cli):
    code, out, _ = run_cli(["study", "show", "cat-mqar"])
    assert code == 0
    assert "cat-mqar (sweep): CAT-ws Fig. 3" in out and "quick (10 runs)" in out
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
    assert code == 2 and "did you mean 'cat-fig4'" in err


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
    code, out, _ = run_cli(["study", "run", sweep_file, *res, "--dry-run"])
    assert code == 0 and "2 runs, 2 finished, 0 to run" in out


def test_a_sweeps_dry_run_with_workers_gives_the_pools_time(run_cli, sweep_file, tmp_path, monkeypatch):
    """``study run --dry-run --workers 2``: beside the one-after-another estimate, the pool's time
    (each run's steps timed on one worker's share of the cores, ``pool_wall_time``)."""
    from mixerzoo.studies.sweep import cost

    monkeypatch.setattr(cost, "pool_wall_time", lambda configs, runs, workers: 95.0 * len(configs))
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    args = ["study", "run", sweep_file, "--results", tmp_path / "r", "--dry-run"]
    code, out, err = run_cli([*args, "--workers", "2"])
    assert code == 0, err
    assert "with 2 worker processes, each run on 1 core (its steps timed so): ~3 min, the runs" in out
    code, out, _ = run_cli(args)
    assert code == 0 and "worker processes" not in out  # one worker: the one-after-another line only


def test_study_serves_the_mad_protocol(run_cli, tmp_path):
    args = ["mad", "--preset", "quick", "--set", "model=attention", "--results", tmp_path / "r"]
    code, out, _ = run_cli(["study", "run", *args, "--dry-run"])
    assert code == 0 and "72 runs, 0 finished, 72 to run" in out  # 6 tasks x 2 levels x 3 lr x 2 wd
    (tmp_path / "r").mkdir()
    from mixerzoo.store.results import ResultsStore

    ResultsStore(tmp_path / "r")
    code, out, _ = run_cli(["study", "check", *args])
    assert code == 0 and "0/72 runs finished" in out and "not run" in out


def test_study_runs_and_checks_a_computed_study(run_cli, tmp_path):
    res = ["--results", tmp_path]
    code, out, _ = run_cli(["study", "check", "cat-thm3-selective-copy", *res])
    assert code == 0 and "[not run]" in out and "(computed, not run)" in out
    code, new, _ = run_cli(["study", "run", "cat-thm3-selective-copy", *THM3, *res])
    assert code == 0 and "predicted" in new and "[reproduced]" in new
    assert (tmp_path / "theory" / "cat-thm3-selective-copy.json").is_file()
    code, out, _ = run_cli(["study", "check", "cat-thm3-selective-copy", *res])
    assert code == 0 and "claims: 1 reproduced" in out and "[not run]" not in out
    code, out, _ = run_cli(["study", "plot", "cat-thm3-selective-copy", *res])
    assert code == 0 and "predicted" in out


def test_a_sweep_option_on_a_computed_study_is_one_line(run_cli, tmp_path):
    code, _, err = run_cli(["study", "run", "cat-fig4", "--skip-failed", "--results", tmp_path])
    assert code == 2 and "--skip-failed: cat-fig4 is a computed study" in err and err.count("\n") == 1


# -- retired names -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("argv", "old", "new"),
    [
        (["experiments", "--json"], "experiments", "study list"),
        (["run", "cat-mqar", "--dry-run"], "run", "study run"),
        (["plot", "cat-mqar"], "plot", "study plot"),
        (["report", "cat-mqar", "--json"], "report", "study report"),
        (["check", "cat-mqar", "--help"], "check", "study check"),
        (["theory", "list"], "theory list", "study list"),
        (["theory", "run", "cat-fig4"], "theory run", "study run"),
        (["theory"], "theory", "study"),
        (["train-lm", "run.yaml", "--out", "runs/x"], "train-lm", "lm train"),
        (["lm-eval", "lengths", "runs/x"], "lm-eval", "lm eval"),
        (["bench", "--steps", "2", "--config", "run.yaml"], "bench --config", "lm bench"),
        (["bench", "--config=run.yaml"], "bench --config", "lm bench"),
    ],
)
def test_a_retired_name_is_one_line_naming_its_replacement(run_cli, argv, old, new):
    code, out, err = run_cli(argv)
    assert code == 2 and out == ""
    assert err == f"Error: 'mixerzoo {old}' was retired; use 'mixerzoo {new}' (see 'mixerzoo --help')\n"


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


def test_lm_eval_scores_a_run_folder(run_cli, lm_run):
    run, _ = lm_run
    code, out, _ = run_cli(["lm", "eval", "lengths", run, "--factors", "1,2", "--max-tokens", "64", "--json"])
    assert code == 0 and [r["factor"] for r in json.loads(out)["rows"]] == [1, 2]


def test_lm_bench_measures_a_config(run_cli, lm_run, tmp_path):
    _, config = lm_run
    args = ["--steps", "2", "--warmup", "0"]
    code, _, err = run_cli(["lm", "bench", config, *args, "--json", tmp_path / "new.json"])
    assert code == 0 and err == ""
    (row,) = json.loads((tmp_path / "new.json").read_text())["results"]
    assert row["config"] == "nouns-lm" and row["tokens_per_s"] == pytest.approx(2 * 8 / row["step_s"])


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
def test_help_lists_the_nouns_first_and_no_retired_name(run_cli):
    code, out, _ = run_cli(["--help"])
    assert code == 0
    sections = [ln for ln in out.splitlines() if ln and not ln.startswith(" ") and ln.endswith(":")]
    assert sections[1].startswith("Studies") and out.index("  study ") < out.index("  train ")
    listed = {ln.split()[0] for ln in out.split("Studies", 1)[1].splitlines() if ln.startswith("  ")}
    assert listed.isdisjoint(
        {"experiments", "run", "plot", "report", "check", "theory", "train-lm", "lm-eval"}
    )
