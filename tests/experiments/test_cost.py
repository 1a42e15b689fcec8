"""The cost of a study before it starts (``--dry-run``): tokens, FLOPs and GPU-hours per run, for
sweeps, MAD, language-model, probe and computed studies."""

from __future__ import annotations

import re

import pytest
import yaml

from mixerzoo.config import load_run_config
from mixerzoo.studies.computed.cost import corpus_vocab, study_cost
from mixerzoo.studies.computed.files import load_theory, resolve_params
from mixerzoo.studies.sweep.cost import GPUS, flops_per_token, sweep_cost, train_tokens

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
    code, out, err = run_cli(
        ["study", "run", path, "--preset", "paper", "--dry-run", "--results", tmp_path / "r"]
    )
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
    code, _, err = run_cli(["study", "run", path, "--results", tmp_path / "r", *extra])
    assert code == 2 and needle in err
    assert len([line for line in err.splitlines() if re.match(r"(error|Error)", line)]) == 1
    assert not (tmp_path / "r").exists()


# -- studies that train in one process ---------------------------------------------------------
#: a tiny LM study: one attention (RoPE) model of width 8, two seeds, on enwik8 (no files here: its
#: documented 256 byte ids)
LM_STUDY = {
    "kind": "lm",
    "name": "tiny-lm-cost",
    "result": "cat-lm-length",
    "paper_ref": "test",
    "params": {
        "corpus": "enwik8",
        "d_model": 8,
        "n_layers": 1,
        "num_heads": 2,
        "block_size": 16,
        "batch_size": 2,
        "steps": 3,
        "seeds": [0, 1],
        "models": ["attention-rope"],
    },
    "presets": {"quick": {}, "paper": {}},
}
#: the same block as BASE's (872) + the final norm (16) + the head tied to the 256 x 8 embedding
#: (2,048; RoPE has no parameters) = 2,936; one attention layer at L = 16
LM_FLOPS_PER_TOKEN = 6 * (872 + 16 + 256 * 8) + 6 * 16 * 8
LM_TOKENS = 3 * 2 * 16  # steps x batch_size x block_size


def test_a_language_model_study_costs_each_model_and_seed(run_cli, tmp_path):
    path = tmp_path / "tiny-lm.yaml"
    path.write_text(yaml.safe_dump(LM_STUDY))
    code, out, err = run_cli(
        ["study", "run", path, "--preset", "paper", "--dry-run", "--results", tmp_path / "r"]
    )
    assert code == 0, err
    flops = LM_TOKENS * LM_FLOPS_PER_TOKEN
    for seed in (0, 1):
        assert f"attention-rope seed {seed}  {LM_TOKENS} tokens  {flops:.3g} FLOPs" in out
    assert f"cost: 2 runs, {2 * LM_TOKENS} tokens, {2 * flops:.3g} FLOPs" in out
    assert "vocabulary of enwik8: 256 tokens, documented (not built here)" in out
    assert not (tmp_path / "r").exists()
    exp = load_theory(str(path))
    costs, _ = study_cost(exp, resolve_params(exp, "paper", {})[1], "h100", 0.4)
    assert [(c.tokens, c.flops_per_token) for c in costs] == [(LM_TOKENS, LM_FLOPS_PER_TOKEN)] * 2


def test_the_vocabulary_is_read_from_a_built_corpus_else_assumed(tmp_path):
    from mixerzoo.corpora import load_corpus
    from mixerzoo.training.lm_config import CorpusSection

    (tmp_path / "input.txt").write_text("abcab" * 40)
    section = CorpusSection(name="char", data_dir=str(tmp_path))
    assert corpus_vocab(section) == (256, "assumed (not built here)")
    load_corpus("char", data_dir=tmp_path)  # builds its cache: 3 characters
    assert corpus_vocab(section) == (3, "read from its cache")
    bpe = CorpusSection(name="text", params={"file": "input.txt", "vocab_size": 1000})
    assert corpus_vocab(bpe) == (1000, "its BPE vocabulary size (not built here)")


def test_a_probe_study_costs_each_trained_model_and_reference_seed():
    exp = load_theory("icll-fig5")
    costs, notes = study_cost(exp, resolve_params(exp, "paper", {})[1], "h100", 0.4)
    # Fig. 5: TF and TF/2, and TF again with reference_seeds = 2 other seeds
    assert [c.name for c in costs] == ["TF", "TF/2", "TF seed 1", "TF seed 2"]
    # 200 epochs x N_train = 2,500 instances x RegBench's length 1,024
    assert all(c.tokens == 200 * 2500 * 1024 for c in costs)
    assert costs[2].flops == costs[3].flops == costs[0].flops > costs[1].flops  # 12 layers vs 2
    assert notes == ["not counted: the baselines' fits (LNW's MLPs, Baum-Welch)"]


def test_computed_studies_that_train_nothing_say_so(run_cli, tmp_path):
    code, out, err = run_cli(["study", "run", "cat-fig4", "--dry-run", "--results", tmp_path / "r"])
    assert code == 0, err
    assert out.splitlines()[-1] == "cost: no training: nothing to estimate"
    code, out, err = run_cli(
        ["study", "run", "cat-thm2-length-generalization", "--dry-run", "--results", tmp_path / "r"]
    )
    assert code == 0 and "cost: 1 run, " in out  # Thm. 2 trains one CAT at L
    assert not (tmp_path / "r").exists()


def test_mad_is_costed_for_the_model_it_is_run_with(run_cli, tmp_path):
    args = ["mad", "--preset", "quick", "--set", "model=attention", "--results", tmp_path / "r"]
    code, out, err = run_cli(["study", "run", *args, "--dry-run", "--gpu", "l4"])
    assert code == 0, err
    runs = [line for line in out.splitlines() if line.startswith("pending")]
    assert len(runs) == 72 and all(re.search(r"tokens  \S+ FLOPs  \S+ GPU-h$", line) for line in runs)
    (total,) = [line for line in out.splitlines() if line.startswith("cost:")]
    assert total.startswith("cost: 72 runs, ") and "NVIDIA L4" in total


@pytest.mark.parametrize(
    "extra,needle",
    [
        (["--dry-run", "--gpu", "tpu"], "--gpu 'tpu': allowed: h100, h200, a100, l4"),
        (["--dry-run", "--utilisation", "0"], "--utilisation 0: a fraction of the peak"),
        (["--utilisation", "0.5"], "--utilisation: for the cost of --dry-run"),
    ],
)
def test_cost_options_of_a_computed_study_are_checked(run_cli, tmp_path, extra, needle):
    code, out, err = run_cli(["study", "run", "cat-fig4", "--results", tmp_path / "r", *extra])
    assert code == 2 and needle in err and out == ""
    assert len([line for line in err.splitlines() if re.match(r"(error|Error)", line)]) == 1
    assert not (tmp_path / "r").exists()
