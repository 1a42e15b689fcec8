"""Test metrics, one function per kind of task output (``Task.output``).

Tokens (``evaluate_tokens``): accuracy and loss at supervised positions (labels != -100), two
accuracies, named for what they count:
  * ``accuracy_per_query``: fraction of supervised positions predicted correctly
    (what zoology and the CAT paper report as MQAR accuracy);
  * ``accuracy_per_example``: fraction of examples whose every supervised position is correct.

Regression (``evaluate_regression``): ``loss`` (MSE) and ``r2`` = 1 - MSE / Var(y), both pooled
over every scored target of the test set, as the atomic-task reference scores R^2 (LaS
Table 7). Classification (``evaluate_classification``): ``loss`` (cross-entropy) and ``accuracy``
over sequences.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from mixerzoo.registry import ConfigError
from mixerzoo.tasks.base import IGNORE


def check_token_arrays(
    inputs: np.ndarray, labels: np.ndarray, vocab_size: int, max_len: int | None = None
) -> None:
    """Refuse (one ConfigError line) token data a model cannot be scored on without a wrong number.

    Inputs and labels must be integer arrays of one [n, l] shape with n, l >= 1 (floats are not
    truncated: 3.7 is no token id); inputs in [0, vocab_size); labels in [0, vocab_size) or
    IGNORE; at least one label supervised (the accuracy of no prediction is undefined, not 0).
    """
    for key, arr in (("inputs", inputs), ("labels", labels)):
        if arr.dtype == np.bool_ or not np.issubdtype(arr.dtype, np.integer):
            raise ConfigError(
                f"{key!r} has dtype {arr.dtype}; token ids and labels must be integers (no rounding is done)"
            )
    if inputs.ndim != 2 or inputs.shape != labels.shape:
        raise ConfigError(f"'inputs' {inputs.shape} and 'labels' {labels.shape} must be equal [n, l] shapes")
    if inputs.size == 0:
        raise ConfigError(f"'inputs' {inputs.shape} is empty: need n >= 1 examples of length >= 1")
    if max_len is not None and inputs.shape[1] > max_len:
        raise ConfigError(f"sequences of length {inputs.shape[1]} exceed this model's max_len = {max_len}")
    lo, hi = int(inputs.min()), int(inputs.max())
    if lo < 0 or hi >= vocab_size:
        raise ConfigError(f"'inputs' token ids lie in [{lo}, {hi}]; this model takes [0, {vocab_size})")
    sup = labels != IGNORE
    if not sup.any():
        raise ConfigError(f"every label is {IGNORE} (unsupervised): there is nothing to score")
    lo, hi = int(labels[sup].min()), int(labels[sup].max())
    if lo < 0 or hi >= vocab_size:
        raise ConfigError(
            f"'labels' lie in [{lo}, {hi}]; allowed: [0, {vocab_size}) or {IGNORE} (unsupervised)"
        )


@torch.no_grad()
def evaluate_tokens(
    model, inputs: torch.Tensor, labels: torch.Tensor, batch_size: int = 256, device=None, rope=None
) -> dict[str, float]:
    """inputs, labels: (n, l) int64 -> metrics.

    Returns ``{"loss", "accuracy_per_query", "accuracy_per_example", "n_supervised"}``. ``rope``
    replaces the model's rotary embedding for this evaluation (test-time RoPE scaling).
    Data without a single supervised label is refused: its accuracy is undefined, not 0.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size = {batch_size}: must be >= 1")
    if not bool((labels != IGNORE).any()):
        raise ValueError(f"every label is {IGNORE}: no supervised position to score")
    was_training = model.training
    model.eval()
    device = device or next(model.parameters()).device
    n_sup = n_correct = n_examples = n_examples_correct = 0
    loss_sum = 0.0
    for start in range(0, inputs.shape[0], batch_size):
        x = inputs[start : start + batch_size].to(device)
        y = labels[start : start + batch_size].to(device)
        sel = y != IGNORE
        logits = model.lm_head(model.features(x, rows=sel, rope=rope))
        target = y[sel]
        loss_sum += F.cross_entropy(logits.float(), target, reduction="sum").item()
        hit = logits.argmax(-1) == target
        n_sup += int(target.numel())
        n_correct += int(hit.sum())
        # per example: all of its supervised positions right (examples with none are skipped)
        wrong = torch.zeros_like(y, dtype=torch.bool)
        wrong[sel] = ~hit
        has = sel.any(dim=1)
        n_examples += int(has.sum())
        n_examples_correct += int((has & ~wrong.any(dim=1)).sum())
    model.train(was_training)
    return {
        "loss": loss_sum / max(n_sup, 1),
        "accuracy_per_query": n_correct / max(n_sup, 1),
        "accuracy_per_example": n_examples_correct / max(n_examples, 1),
        "n_supervised": n_sup,
    }


#: the metric each output kind is judged by (progress bar, early stopping)
PRIMARY_METRIC = {"tokens": "accuracy_per_query", "regression": "r2", "classification": "accuracy"}


def regression_outputs(model, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Model outputs shaped like the targets: (b, l) for 2-D targets, else (b, l, k)."""
    out = model(x)
    return out.squeeze(-1) if y.dim() == 2 else out


@torch.no_grad()
def evaluate_regression(
    model, inputs: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor, batch_size: int = 256, device=None
) -> dict[str, float]:
    """inputs (n, l, c), labels (n, l[, k]) float, mask (n, l) bool -> {"loss" (MSE), "r2", "n_supervised"}.

    ``r2`` pools every scored target: 1 - sum (y - y_hat)^2 / sum (y - mean y)^2.
    """
    was_training = model.training
    model.eval()
    device = device or next(model.parameters()).device
    sq_err = y_sum = y_sq = 0.0
    count = 0
    for start in range(0, inputs.shape[0], batch_size):
        x = inputs[start : start + batch_size].to(device)
        y = labels[start : start + batch_size].to(device)
        m = mask[start : start + batch_size].to(device)
        pred = regression_outputs(model, x, y)[m].double()
        target = y[m].double()
        sq_err += float(((pred - target) ** 2).sum())
        y_sum += float(target.sum())
        y_sq += float((target**2).sum())
        count += int(target.numel())
    model.train(was_training)
    n = max(count, 1)
    mse = sq_err / n
    var = max(y_sq / n - (y_sum / n) ** 2, 1e-12)
    return {"loss": mse, "r2": 1.0 - mse / var, "n_supervised": count}


@torch.no_grad()
def evaluate_classification(
    model,
    inputs: torch.Tensor,
    labels: torch.Tensor,
    mask: torch.Tensor | None,
    batch_size: int = 256,
    device=None,
) -> dict[str, float]:
    """inputs (n, l), labels (n,) int64, mask (n, l) bool -> {"loss", "accuracy", "n_supervised"}."""
    was_training = model.training
    model.eval()
    device = device or next(model.parameters()).device
    loss_sum = 0.0
    n_correct = 0
    for start in range(0, inputs.shape[0], batch_size):
        x = inputs[start : start + batch_size].to(device)
        y = labels[start : start + batch_size].to(device)
        m = None if mask is None else mask[start : start + batch_size].to(device)
        logits = model(x, mask=m).float()
        loss_sum += F.cross_entropy(logits, y, reduction="sum").item()
        n_correct += int((logits.argmax(-1) == y).sum())
    model.train(was_training)
    n = max(int(inputs.shape[0]), 1)
    return {"loss": loss_sum / n, "accuracy": n_correct / n, "n_supervised": int(inputs.shape[0])}


def evaluate(
    model, kind: str, inputs, labels, mask=None, batch_size: int = 256, device=None
) -> dict[str, float]:
    """Dispatch on the task's output kind ("tokens", "regression", "classification")."""
    if kind == "tokens":
        return evaluate_tokens(model, inputs, labels, batch_size, device)
    if kind == "regression":
        return evaluate_regression(model, inputs, labels, mask, batch_size, device)
    if kind == "classification":
        return evaluate_classification(model, inputs, labels, mask, batch_size, device)
    raise ValueError(f"unknown task output kind {kind!r}")
