"""Accuracy and loss at supervised positions (labels != -100).

Two accuracies, named for what they count:
  * ``accuracy_per_query``: fraction of supervised positions predicted correctly
    (what zoology and the CAT paper report as MQAR accuracy);
  * ``accuracy_per_example``: fraction of examples whose every supervised position is correct.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from mixerzoo.tasks.base import IGNORE


@torch.no_grad()
def evaluate_tokens(
    model, inputs: torch.Tensor, labels: torch.Tensor, batch_size: int = 256, device=None
) -> dict[str, float]:
    """inputs, labels: (n, l) int64 -> {"loss", "accuracy_per_query", "accuracy_per_example", "n_supervised"}."""
    was_training = model.training
    model.eval()
    device = device or next(model.parameters()).device
    n_sup = n_correct = n_examples = n_examples_correct = 0
    loss_sum = 0.0
    for start in range(0, inputs.shape[0], batch_size):
        x = inputs[start : start + batch_size].to(device)
        y = labels[start : start + batch_size].to(device)
        sel = y != IGNORE
        logits = model.lm_head(model.features(x)[sel])
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
