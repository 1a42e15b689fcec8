"""`mixerzoo bench`: failed measurements are reported, never waited on; fits; batch per length; refusals."""

from __future__ import annotations

import json
import math

import pytest

from mixerzoo.training import throughput as tp

TINY = dict(seq_len=16, batch=2, d_model=8, n_layers=1, vocab_size=32, steps=1, warmup=0)


def test_killed_child_is_a_failed_row_not_a_hang():
    """The OOM killer's SIGKILL, injected by the test hook: the parent reports it and returns."""
    row = tp.bench_isolated(fault="kill", mixer="retnet", **TINY)
    assert row.status == "failed"
    assert "SIGKILL" in row.error and "out of memory" in row.error
    assert row.step_s is None and row.peak_mem_mb is None
    assert (row.mixer, row.seq_len, row.batch) == ("retnet", 16, 2)


def test_error_in_child_is_a_failed_row_with_the_message():
    row = tp.bench_isolated(mixer="mh_cat", **{**TINY, "d_model": 7})  # mh_cat's heads must divide d = 7
    assert row.status == "failed" and row.error.startswith("ConfigError: ")


def test_time_limit_is_a_failed_row():
    # a spawned child cannot even import torch within a millisecond
    row = tp.bench_isolated(timeout_s=0.001, mixer="retnet", **TINY)
    assert row.status == "failed" and row.error == "timed out after 0.001 s"


def test_batch_keeps_tokens_per_step_constant():
    assert [tp.batch_for_length(n) for n in (64, 1024, 4096, 16384)] == [64, 4, 1, 1]
    assert tp.batch_for_length(100, tokens=1000) == 10


def test_fit_exponent_recovers_power_laws():
    lens = [1024, 4096, 16384]
    assert tp.fit_exponent(lens, [3.0 * n**1.5 for n in lens]) == pytest.approx(1.5)
    assert tp.fit_exponent(lens, [0.5 * n for n in lens]) == pytest.approx(1.0)
    assert tp.fit_exponent([1024], [1.0]) is None


def row(mixer, n, batch, step_s, mem, status="ok"):
    if status != "ok":
        return tp.failed_result(mixer, n, batch, status, "because")
    return tp.BenchResult(mixer, n, batch, step_s, batch * n / step_s, mem, 1, 0.0)


def test_fits_are_per_sequence_so_batch_per_length_compares():
    # constant tokens: batch 4, 1; a linear mixer takes the same time per step at both lengths
    rows = [row("lin", 1024, 4, 0.1, 400.0), row("lin", 4096, 1, 0.1, 400.0)]
    rows += [
        row("quad", 1024, 4, 0.1, 100.0),
        row("quad", 4096, 1, 0.4, 400.0),
        row("quad", 16384, 1, 0, 0, "failed"),
    ]
    fits = {f["mixer"]: f for f in tp.scaling_fits(rows)}
    assert fits["lin"]["time_exponent"] == pytest.approx(1.0) and fits["lin"]["time_ratio"] == [4.0]
    assert fits["quad"]["time_exponent"] == pytest.approx(2.0) and fits["quad"]["seq_lens"] == [1024, 4096]
    assert fits["quad"]["mem_exponent"] == pytest.approx(math.log(16) / math.log(4))
    table = tp.scaling_markdown(rows).splitlines()
    assert (
        table[0]
        == "| mixer | L=1024 ms/step (MB) | L=4096 ms/step (MB) | L=16384 ms/step (MB) | k time | k memory |"
    )
    assert table[2] == "| `lin` | 100 (400) B=4 | 100 (400) B=1 |  | 1.00 | 1.00 |"
    assert "failed (B=1)" in table[3]


def test_memory_estimate_of_a_linear_mixer_grows_linearly():
    kw = dict(batch=2, d_model=16, n_layers=1, vocab_size=64)
    small, large = (tp.saved_activation_mb("mamba", n, **kw) for n in (128, 512))
    assert large / small == pytest.approx(4.0, rel=0.1)
    est = tp.estimate_memory_mb("mamba", 4096, probe_len=128, **kw)
    assert est == pytest.approx(2 * small * 32, rel=0.15)


def test_cli_skips_what_does_not_fit_and_reports_fits(run_cli, tmp_path):
    out = tmp_path / "b.json"
    args = ["bench", "--mixers", "retnet", "--seq-lens", "8,16", "--d-model", "8", "--layers", "1"]
    args += ["--vocab", "32", "--steps", "1", "--warmup", "0", "--max-mem-mb", "0.0001", "--json", str(out)]
    code, text, _ = run_cli(args)
    assert code == 0
    payload = json.loads(out.read_text())
    assert [r["status"] for r in payload["results"]] == ["skipped", "skipped"]
    assert all("MB available" in r["error"] and r["est_mem_mb"] > 0 for r in payload["results"])
    assert [r["batch"] for r in payload["results"]] == [512, 256]  # 4096 tokens per step
    assert payload["fits"] == [
        {
            "mixer": "retnet",
            "seq_lens": [],
            "time_exponent": None,
            "mem_exponent": None,
            "time_ratio": [],
            "mem_ratio": [],
        }
    ]
    assert "skipped: estimated" in text


@pytest.mark.parametrize(
    "extra,needle",
    [
        (["--steps", "0"], "--steps"),
        (["--steps", "-3"], "--steps"),
        (["--warmup", "-1"], "--warmup"),
        (["--batch", "0"], "--batch"),
        (["--tokens", "0"], "--tokens"),
        (["--seq-lens", "0,64"], "--seq-lens 0"),
        (["--seq-lens", ""], "at least one value"),
        (["--timeout", "0"], "--timeout"),
        (["--threads", "0"], "--threads"),
    ],
)
def test_non_positive_counts_are_one_line_errors(extra, needle, run_cli):
    code, _, err = run_cli(["bench", *extra])
    assert code == 2 and needle in err and "Traceback" not in err
    assert len([line for line in err.splitlines() if line.startswith(("Error", "error"))]) == 1


def test_lm_bench_measures_an_lm_run_config(tmp_path, run_cli):
    import yaml

    (tmp_path / "input.txt").write_text("abcdefgh " * 100)
    cfg = {
        "name": "tiny-lm",
        "corpus": {"name": "char"},
        "model": {"d_model": 8, "n_layers": 1, "mixer": "attention"},
        "train": {"batch_size": 2, "block_size": 8, "device": "cpu", "threads": 1},
    }
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(cfg))
    args = ["lm", "bench", str(tmp_path / "run.yaml"), "--data-dir", str(tmp_path)]
    code, _, err = run_cli([*args, "--steps", "2", "--warmup", "0", "--json", str(tmp_path / "b.json")])
    assert code == 0, err
    (row,) = json.loads((tmp_path / "b.json").read_text())["results"]
    assert row["config"] == "tiny-lm" and row["world_size"] == 1 and row["rank"] == 0
    assert row["tokens_per_s"] == pytest.approx(2 * 8 / row["step_s"])
    code, _, err = run_cli(["lm", "bench", str(tmp_path / "run.yaml")])
    assert code == 2 and "give --data-dir" in err
