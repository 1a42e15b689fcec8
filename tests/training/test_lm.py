"""LM training: batches, loss, config errors, and resume that reproduces the uninterrupted curve."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from mixerzoo.model import build_model
from mixerzoo.registry import ConfigError
from mixerzoo.training.lm import CHECKPOINT, NextTokenLoss, bits_or_perplexity, read_checkpoint, train_lm
from mixerzoo.training.lm_config import load_lm_config
from mixerzoo.training.lm_steps import get_batch

TEXT = "the quick brown fox jumps over the lazy dog. " * 200


def tiny_config(data_dir: Path, **train) -> dict:
    return {
        "corpus": {"name": "char", "data_dir": str(data_dir)},
        "model": {"d_model": 16, "n_layers": 1, "mixer": {"name": "attention", "num_heads": 2}},
        "train": {
            "steps": 12,
            "batch_size": 4,
            "block_size": 8,
            "warmup": 2,
            "lr": 3e-3,
            "eval_every": 6,
            "eval_iters": 2,
            "ckpt_every": 4,
            "seed": 3,
            "device": "cpu",
            "threads": 1,
            **train,
        },
    }


@pytest.fixture
def data_dir(tmp_path):
    d = tmp_path / "data"
    d.mkdir()
    (d / "input.txt").write_text(TEXT)
    return d


def test_get_batch_blocks_are_contiguous_and_shifted():
    data = np.arange(100, dtype=np.uint16) * 3
    x, y = get_batch(data, 5, 7, np.random.default_rng(0))
    assert x.shape == y.shape == (5, 7) and x.dtype == torch.int64
    for row_x, row_y in zip(x.tolist(), y.tolist()):
        start = row_x[0] // 3
        assert row_x == [3 * (start + i) for i in range(7)]
        assert row_y == [3 * (start + 1 + i) for i in range(7)]
        assert start + 7 < 100


def test_next_token_loss_equals_cross_entropy_of_full_logits():
    torch.manual_seed(0)
    model = build_model({"vocab_size": 11, "d_model": 8, "n_layers": 1, "max_len": 6})
    x = torch.randint(0, 11, (3, 6))
    y = torch.randint(0, 11, (3, 6))
    expected = F.cross_entropy(model(x).reshape(-1, 11), y.reshape(-1))
    assert torch.allclose(NextTokenLoss(model)(x, y), expected, atol=1e-6)


def test_next_token_loss_under_autocast_runs_backward():
    """Autocast (CUDA bf16/fp16 in training; CPU bf16 here) takes the unfused head: dtypes stay consistent."""
    torch.manual_seed(0)
    model = build_model({"vocab_size": 11, "d_model": 8, "n_layers": 1, "max_len": 6})
    x = torch.randint(0, 11, (3, 6))
    y = torch.randint(0, 11, (3, 6))
    exact = float(NextTokenLoss(model)(x, y).detach())
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = NextTokenLoss(model)(x, y)
    loss.backward()
    assert loss.dtype == torch.float32 and abs(loss.item() - exact) < 0.05
    assert model.lm_head.weight.grad is not None and torch.isfinite(model.lm_head.weight.grad).all()


def test_bits_per_character_and_perplexity():
    assert bits_or_perplexity(math.log(2) * 1.5, "char") == pytest.approx({"bpc": 1.5})
    assert bits_or_perplexity(math.log(2), "byte") == pytest.approx({"bpc": 1.0})
    assert bits_or_perplexity(math.log(50.0), "token") == pytest.approx({"ppl": 50.0})


def test_config_fills_vocab_and_max_len_from_corpus(data_dir):
    cfg, corpus = load_lm_config(tiny_config(data_dir))
    assert cfg.model.vocab_size == corpus.vocab_size == len(set(TEXT))
    assert cfg.model.max_len == 8
    cfg2, _ = load_lm_config(tiny_config(data_dir), sets={"train.block_size": 16, "model.d_model": 32})
    assert cfg2.model.max_len == 16 and cfg2.model.d_model == 32


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"model.vocab_size": 5}, r"model.vocab_size = 5 is smaller than the corpus's vocabulary"),
        ({"model.max_len": 4}, r"model.max_len = 4 < train.block_size = 8"),
        ({"train.dtype": "float64"}, r"train.dtype = 'float64': Input should be 'auto', 'float32'"),
        ({"train.lr": -1}, r"train.lr = -1: Input should be greater than 0"),
        ({"train.block_size": 5000}, r"the val split has 900 tokens, not more than train.block_size = 5000"),
        ({"optimizer": "sgd"}, r"unknown field 'optimizer'"),
    ],
)
def test_config_errors_are_one_line(data_dir, change, message):
    with pytest.raises(ConfigError, match=message) as err:
        cfg, corpus = load_lm_config(tiny_config(data_dir), sets=change)
        train_lm(cfg, corpus)
    assert "\n" not in str(err.value)


def test_training_learns_the_text(data_dir):
    cfg, corpus = load_lm_config(tiny_config(data_dir, steps=40, lr=1e-2, eval_every=0, eval_iters=4))
    result = train_lm(cfg, corpus)
    # the text is one sentence repeated: far below the uniform ln(V) after 40 steps
    assert result.metrics["val_loss"] < math.log(corpus.vocab_size) - 1.0
    assert result.metrics["val_bpc"] == pytest.approx(result.metrics["val_loss"] / math.log(2))
    assert result.tokens_per_s > 0


def _losses(history):
    return [(h["step"], h["loss"]) for h in history if "loss" in h]


def test_resume_after_a_crash_gives_the_uninterrupted_curve(data_dir, tmp_path):
    cfg, corpus = load_lm_config(tiny_config(data_dir))
    full = train_lm(cfg, corpus, tmp_path / "full")
    # dies after step 6: the last checkpoint is at step 4, so steps 5-6 are redone on resume
    train_lm(cfg, corpus, tmp_path / "crash", stop_after=6)
    assert read_checkpoint(tmp_path / "crash" / CHECKPOINT)["step"] == 4
    resumed = train_lm(cfg, corpus, tmp_path / "crash")
    assert resumed.resumed_from == 4
    assert _losses(resumed.history) == _losses(full.history)
    assert resumed.metrics == full.metrics
    logged = (tmp_path / "crash" / "metrics.jsonl").read_text().splitlines()
    assert len(logged) == len(full.history)  # the redone steps are not logged twice


def test_resume_refuses_a_different_config(data_dir, tmp_path):
    cfg, corpus = load_lm_config(tiny_config(data_dir))
    train_lm(cfg, corpus, tmp_path / "run", stop_after=4)
    other, _ = load_lm_config(tiny_config(data_dir), sets={"train.lr": 1e-3})
    with pytest.raises(ConfigError, match="holds a checkpoint of a different config"):
        train_lm(other, corpus, tmp_path / "run")
    (tmp_path / "run" / CHECKPOINT).write_bytes(b"garbage")
    with pytest.raises(ConfigError, match="could not be read"):
        train_lm(cfg, corpus, tmp_path / "run")


@pytest.mark.slow
def test_sigkill_mid_run_then_resume_matches_uninterrupted(data_dir, tmp_path):
    """A real process killed with SIGKILL after its first checkpoint, then resumed by the CLI."""
    import yaml

    raw = tiny_config(data_dir, steps=300, ckpt_every=5, eval_every=100, log_every=1)
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(raw))
    out = tmp_path / "killed"
    cmd = [
        sys.executable,
        "-m",
        "mixerzoo.train_lm",
        str(tmp_path / "run.yaml"),
        "--out",
        str(out),
        "--quiet",
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MIXERZOO_RESULTS": str(tmp_path / "results")}
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        for _ in range(6000):  # poll for the first checkpoint (bounded: at most ~5 min)
            if (out / CHECKPOINT).exists() or proc.poll() is not None:
                break
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()
    assert proc.returncode == -signal.SIGKILL, proc.stderr.read().decode()[-500:]
    killed_at = read_checkpoint(out / CHECKPOINT)["step"]
    assert 5 <= killed_at < 300
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)
    (tmp_path / "full.yaml").write_text(yaml.safe_dump(raw))
    subprocess.run(
        [*cmd[:3], str(tmp_path / "full.yaml"), "--out", str(tmp_path / "full"), "--quiet"],
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
    )

    def curve(d):
        rows = [json.loads(line) for line in (d / "metrics.jsonl").read_text().splitlines()]
        return [(r["step"], r["loss"]) for r in rows if "loss" in r]

    resumed, full = curve(out), curve(tmp_path / "full")
    assert len(resumed) == 300
    assert resumed == full


def test_train_lm_command_writes_the_run_folder(data_dir, tmp_path, capsys):
    import yaml

    from mixerzoo.cli.main import main

    raw = tiny_config(data_dir, steps=4, eval_every=2)
    del raw["corpus"]["data_dir"]
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(raw))
    args = [
        "lm",
        "train",
        str(tmp_path / "run.yaml"),
        "--data-dir",
        str(data_dir),
        "--out",
        str(tmp_path / "o"),
    ]
    args += ["--results", str(tmp_path / "results")]
    main([*args, "--set", "train.lr=0.002"])
    out = capsys.readouterr().out
    assert "step 4: train_loss" in out and "val_bpc" in out
    result = json.loads((tmp_path / "o" / "result.json").read_text())
    assert result["steps"] == 4 and set(result["metrics"]) == {"train_loss", "val_loss", "val_bpc"}
    assert json.loads((tmp_path / "o" / "config.json").read_text())["train"]["lr"] == 0.002
    with pytest.raises(SystemExit) as exit_info:
        main(["lm", "train", str(tmp_path / "run.yaml")])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.strip().count("\n") == 0
