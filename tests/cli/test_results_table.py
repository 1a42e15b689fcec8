"""`mixerzoo results` you can read: task / mixer / d_model / params columns, --columns, --sort,
--filter, full names wrapped (never cut); `mixerzoo eval RUN_ID`."""

import json

import pytest
import yaml

LONG = "a-rather-long-run-name-that-a-sweep-might-give-its-run-so-that-cutting-it-loses-the-end"


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """Two finished task runs: cat at d_model 16 (a long name) and attention at d_model 8."""
    from mixerzoo.cli.main import main

    root = tmp_path_factory.mktemp("results")
    config = root / "run.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "data": {
                    "task": {"name": "mqar_cat", "vocab_size": 30, "seq_len": 8},
                    "n_train": 32,
                    "n_test": 16,
                },
                "model": {"d_model": 8, "n_layers": 1, "mixer": "attention"},
                "train": {"epochs": 1, "batch_size": 16, "max_steps": 2, "device": "cpu"},
            }
        )
    )
    res = str(root / "res")
    for sets in (["model.mixer=cat", "model.d_model=16", f"name={LONG}"], []):
        try:
            main(
                ["train", str(config), "--results", res, "--quiet", *(a for s in sets for a in ("--set", s))]
            )
        except SystemExit as stop:
            assert stop.code == 0
    return res


def rows(out):
    return [line.split() for line in out.splitlines()]


def test_the_default_table_has_task_mixer_d_model_params_and_full_names(store, run_cli):
    code, out, err = run_cli(["results", "--results", store])
    assert code == 0, err
    header = out.splitlines()[0].split()
    for column in ("task", "mixer", "d_model", "params", "name", "stale"):
        assert column in header
    assert "mqar_cat" in out and " cat " in out and " attention " in out
    start = header.index("name")
    name_col = out.splitlines()[0].index("name")
    pieces = [line[name_col:].split()[0] for line in out.splitlines()[1:] if len(line) > name_col]
    assert LONG in "".join(pieces)  # wrapped over several lines, every character kept
    assert start > 0 and max(len(line) for line in out.splitlines()) < 200


def test_columns_sort_and_filter(store, run_cli):
    code, out, _ = run_cli(["results", "--results", store, "--columns", "mixer,d_model", "--sort", "d_model"])
    assert code == 0 and rows(out) == [["mixer", "d_model"], ["attention", "8"], ["cat", "16"]]
    code, out, _ = run_cli(
        ["results", "--results", store, "--columns", "mixer,d_model", "--sort", "-d_model"]
    )
    assert rows(out)[1:] == [["cat", "16"], ["attention", "8"]]
    code, out, _ = run_cli(
        ["results", "--results", store, "--columns", "mixer", "--filter", "model.d_model=16"]
    )
    assert rows(out) == [["mixer"], ["cat"]]
    code, out, _ = run_cli(
        ["results", "--results", store, "--columns", "d_model", "--filter", "mixer=attention"]
    )
    assert rows(out) == [["d_model"], ["8"]]
    code, out, _ = run_cli(["results", "--results", store, "--json", "--filter", "mixer=cat"])
    assert [r["name"] for r in json.loads(out)] == [LONG]


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--columns", "mixr"], "did you mean 'mixer'"),
        (["--sort", "nope"], "--sort 'nope': unknown column"),
        (["--filter", "mixer"], "expected KEY=VALUE"),
    ],
)
def test_a_bad_column_sort_or_filter_is_one_line(store, run_cli, args, needle):
    code, out, err = run_cli(["results", "--results", store, *args])
    assert code == 2 and needle in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_eval_takes_a_run_id_and_scores_its_own_test_split(store, run_cli):
    code, out, _ = run_cli(["results", "--results", store, "--json", "--filter", "mixer=cat"])
    (run,) = json.loads(out)
    code, out, err = run_cli(["eval", run["run_id"], "--results", store, "--json", "-"])
    assert code == 0, err
    metrics = json.loads(out)
    assert metrics["accuracy_per_query"] == pytest.approx(run["metrics"]["accuracy_per_query"])
    code, _, err = run_cli(["eval", "no-such-run", "--results", store])
    assert code == 2 and "no-such-run" in err and len(err.strip().splitlines()) == 1


def test_train_with_set_records_its_overrides(store, run_cli):
    code, out, _ = run_cli(["results", "--results", store, "--json", "--filter", "mixer=cat"])
    (run,) = json.loads(out)
    assert run["overrides"] == {"model.mixer": "cat", "model.d_model": 16, "name": LONG}
    code, out, _ = run_cli(
        ["results", "--results", store, "--columns", "overrides", "--filter", "mixer=attention"]
    )
    assert rows(out) == [["overrides"], ["-"]]  # trained as the file says
