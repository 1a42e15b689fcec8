"""Regression and classification heads train; their metrics against closed forms. (Every task's
loss decreasing under training is ``tests/cli/test_every_task_trains.py``.)"""

from __future__ import annotations

import pytest
import torch

from mixerzoo.config import load_run_config
from mixerzoo.evaluation.evaluate import evaluate_classification, evaluate_regression
from mixerzoo.registry import ConfigError
from mixerzoo.training import train

TASKS = {
    "ar": {"vocab_size": 12, "seq_len": 24},
    "selective_copy": {"vocab_size": 8, "seq_len": 24, "num_tokens_to_copy": 4},
    "cumsum": {"seq_len": 24},
    "cummax": {"seq_len": 24},
    "select": {"seq_len": 24, "num_selected": 4},
    "listops": {"seq_len": 40, "min_length": 8, "max_length": 40},
}


def run_config(name, mixer="attention", **train_kw):
    return load_run_config(
        {
            "data": {"task": {"name": name, **TASKS[name]}, "n_train": 256, "n_test": 64},
            "model": {"d_model": 32, "n_layers": 2, "mixer": mixer},
            "train": {"epochs": 4, "batch_size": 32, "lr": 3e-3, "device": "cpu", **train_kw},
        }
    )


def test_regression_trains_with_a_convolutional_mixer():
    result = train(run_config("cumsum", mixer="base_conv", epochs=10, lr=1e-2), progress=False)
    assert result.history[-1]["train_loss"] < result.history[0]["train_loss"]
    assert result.metrics["r2"] > 0.8  # measured 0.96; predicting the mean scores 0


def test_head_must_match_the_task_output():
    cfg = load_run_config(
        {
            "data": {"task": {"name": "cumsum", "seq_len": 8}, "n_train": 8, "n_test": 8},
            "model": {"input": "continuous", "input_dim": 1, "head": "classification", "num_classes": 3},
        }
    )
    with pytest.raises(ConfigError, match="needs head = 'regression'"):
        train(cfg, progress=False)


class Lookup(torch.nn.Module):
    """A stand-in model: input row i (its first entry holds i) gets the fixed output ``out[i]``."""

    def __init__(self, out):
        super().__init__()
        self.out = out
        self.w = torch.nn.Parameter(torch.zeros(()))

    def forward(self, x, mask=None):
        return self.out[x.reshape(x.shape[0], -1)[:, 0].long()]


def row_ids(*shape):
    x = torch.zeros(*shape)
    x.reshape(shape[0], -1)[:, 0] = torch.arange(shape[0], dtype=x.dtype)
    return x


def test_r2_is_one_for_the_truth_and_zero_for_the_mean():
    y = torch.randn(10, 6)
    mask = torch.rand(10, 6) > 0.3
    x = row_ids(10, 6, 1)
    perfect = evaluate_regression(Lookup(y.unsqueeze(-1)), x, y, mask, batch_size=4)
    assert perfect["r2"] == pytest.approx(1.0) and perfect["loss"] == pytest.approx(0.0)
    mean = y[mask].mean()
    flat = evaluate_regression(Lookup(torch.full((10, 6, 1), float(mean))), x, y, mask, batch_size=3)
    assert flat["r2"] == pytest.approx(0.0, abs=1e-6)
    assert flat["loss"] == pytest.approx(float(((y[mask] - mean) ** 2).mean()), rel=1e-5)


def test_classification_accuracy_and_loss():
    labels = torch.tensor([0, 1, 2, 1])
    logits = torch.tensor([[5.0, 0, 0], [0, 5.0, 0], [5.0, 0, 0], [0, 0, 0]])
    out = evaluate_classification(Lookup(logits), row_ids(4, 3).long(), labels, None, batch_size=3)
    assert out["accuracy"] == pytest.approx(2 / 4)  # argmax of the all-zero row is class 0
    expected = torch.nn.functional.cross_entropy(logits, labels).item()
    assert out["loss"] == pytest.approx(expected, rel=1e-5)
