"""CLI contracts: JSON outputs, data/train/eval round trip, and one-line errors with exit code 2."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
import yaml

RUN = {
    "name": "cli-tiny",
    "data": {"task": {"name": "mqar_cat", "vocab_size": 30, "seq_len": 8}, "n_train": 64, "n_test": 32},
    "model": {"d_model": 16, "n_layers": 1, "mixer": "cat"},
    "train": {"epochs": 1, "batch_size": 32},
}


@pytest.mark.parametrize(
    "args,needle",
    [
        (["data", "nope", "--out", "x.npz"], "unknown task 'nope'; allowed:"),
        (["data", "mqar", "--set", "num_kv_pairs=99", "--out", "x.npz"], "num_kv_pairs = 99"),
        (["data", "mqar", "--set", "seq_len", "--out", "x.npz"], "expected key=value"),
        (["train", "missing.yaml"], "does not exist"),
        (["eval", "missing.pt", "--data", "x.npz"], "does not exist"),
        (["bench", "--mixers", "nope"], "unknown sequence mixer 'nope'"),
        (["bench", "--seq-lens", "a,b"], "comma-separated list of int"),
        (["data", "mqar", "--bogus"], "No such option"),
    ],
)
def test_bad_input_exits_2_with_one_line(args, needle, run_cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(args)
    assert code == 2
    assert needle in err
    assert "Traceback" not in err


def test_bad_config_value_names_field(run_cli, tmp_path):
    cfg = tmp_path / "run.yaml"
    cfg.write_text(yaml.safe_dump({**RUN, "model": {**RUN["model"], "mixer": "nope"}}))
    code, _, err = run_cli(["train", str(cfg), "--results", str(tmp_path / "r")])
    assert code == 2 and "unknown sequence mixer 'nope'" in err and len(err.strip().splitlines()) == 1
    cfg.write_text("data: [unclosed")
    code, _, err = run_cli(["train", str(cfg)])
    assert code == 2 and "not valid YAML" in err


def test_data_train_results_eval_round_trip(run_cli, tmp_path):
    results = tmp_path / "results"
    npz = tmp_path / "d.npz"
    code, out, _ = run_cli(
        ["data", "mqar_cat", "--set", "vocab_size=30", "--set", "seq_len=8", "--n", "40", "--out", str(npz)],
    )
    assert code == 0 and "wrote 40 examples" in out
    arrays = np.load(npz)
    assert arrays["inputs"].shape == (40, 8) and arrays["labels"].dtype == np.int64

    cfg = tmp_path / "run.yaml"
    cfg.write_text(yaml.safe_dump(RUN))
    code, out, _ = run_cli(["train", str(cfg), "--results", str(results), "--quiet"])
    assert code == 0 and "checkpoint:" in out

    code, out, _ = run_cli(["results", "--json", "--results", str(results)])
    runs = json.loads(out)
    assert len(runs) == 1
    assert set(runs[0]) >= {
        "run_id",
        "status",
        "config",
        "config_hash",
        "metrics",
        "checkpoint",
        "wall_s",
        "params",
        "error",
    }
    assert runs[0]["status"] == "finished"

    code, out, _ = run_cli(["eval", runs[0]["checkpoint"], "--data", str(npz), "--json", "-"])
    payload = json.loads(out[out.index("{") :])
    assert code == 0 and payload["n_supervised"] == 40 * 2 and 0 <= payload["accuracy"] <= 1

    bad = tmp_path / "bad.npz"
    np.savez(bad, inputs=arrays["inputs"])
    code, _, err = run_cli(["eval", runs[0]["checkpoint"], "--data", str(bad)])
    assert code == 2 and "no array 'labels'" in err


def test_list_commands_json(run_cli):
    code, out, _ = run_cli(["mixers", "--json"])
    mixers = {m["name"]: m for m in json.loads(out)}
    assert {"attention", "cat", "lincat", "base_conv", "mlp"} <= set(mixers)
    assert mixers["cat"]["defaults"]["conv_width"] == 3 and mixers["cat"]["description"]
    code, out, _ = run_cli(["tasks", "--json"])
    tasks = {t["name"]: t for t in json.loads(out)}
    assert {"mqar", "mqar_cat", "mqnar"} <= set(tasks)
    assert tasks["mqar"]["defaults"]["power_a"] == 0.01


def test_bench_json_contract(run_cli, tmp_path):
    out_file = tmp_path / "bench.json"
    code, _, _ = run_cli(
        [
            "bench",
            "--mixers",
            "attention,base_conv",
            "--seq-lens",
            "16",
            "--batch",
            "4",
            "--steps",
            "2",
            "--warmup",
            "1",
            "--vocab",
            "64",
            "--json",
            str(out_file),
        ],
    )
    assert code == 0
    rows = json.loads(out_file.read_text())["results"]
    assert [r["mixer"] for r in rows] == ["attention", "base_conv"]
    for r in rows:
        assert {"mixer", "seq_len", "batch", "step_s", "tokens_per_s", "peak_mem_mb"} <= set(r)
        assert r["tokens_per_s"] == pytest.approx(r["batch"] * r["seq_len"] / r["step_s"])


def test_console_script_runs_as_a_process():
    proc = subprocess.run(
        [sys.executable, "-m", "mixerzoo.cli.main", "tasks", "--bogus"], capture_output=True, text=True
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr


def test_data_stats_summarizes_without_writing(run_cli, tmp_path):
    code, out, _ = run_cli(
        ["data", "regbench", "--set", "preset=reference", "--n", "50", "--stats"],
    )
    assert code == 0 and "generated 50 examples of regbench" in out
    rows = {line.split()[0]: line.split()[1:] for line in out.splitlines()[2:]}
    assert set(rows) == {"supervised_positions", "num_states", "num_strings", "length"}
    assert 10 <= float(rows["num_strings"][0]) <= 19
    assert not list(tmp_path.iterdir())
    # --out and --stats together write and summarize
    npz = tmp_path / "s.npz"
    code, out, _ = run_cli(["data", "select", "--n", "8", "--out", str(npz), "--stats"])
    assert code == 0 and npz.exists() and "scored_positions" in out


def test_data_needs_out_or_stats(run_cli):
    code, _, err = run_cli(["data", "mqar"])
    assert code == 2 and "--out" in err and "--stats" in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("metrics", "text"),
    [
        ({"accuracy_per_query": 0.99904, "loss": 0.1}, "acc/query 0.9990"),
        ({"accuracy": 0.36, "loss": 1.6}, "accuracy 0.3600"),  # classification (ListOps, images)
        ({"r2": 0.9954, "loss": 0.0007}, "r2 0.9954"),  # regression (atomic tasks)
        ({"loss": 0.5}, "-"),
    ],
)
def test_results_table_shows_each_task_kinds_primary_metric(metrics, text):
    """`mixerzoo results` used to print "-" for every classification and regression run."""
    from mixerzoo.cli.results_table import primary_metric_text

    assert primary_metric_text(metrics) == text
