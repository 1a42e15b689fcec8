"""``mixerzoo lm eval ar-slices / lengths`` on run folders of two tiny LMs trained on a small text."""

from __future__ import annotations

import json
import math

import click
import numpy as np
import pytest
from click.testing import CliRunner

from mixerzoo.cli.lm_group_commands import lm
from mixerzoo.evaluation.ar_hits import contiguous_windows, count_ngrams, label_windows
from mixerzoo.registry import ConfigError
from mixerzoo.training.lm import train_lm
from mixerzoo.training.lm_config import load_lm_config

TEXT = "the cat sat on the mat. a zebra named Zyx met Zyx again. " * 60


@click.group()
def cli() -> None:
    """The lm group, as mixerzoo.cli.main adds it."""


cli.add_command(lm)


def train(data_dir, out, mixer: dict, position: str, corpus: str = "char") -> None:
    raw = {
        "corpus": {"name": corpus, "data_dir": str(data_dir)},
        "model": {"d_model": 16, "n_layers": 1, "mixer": mixer, "position": position},
        "train": {
            "steps": 3,
            "batch_size": 4,
            "block_size": 16,
            "warmup": 1,
            "eval_every": 0,
            "eval_iters": 1,
            "ckpt_every": 0,
            "seed": 1,
            "device": "cpu",
            "threads": 1,
        },
    }
    cfg, corp = load_lm_config(raw)
    train_lm(cfg, corp, out)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("lm_eval")
    data = root / "data"
    data.mkdir()
    (data / "input.txt").write_text(TEXT)
    train(data, root / "attn", {"name": "attention", "num_heads": 2}, "rope")
    train(data, root / "conv", {"name": "base_conv"}, "none")
    return root


def invoke(*args):
    return CliRunner().invoke(cli, ["lm", "eval", *map(str, args)], catch_exceptions=True)


def test_ar_slices_json_counts_the_hits_of_the_windows(runs):
    result = invoke(
        "ar-slices", runs / "attn", runs / "conv", "--windows", 10, "--max-train-count", 150, "--json"
    )
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert out["models"] == ["attn", "conv", "unigram"] and out["reference"] == "attn"
    assert out["tokens"] == 10 * 16 and out["runs"]["conv"]["mixer"] == "base_conv"
    # the same labels from the split the run's corpus holds, computed here
    from mixerzoo.corpora import load_corpus

    corpus = load_corpus("char", data_dir=runs / "data")
    windows = contiguous_windows(corpus.splits["val"], 16, 10)
    labels = label_windows(
        windows, corpus.vocab_size, count_ngrams(corpus.splits["train"], corpus.vocab_size), 150
    )
    rows = {r["slice"]: r for r in out["slices"]}
    assert rows["AR hits"]["n_tokens"] == int(labels.ar_hit.sum()) > 0
    attn = rows["all tokens"]["models"]["attn"]
    assert attn["bpc"] == pytest.approx(attn["loss"] / math.log(2))
    assert set(out["ar_gap_fraction"]) == {"conv", "unigram"}


def test_ar_slices_table_and_plot(runs, tmp_path):
    png = tmp_path / "gap.png"
    result = invoke("ar-slices", runs / "attn", runs / "conv", "--windows", 5, "--plot", png)
    assert result.exit_code == 0, result.output
    assert "AR hits" in result.output and "gap conv" in result.output
    assert "Zoology App. C.1" in result.output
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_lengths_rows_per_scaling_and_factor(runs):
    result = invoke(
        "lengths", runs / "attn", "--factors", "1,2,4", "--scaling", "none,yarn", "--max-tokens", 64, "--json"
    )
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert out["train_len"] == 16 and out["position"] == "rope"
    assert [(r["scaling"], r["length"]) for r in out["rows"]] == [
        (s, n) for s in ("none", "yarn") for n in (16, 32, 64)
    ]
    assert all(r["bpc"] is not None and np.isfinite(r["bpc"]) for r in out["rows"])
    text = invoke("lengths", runs / "conv", "--factors", "1,2", "--scaling", "pi", "--max-tokens", 64)
    assert text.exit_code == 0 and "no rotary positions" in text.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["lengths", "{runs}/attn", "--scaling", "ntk"], "--scaling 'ntk': allowed none, pi, yarn"),
        (["lengths", "{runs}/attn", "--factors", "1,two"], "--factors '1,two'"),
        (["ar-slices", "{runs}/nowhere"], "no checkpoint.pt"),
        (["ar-slices", "{runs}/attn", "--max-train-count", "-3"], "--max-train-count -3"),
        (["lengths", "{runs}/attn", "--split", "test"], "--split 'test'"),
    ],
)
def test_bad_input_is_one_line(runs, args, message):
    result = invoke(*[a.format(runs=runs) for a in args])
    assert isinstance(result.exception, ConfigError)
    assert message in str(result.exception) and "\n" not in str(result.exception)


def test_runs_of_different_corpora_are_refused(runs, tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    (other / "input.txt").write_text("abc " * 300)
    train(other, tmp_path / "abc", {"name": "base_conv"}, "none")
    result = invoke("ar-slices", runs / "attn", tmp_path / "abc")
    assert isinstance(result.exception, ConfigError)
    assert "compare runs of one corpus" in str(result.exception)
