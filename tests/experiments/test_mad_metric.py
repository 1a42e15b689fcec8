"""MAD's accuracy as mad-lab computes it: torchmetrics' macro ``MulticlassAccuracy``.

The stored reference ``fixtures/mad_macro_accuracy.npz`` holds random predictions and targets
(two cases, ``a``: 16 classes, ``b``: 32) and the values mad-lab's ``Accuracy`` class
(``mad/metrics.py``, torchmetrics 1.9.0 ``MulticlassAccuracy(num_classes=V, ignore_index=-100)``)
gives them: ``{case}_accumulated`` after updating it batch by batch (first axis), and
``{case}_per_batch`` its value on each batch. Produced with mad-lab's ``mad/metrics.py`` copied to
``/tmp/madlab/mad/`` and torchmetrics 1.9.0 installed apart (``pip install --target /tmp/tmlib
torchmetrics==1.9.0 lightning-utilities``), by ``PYTHONPATH=/tmp/tmlib python make_metric_ref.py
tests/experiments/fixtures/mad_macro_accuracy.npz``, where ``make_metric_ref.py`` is::

    import sys
    import numpy as np
    import torch
    sys.path.insert(0, "/tmp/madlab")
    from mad.metrics import Accuracy  # mad-lab's metric class, torchmetrics underneath

    rng = np.random.default_rng(0)
    out = {}
    for name, V, shape, k_pred, p_ign in (("a", 16, (6, 3, 20), 16, 0.6), ("b", 32, (4, 5, 12), 12, 0.5)):
        logits = rng.normal(size=(*shape, V)).astype(np.float32)
        logits[..., k_pred:] -= 100.0                    # classes >= k_pred never predicted
        logits[..., 3] += 1.0                            # one class predicted often
        targets = rng.integers(0, V - 4, size=shape)     # the last 4 classes never targets
        hit = rng.random(shape) < 0.5                    # half the positions right on purpose
        np.put_along_axis(logits, targets[..., None], np.where(hit, 200.0, 0.0)[..., None], axis=-1)
        targets[rng.random(shape) < p_ign] = -100
        metric = Accuracy(num_classes=V, ignore_index=-100)
        per_batch = [float(metric(torch.from_numpy(logits[b]), torch.from_numpy(targets[b])))
                     for b in range(shape[0])]
        out[f"{name}_preds"] = logits.argmax(-1)
        out[f"{name}_targets"] = targets
        out[f"{name}_num_classes"] = np.array(V)
        out[f"{name}_accumulated"] = np.array(float(metric.compute()))
        out[f"{name}_per_batch"] = np.array(per_batch)
    np.savez_compressed(sys.argv[1], **out)
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from mixerzoo.evaluation.mad_metrics import (
    BATCH_MEAN_METRIC,
    MACRO_METRIC,
    batch_mean_macro,
    class_counts,
    macro_accuracy,
    macro_accuracy_of,
    mad_accuracy,
)
from mixerzoo.evaluation.task_metrics import task_metrics
from mixerzoo.tasks import IGNORE, build_task

REFERENCE = Path(__file__).parent / "fixtures" / "mad_macro_accuracy.npz"


@pytest.fixture(scope="module")
def ref():
    with np.load(REFERENCE) as f:
        return {k: f[k] for k in f.files}


@pytest.mark.parametrize("case", ["a", "b"])
def test_macro_accuracy_equals_torchmetrics_accumulated_over_batches(ref, case):
    preds, targets, V = ref[f"{case}_preds"], ref[f"{case}_targets"], int(ref[f"{case}_num_classes"])
    total = sum(class_counts(p, t, V) for p, t in zip(preds, targets))
    assert macro_accuracy(total) == pytest.approx(float(ref[f"{case}_accumulated"]), abs=1e-6)
    assert macro_accuracy_of(preds, targets, V) == pytest.approx(float(ref[f"{case}_accumulated"]), abs=1e-6)
    # the reference separates macro from the per-position accuracy, and (case a, where classes that
    # are never targets are predicted) from a mean over the target classes only
    keep = targets != IGNORE
    micro = float((preds[keep] == targets[keep]).mean())
    assert abs(micro - float(ref[f"{case}_accumulated"])) > 0.01
    tp, _, fn = total
    over_targets = float(np.mean(tp[tp + fn > 0] / (tp + fn)[tp + fn > 0]))
    assert (abs(over_targets - float(ref[f"{case}_accumulated"])) > 0.01) == (case == "a")


@pytest.mark.parametrize("case", ["a", "b"])
def test_per_batch_values_and_their_mean_equal_torchmetrics(ref, case):
    preds, targets, V = ref[f"{case}_preds"], ref[f"{case}_targets"], int(ref[f"{case}_num_classes"])
    ours = [macro_accuracy_of(p, t, V) for p, t in zip(preds, targets)]
    np.testing.assert_allclose(ours, ref[f"{case}_per_batch"], atol=1e-6)
    mean = batch_mean_macro(list(zip(preds, targets)), V)
    assert mean == pytest.approx(float(np.mean(ref[f"{case}_per_batch"])), abs=1e-6)


def test_hand_made_counts():
    # targets 0 0 1 2, predicted 0 1 1 3 (class 3 predicted, never a target); class 4 absent
    counts = class_counts(np.array([0, 1, 1, 3, 4]), np.array([0, 0, 1, 2, IGNORE]), 5)
    np.testing.assert_array_equal(counts, [[1, 1, 0, 0, 0], [0, 1, 0, 1, 0], [1, 0, 1, 0, 0]])
    # per class: 0 -> 1/2, 1 -> 1, 2 -> 0, 3 -> 0 (predicted only); 4 left out
    assert macro_accuracy(counts) == pytest.approx((0.5 + 1 + 0 + 0) / 4)
    assert macro_accuracy(np.zeros((3, 5))) == 0.0
    solved = np.array([[IGNORE, 5, IGNORE, 7], [IGNORE, 5, IGNORE, 6]])
    assert macro_accuracy_of(solved, solved, 8) == 1.0  # macro and per position agree at 1


class FixedLogits(torch.nn.Module):
    """A model whose logits at a position depend on its input token only (a lookup table)."""

    def __init__(self, vocab: int) -> None:
        super().__init__()
        self.table = torch.nn.Embedding(vocab, vocab)
        self.lm_head = torch.nn.Identity()

    def features(self, ids: torch.Tensor, rows: torch.Tensor | None = None) -> torch.Tensor:
        out = self.table(ids)
        return out if rows is None else out[rows]


def test_mad_task_metrics_score_the_models_argmax_at_labelled_positions():
    task = build_task("mad_in_context_recall", seq_len=32)
    data = task.make(300, seed=1, split="test")
    torch.manual_seed(0)
    model = FixedLogits(task.vocab_size).train()
    preds = model.table.weight.detach().argmax(-1).numpy()[data.inputs]
    got = task_metrics(task, model, data)
    assert model.training  # mode restored
    assert got[MACRO_METRIC] == pytest.approx(macro_accuracy_of(preds, data.labels, task.vocab_size))
    batches = [(preds[i : i + 128], data.labels[i : i + 128]) for i in range(0, 300, 128)]
    assert got[BATCH_MEAN_METRIC] == pytest.approx(batch_mean_macro(batches, task.vocab_size))
    assert got == mad_accuracy(task, model, data)


# -- the MAD report: scores on the macro accuracy, the per-position accuracy beside them -------------
def test_report_scores_the_macro_metric_and_shows_the_per_position_one(tmp_path):
    from mixerzoo.store.results import ResultsStore
    from mixerzoo.studies.mad import mad_experiment, mad_report, score_lines

    spec = {
        "name": "mad-metric",
        "claim": "paper: test",
        "base": {
            "data": {"task": {"name": "mad_memorization"}, "n_train": 32, "n_test": 16},
            "model": {"d_model": 8, "n_layers": 1, "mixer": "attention"},
            "train": {"epochs": 1, "batch_size": 16},
        },
        "grid": {
            "data.task.name": ["mad_memorization"],
            "train.lr": [1e-4, 1e-3],
            "train.weight_decay": [0.0],
        },
        "aggregate": {"metric": MACRO_METRIC, "reduce": "max", "over": ["train.lr", "train.weight_decay"]},
        "presets": {"quick": {}, "paper": {}},
    }
    levels = {"mad_memorization": [{"vocab_size": 16, "seq_len": 8}, {"vocab_size": 32, "seq_len": 8}]}
    exp = mad_experiment(spec, "quick", levels=levels)
    store = ResultsStore(tmp_path / "res")
    # per run (level, lr): macro and per-position accuracies that rank the two lrs differently; the
    # last run was stored before the macro accuracy existed
    values = iter([(0.2, 0.9), (0.6, 0.5), (0.4, 0.3), (None, 0.7)])
    for p in exp.expand():
        macro, per_position = next(values)
        run_id = store.start_run(p.config.model_dump(mode="json"), p.config_hash, name=p.config.name)
        metrics = (
            {MACRO_METRIC: macro, "accuracy_per_query": per_position}
            if macro
            else {"accuracy_per_query": per_position}
        )
        store.finish_run(run_id, metrics, wall_s=0.1, params=1, checkpoint=None)
    payload = mad_report(exp, store, "quick")
    assert payload["protocol"]["metric"] == MACRO_METRIC
    assert payload["mad_scores"]["overall"]["mad-metric"] == pytest.approx((0.6 + 0.4) / 2)
    assert payload["mad_scores_per_position"]["overall"]["mad-metric"] == pytest.approx((0.9 + 0.7) / 2)
    lines = score_lines(payload)
    assert lines[1].split() == ["mad-metric", "0.500", "0.500"]
    assert lines[2].split() == ["mad-metric", "(per", "position)", "0.800", "0.800"]
    assert payload["runs_without_metric"] == 1
    assert lines[-1].startswith("1 finished runs have no accuracy_macro (stored before their task")
