"""The LM loop's speed work keeps the numbers: fused AdamW, one-call gradient clipping, torch.compile.

Parity tests only (no timings): each faster path is checked against an independent computation
(a hand-written AdamW update, the gradient norm summed by hand) or against the eager run.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from mixerzoo.model import build_model
from mixerzoo.training import precision
from mixerzoo.training.lm import make_lm_optimizer, train_lm
from mixerzoo.training.lm_config import LMTrainConfig, load_lm_config
from mixerzoo.training.lm_steps import clip_grad_norm
from mixerzoo.training.lm_throughput import bench_lm

TEXT = "to be or not to be, that is the question. " * 150


@pytest.fixture
def data_dir(tmp_path):
    d = tmp_path / "data"
    d.mkdir()
    (d / "input.txt").write_text(TEXT)
    return d


def tiny(data_dir: Path, **train) -> dict:
    return {
        "corpus": {"name": "char", "data_dir": str(data_dir)},
        "model": {"d_model": 16, "n_layers": 2, "mixer": {"name": "attention", "num_heads": 2}},
        "train": {
            "steps": 4,
            "batch_size": 3,
            "block_size": 8,
            "warmup": 1,
            "lr": 3e-3,
            "eval_every": 0,
            "eval_iters": 2,
            "ckpt_every": 0,
            "seed": 5,
            "device": "cpu",
            "threads": 1,
            **train,
        },
    }


def losses(result) -> list[float]:
    return [h["loss"] for h in result.history if "loss" in h]


# -- fused AdamW ---------------------------------------------------------------------------
def test_lm_optimizer_is_fused_with_decay_on_matrices_only():
    model = build_model({"vocab_size": 7, "d_model": 8, "n_layers": 1, "max_len": 4})
    opt = make_lm_optimizer(model, LMTrainConfig(weight_decay=0.25), torch.device("cpu"))
    assert [g["fused"] for g in opt.param_groups] == [True, True]
    decay, no_decay = opt.param_groups
    assert decay["weight_decay"] == 0.25 and all(p.ndim >= 2 for p in decay["params"])
    assert no_decay["weight_decay"] == 0.0 and all(p.ndim < 2 for p in no_decay["params"])
    n_params = len({id(p) for p in model.parameters()})
    assert len(decay["params"]) + len(no_decay["params"]) == n_params


def test_lm_optimizer_steps_equal_a_hand_written_adamw():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(5, 4), torch.nn.Linear(4, 3))
    t = LMTrainConfig(lr=0.01, weight_decay=0.1, betas=(0.9, 0.99))
    opt = make_lm_optimizer(model, t, torch.device("cpu"))
    ref = {name: p.detach().clone() for name, p in model.named_parameters()}
    m = {name: torch.zeros_like(p) for name, p in ref.items()}
    v = {name: torch.zeros_like(p) for name, p in ref.items()}
    b1, b2, eps = 0.9, 0.99, 1e-8
    for step in range(1, 4):
        x = torch.randn(6, 5)
        model.zero_grad()
        model(x).pow(2).sum().backward()
        opt.step()
        for name, p in model.named_parameters():
            g = p.grad
            wd = 0.1 if p.ndim >= 2 else 0.0
            ref[name] = ref[name] * (1 - 0.01 * wd)  # decoupled weight decay (Loshchilov & Hutter)
            m[name] = b1 * m[name] + (1 - b1) * g
            v[name] = b2 * v[name] + (1 - b2) * g * g
            m_hat, v_hat = m[name] / (1 - b1**step), v[name] / (1 - b2**step)
            ref[name] = ref[name] - 0.01 * m_hat / (v_hat.sqrt() + eps)
            torch.testing.assert_close(p.detach(), ref[name], rtol=1e-5, atol=1e-6)
            p.data.copy_(ref[name])  # the next step starts from the same point for both


# -- clipping -----------------------------------------------------------------------------
@pytest.mark.parametrize("max_norm", [0.5, 100.0])
def test_clip_grad_norm_scales_by_the_total_norm(max_norm):
    torch.manual_seed(1)
    params = [torch.nn.Parameter(torch.zeros(s)) for s in ((3, 4), (5,), (2, 2, 2))]
    grads = [torch.randn(p.shape) for p in params]
    for p, g in zip(params, grads):
        p.grad = g.clone()
    total = math.sqrt(sum(float((g * g).sum()) for g in grads))  # by hand
    factor = min(1.0, max_norm / (total + 1e-6))
    returned = clip_grad_norm(params, max_norm)
    assert float(returned) == pytest.approx(total, rel=1e-6)
    for p, g in zip(params, grads):
        torch.testing.assert_close(p.grad, g * factor, rtol=1e-6, atol=0)


def test_clip_grad_norm_equals_torch_bit_for_bit():
    torch.manual_seed(2)
    a = [torch.nn.Parameter(torch.zeros(s)) for s in ((7, 3), (4,), (3, 3))]
    b = [torch.nn.Parameter(torch.zeros(s)) for s in ((7, 3), (4,), (3, 3))]
    for p, q in zip(a, b):
        p.grad = torch.randn(p.shape) * 3
        q.grad = p.grad.clone()
    assert torch.equal(clip_grad_norm(a, 1.0), torch.nn.utils.clip_grad_norm_(b, 1.0))
    assert all(torch.equal(p.grad, q.grad) for p, q in zip(a, b))


def test_clip_grad_norm_skips_parameters_without_gradient():
    p, q = torch.nn.Parameter(torch.ones(2)), torch.nn.Parameter(torch.ones(3))
    p.grad = torch.tensor([3.0, 4.0])
    assert float(clip_grad_norm([p, q], 1.0)) == pytest.approx(5.0)
    torch.testing.assert_close(p.grad, torch.tensor([0.6, 0.8]), rtol=1e-5, atol=0)
    assert q.grad is None


# -- train.compile ------------------------------------------------------------------------
def test_compile_is_off_by_default_and_not_part_of_the_config_hash(data_dir):
    cfg, _ = load_lm_config(tiny(data_dir))
    assert cfg.train.compile is False
    on, _ = load_lm_config(tiny(data_dir, compile=True))
    assert on.config_hash() == cfg.config_hash()  # a compiled run may resume an eager one


def test_compiled_graph_trains_like_eager(data_dir, monkeypatch):
    """Dynamo + AOTAutograd graph capture of the loss (the aot_eager backend: no C++ build)."""
    cfg, corpus = load_lm_config(tiny(data_dir))
    eager = train_lm(cfg, corpus)
    monkeypatch.setattr(precision, "COMPILE_BACKEND", "aot_eager")
    cfg_c, corpus_c = load_lm_config(tiny(data_dir, compile=True))
    compiled = train_lm(cfg_c, corpus_c)
    assert compiled.compile_s is not None and eager.compile_s is None
    assert len(losses(compiled)) == cfg.train.steps
    torch.testing.assert_close(losses(compiled), losses(eager), rtol=1e-5, atol=0)
    torch.testing.assert_close(compiled.metrics["val_loss"], eager.metrics["val_loss"], rtol=1e-5, atol=0)


def test_a_compile_failure_is_one_warning_line_and_the_eager_run(data_dir, monkeypatch, capsys):
    def broken_backend(gm, example_inputs):
        raise RuntimeError("no C++ compiler found\nsecond line of a long report")

    cfg, corpus = load_lm_config(tiny(data_dir))
    eager = train_lm(cfg, corpus)
    capsys.readouterr()
    monkeypatch.setattr(precision, "COMPILE_BACKEND", broken_backend)
    cfg_c, corpus_c = load_lm_config(tiny(data_dir, compile=True))
    fell_back = train_lm(cfg_c, corpus_c)
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith("warning: train.compile = true: torch.compile failed (")
    assert "no C++ compiler found" in err[0] and "second line" not in err[0]
    assert losses(fell_back) == losses(eager)  # the failed step was undone and rerun eagerly
    assert fell_back.metrics == eager.metrics


def test_bench_lm_reports_compile(data_dir, monkeypatch):
    monkeypatch.setattr(precision, "COMPILE_BACKEND", "aot_eager")
    cfg, corpus = load_lm_config(tiny(data_dir, compile=True))
    (row,) = bench_lm(cfg, corpus, steps=2, warmup=1)
    assert row["compile"] is True and row["compile_s"] > 0 and row["tokens_per_s"] > 0
    eager_cfg, _ = load_lm_config(tiny(data_dir))
    (eager_row,) = bench_lm(eager_cfg, corpus, steps=2, warmup=1)
    assert eager_row["compile"] is False and eager_row["compile_s"] is None
    assert eager_row["loss"] == pytest.approx(row["loss"], rel=1e-5)


@pytest.mark.slow
def test_inductor_compiled_loss_curve_equals_eager_within_1e_4(data_dir):
    """The real backend (inductor, C++ kernels): 6 steps of the same run, losses within 1e-4 relative."""
    cfg, corpus = load_lm_config(tiny(data_dir, steps=6))
    eager = train_lm(cfg, corpus)
    cfg_c, corpus_c = load_lm_config(tiny(data_dir, steps=6, compile=True))
    compiled = train_lm(cfg_c, corpus_c)
    torch.testing.assert_close(losses(compiled), losses(eager), rtol=1e-4, atol=0)
    torch.testing.assert_close(compiled.metrics["val_loss"], eager.metrics["val_loss"], rtol=1e-4, atol=0)
