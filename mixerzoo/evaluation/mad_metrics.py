"""MAD's test accuracy as mad-lab computes it (``mad/metrics.py``, ``mad/model/pl_model_wrapper.py``).

mad-lab scores every position of the test split with torchmetrics'
``MulticlassAccuracy(num_classes=V, ignore_index=-100)`` on the argmax of the logits. Its
default ``average="macro"`` is a mean over classes, not over positions:

    acc(c)   = tp(c) / (tp(c) + fn(c))            # recall of class c: hits / times c is the target
    accuracy = mean of acc(c) over the classes c with tp(c) + fp(c) + fn(c) > 0

positions whose target is -100 left out. A class that is predicted but never a target
(``tp = fn = 0 < fp``) enters the mean with accuracy 0; a class neither predicted nor a target
is left out (torchmetrics 1.9 ``_adjust_weights_safe_divide``). The counts ``tp, fp, fn`` of
one class are summed over the whole test split before dividing (:data:`MACRO_METRIC`,
``accuracy_macro``: the metric of the MAD score). The per-position accuracy
(``accuracy_per_query``, fraction of scored positions right) is a different number except at 0
and 1: a class that is rarely the target weighs as much as a frequent one.

mad-lab logs the metric's per-batch value (``self.log_dict`` of the collection's output), which
Lightning averages over the test batches weighted by their size; that batch mean over batches
of :data:`MAD_EVAL_BATCH` examples is reported too (:data:`BATCH_MEAN_METRIC`). It differs
from the accumulated value because a class's counts are then divided within each batch.
"""

from __future__ import annotations

import numpy as np
import torch

from mixerzoo.tasks.base import IGNORE, Task, TaskData

#: the MAD score's metric: macro accuracy, counts summed over the test split
MACRO_METRIC = "accuracy_macro"
#: macro accuracy per test batch, averaged over batches weighted by their examples (mad-lab's log)
BATCH_MEAN_METRIC = "accuracy_macro_batch_mean"
#: mad-lab's evaluation batch (``MADConfig.batch_size``)
MAD_EVAL_BATCH = 128


def class_counts(preds: np.ndarray, targets: np.ndarray, num_classes: int) -> np.ndarray:
    """int64 ``[3, num_classes]``: true positives, false positives, false negatives per class.

    ``preds`` and ``targets`` are integer arrays of one shape; positions whose target is
    ``IGNORE`` are left out.
    """
    preds, targets = np.asarray(preds).reshape(-1), np.asarray(targets).reshape(-1)
    if preds.shape != targets.shape:
        raise ValueError(f"preds {preds.shape} and targets {targets.shape} differ in size")
    keep = targets != IGNORE
    p, t = preds[keep].astype(np.int64), targets[keep].astype(np.int64)
    hit = p == t
    tp = np.bincount(t[hit], minlength=num_classes)
    fp = np.bincount(p[~hit], minlength=num_classes)
    fn = np.bincount(t[~hit], minlength=num_classes)
    return np.stack([tp, fp, fn])[:, :num_classes]


def macro_accuracy(counts: np.ndarray) -> float:
    """Macro accuracy from :func:`class_counts` (summed over any number of batches); 0 when no
    class is present, as torchmetrics returns."""
    tp, fp, fn = (np.asarray(c, dtype=np.float64) for c in counts)
    present = tp + fp + fn > 0
    if not present.any():
        return 0.0
    support = tp + fn
    recall = np.divide(tp, support, out=np.zeros_like(tp), where=support > 0)
    return float(recall[present].mean())


def macro_accuracy_of(preds: np.ndarray, targets: np.ndarray, num_classes: int) -> float:
    """Macro accuracy of predicted against target classes (``IGNORE`` targets left out)."""
    return macro_accuracy(class_counts(preds, targets, num_classes))


def batch_mean_macro(batches: list[tuple[np.ndarray, np.ndarray]], num_classes: int) -> float:
    """Per-batch macro accuracy averaged over ``(preds, targets)`` batches, each weighted by its
    examples (first axis), as Lightning reduces a logged per-batch value over an epoch."""
    values = [macro_accuracy_of(p, t, num_classes) for p, t in batches]
    weights = [len(t) for _, t in batches]
    return float(np.average(values, weights=weights))


@torch.no_grad()
def model_predictions(model, data: TaskData, batch_size: int = MAD_EVAL_BATCH, device=None):
    """Yield ``(preds, targets, num_classes)`` per batch of ``batch_size`` test examples: the
    argmax class at every position (``-1`` where the target is ``IGNORE``, never counted)."""
    was_training = model.training
    model.eval()
    device = device or next(model.parameters()).device
    try:
        for start in range(0, len(data), batch_size):
            x = torch.from_numpy(data.inputs[start : start + batch_size]).to(device)
            y = torch.from_numpy(data.labels[start : start + batch_size]).to(device)
            sel = y != IGNORE
            logits = model.lm_head(model.features(x, rows=sel))
            preds = torch.full_like(y, -1)
            preds[sel] = logits.argmax(-1)
            yield preds.cpu().numpy(), y.cpu().numpy(), int(logits.shape[-1])
    finally:
        model.train(was_training)


def mad_accuracy(task: Task, model, data: TaskData) -> dict[str, float]:
    """The test metrics of a MAD task: :data:`MACRO_METRIC` and :data:`BATCH_MEAN_METRIC`."""
    total, batches, num_classes = None, [], task.vocab_size
    for preds, targets, num_classes in model_predictions(model, data):
        counts = class_counts(preds, targets, num_classes)
        total = counts if total is None else total + counts
        batches.append((preds, targets))
    return {
        MACRO_METRIC: macro_accuracy(total),
        BATCH_MEAN_METRIC: batch_mean_macro(batches, num_classes),
    }
