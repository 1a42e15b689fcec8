"""The cost of a sweep before it starts (``--dry-run``): tokens, FLOPs and GPU-hours per run."""

from __future__ import annotations

import re

import pytest
import yaml

from mixerzoo.config import load_run_config
from mixerzoo.experiments.cost import GPUS, flops_per_token, sweep_cost, train_tokens

BASE = {
    "data": {"task": {"name": "mqar_cat", "vocab_size": 30, "seq_len": 8}, "n_train": 48, "n_test": 16},
    "model": {"d_model": 8, "n_layers": 1, "mixer": "attention", "vocab_size": 30},
    "train": {"epochs": 2, "batch_size": 16, "device": "cpu"},
}
STUDY = {
    "kind": "sweep",
    "name": "tiny-cost",
    "paper": "test Fig. 0",
    "base": BASE,
    "variants": {"attention-1L": {}},
    "grid": {"train.lr": [1e-2, 3e-3]},
    "aggregate": {"metric": "accuracy_per_query", "reduce": "max", "over": ["train.lr"]},
    "presets": {"quick": {}, "paper": {}},
}
#: FLOPs per token of BASE's model, by hand: N = 872 (the block: norms 16 + 16, qkv 192 + 24, out 64 + 8,
#: MLP 256 + 32 + 256 + 8) + 16 (final norm) + 240 (the head, tied to the 30 x 8 embedding; the token
#: and position embeddings themselves are lookups) = 1128; 6 N + 6 L d = 6 * 1128 + 6 * 8 * 8 (one
#: attention layer)
FLOPS_PER_TOKEN = 6 * 1128 + 6 * 8 * 8


def test_tokens_are_epochs_times_examples_times_length_capped_by_max_steps():
    assert train_tokens(load_run_config(BASE)) == 2 * 48 * 8
    capped = {**BASE, "train": {**BASE["train"], "max_steps": 2}}
    assert train_tokens(load_run_config(capped)) == 2 * 16 * 8


def test_flops_per_token_is_six_n_plus_the_attention_term():
    assert flops_per_token(load_run_config(BASE)) == FLOPS_PER_TOKEN
    conv = {**BASE, "model": {**BASE["model"], "mixer": "base_conv"}}
    assert flops_per_token(load_run_config(conv)) % 6 == 0  # no attention term: 6 N only


def test_gpu_hours_at_the_stated_peak_and_utilisation():
    (cost,) = sweep_cost([load_run_config(BASE)], "a100", 0.5)
    assert cost.flops == 768 * FLOPS_PER_TOKEN
    assert cost.gpu_hours == pytest.approx(768 * FLOPS_PER_TOKEN / (312e12 * 0.5) / 3600)
    assert GPUS["h100"][1] == 989e12


def test_dry_run_prints_each_runs_cost_and_the_total(run_cli, tmp_path):
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(STUDY))
    code, out, err = run_cli(["run", path, "--preset", "paper", "--dry-run", "--results", tmp_path / "r"])
    assert code == 0, err
    flops = 768 * FLOPS_PER_TOKEN
    runs = [line for line in out.splitlines() if line.startswith("pending")]
    assert len(runs) == 2 and all(f"768 tokens  {flops:.3g} FLOPs" in line for line in runs)
    (total,) = [line for line in out.splitlines() if line.startswith("cost:")]
    hours = 2 * flops / (989e12 * 0.4) / 3600
    assert f"2 runs, 1.54e+03 tokens, {2 * flops:.3g} FLOPs, {hours:.3g} GPU-hours" in total
    assert "NVIDIA H100 SXM at 40%" in total and "989 TFLOP/s" in total
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize(
    "extra,needle",
    [
        (["--dry-run", "--gpu", "tpu"], "--gpu 'tpu': allowed: h100, h200, a100, l4"),
        (["--dry-run", "--utilisation", "1.5"], "--utilisation 1.5: a fraction of the peak"),
        (["--gpu", "a100"], "--gpu: for the cost of --dry-run"),
    ],
)
def test_cost_options_are_checked(run_cli, tmp_path, extra, needle):
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(STUDY))
    code, _, err = run_cli(["run", path, "--results", tmp_path / "r", *extra])
    assert code == 2 and needle in err
    assert len([line for line in err.splitlines() if re.match(r"(error|Error)", line)]) == 1
    assert not (tmp_path / "r").exists()
