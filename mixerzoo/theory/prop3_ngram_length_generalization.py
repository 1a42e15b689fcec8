"""Prop. 3 (CAT Sec. 4; proof CAT-ws App. E.3): a CAT that solves N-gram AR at one length solves it
at every length.

Statement: for the layer of Thm. 1 with ``F_q = F_k = F_bar`` and any ``f = (W, F)`` that solves
N-AR up to eps on all sequences of length L, "for almost all choices of F_bar" (i) the value
filter is within ``L eps_0`` (l1) of ``D_-1``, (ii) "for all inputs X of arbitrary length L',
attention map obeys ||S(X_k W q) - s_*||_1 <= L' eps_0" and (iii) the error at any L' is at most
``R L' eps_0``. Like Thm. 2 (:mod:`~mixerzoo.theory.thm2_length_generalization`) it speaks of
*every* solution, so it is checked the same way: train a 1-layer CAT on MQNAR at L with the
project's training loop, then measure accuracy and the attention maps at L' = L ... 16 L.

The causal counterpart of ``s_*`` (the key-delay form of Thm. 1, the one a causal CAT can
reach) puts all mass on ``alpha + 1``, the position after the earlier copy of the query's
N-gram; as in Thm. 2 the map is also compared at one more common delay s (``alpha + 1 + s``).
The value filter bound (i) is not evaluated: its two-sided filter is not the causal CAT we train.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from pydantic import Field

from mixerzoo.analysis.outcome import Outcome
from mixerzoo.evaluation import evaluate_tokens
from mixerzoo.params import Params
from mixerzoo.tasks import IGNORE, build_task
from mixerzoo.theory.thm2_length_generalization import attention_probabilities, one_layer_cat_config

STATEMENT = (
    "Prop. 3: a CAT that solves N-gram AR at length L solves it at every L' (error <= R L' eps_0), "
    "with an attention map within L' eps_0 of s_* at every L'."
)


class Prop3Params(Params):
    n: int = Field(2, ge=1, description="N-gram length N")
    train_seq_len: int = Field(64, ge=8, description="training length L")
    test_multipliers: list[int] = Field([1, 2, 4, 8, 16], min_length=1, description="L' = m L")
    d_model: int = Field(64, ge=2)
    vocab_size: int = Field(8192, ge=8)
    key_vocab_size: int = Field(16, ge=1, description="MQNAR key alphabet (tasks/mqnar.py)")
    n_train: int = Field(12800, ge=1)
    n_test: int = Field(200, ge=1, description="test examples per length")
    epochs: int = Field(8, ge=1)
    lr: float = Field(1e-3, gt=0)
    batch_size: int = Field(64, ge=1)
    early_stop_accuracy: float | None = Field(0.99, gt=0, le=1)
    seed: int = Field(0, ge=0)


def task_params(p: Prop3Params, seq_len: int) -> dict[str, Any]:
    return {
        "name": "mqnar",
        "vocab_size": p.vocab_size,
        "seq_len": seq_len,
        "n": p.n,
        "key_vocab_size": p.key_vocab_size,
    }


def run_config(p: Prop3Params) -> dict[str, Any]:
    return one_layer_cat_config(p, task_params(p, p.train_seq_len), "cat-1L (Prop. 3)")


def golden_ngram_positions(inputs: np.ndarray, labels: np.ndarray, n: int) -> list[tuple[int, int, int]]:
    """(example, query position t, alpha + 1) for each supervised query whose N-gram (ending at t)
    ended earlier at alpha (the last such alpha)."""
    out = []
    for i, t in zip(*np.nonzero(labels != IGNORE)):
        if t - n + 1 < 0:
            continue
        gram = inputs[i, t - n + 1 : t + 1]
        ends = [j for j in range(n - 1, t) if np.array_equal(inputs[i, j - n + 1 : j + 1], gram)]
        if ends:
            out.append((int(i), int(t), ends[-1] + 1))
    return out


@torch.no_grad()
def ngram_attention_distance(
    model, inputs: np.ndarray, labels: np.ndarray, n: int, batch: int = 16, shifts: int = 2
):
    """Mean and max l1 distance (best head) of each query's attention row from the map with all
    mass on alpha + 1 (and on alpha + 1 + s, s <= ``shifts``: the best mean and its s)."""
    dists: list[list[float]] = [[] for _ in range(shifts + 1)]
    for start in range(0, inputs.shape[0], batch):
        x, y = inputs[start : start + batch], labels[start : start + batch]
        probs = attention_probabilities(model, torch.from_numpy(x)).double()
        for i, t, target in golden_ngram_positions(x, y, n):
            for s in range(shifts + 1):
                if target + s <= t:
                    row = probs[i, :, t].clone()
                    row[:, target + s] -= 1.0
                    dists[s].append(float(row.abs().sum(dim=-1).min()))
    means = [float(np.mean(d)) if d else float("inf") for d in dists]
    best = int(np.argmin(means))
    return {
        "attention_l1_mean": means[0],
        "attention_l1_max": float(np.max(dists[0])) if dists[0] else float("inf"),
        "attention_l1_best_shift": means[best],
        "best_shift": best,
    }


def length_cell(model, p: Prop3Params, factor: int) -> dict[str, Any]:
    """Accuracy and attention distances of the trained model at L' = factor * L."""
    length = factor * p.train_seq_len
    spec = task_params(p, length)
    task = build_task(spec.pop("name"), **spec)
    data = task.make(p.n_test, p.seed + 1, "test")
    x, y = torch.from_numpy(data.inputs), torch.from_numpy(data.labels)
    m = evaluate_tokens(model, x, y, batch_size=max(1, 16384 // length))
    att = ngram_attention_distance(model, data.inputs, data.labels, p.n, batch=max(1, 8192 // length))
    return {
        "test_seq_len": length,
        "train_seq_len": p.train_seq_len,
        "length_factor": factor,
        "accuracy_per_query": m["accuracy_per_query"],
        "n_test": p.n_test,
        "seeds": 1,
        **att,
    }


PARAMS = Prop3Params


def run(p: Prop3Params, log=print) -> Outcome:
    from mixerzoo.config import load_run_config
    from mixerzoo.training.train import train

    log(f"training a 1-layer CAT on mqnar (N = {p.n}) at L = {p.train_seq_len} ...")
    result = train(load_run_config(run_config(p)), progress=False)
    model = result.model.cpu().eval()
    log(f"trained in {result.wall_s:.1f} s, {result.steps} steps")
    out = Outcome(axes=["length_factor"], metric="accuracy_per_query")
    for factor in p.test_multipliers:
        cell = length_cell(model, p, factor)
        cell["train_steps"] = result.steps
        out.cells.append(cell)
        out.add_line(
            f"trained at L={p.train_seq_len}, tested at L'={cell['test_seq_len']} (N = {p.n})",
            "accuracy stays ~1; attention map near s_* (error <= R L' eps_0)",
            f"accuracy {cell['accuracy_per_query']:.4f}; attention l1 mean {cell['attention_l1_mean']:.3f} "
            f"(best shift s={cell['best_shift']}: {cell['attention_l1_best_shift']:.3f})",
            log,
        )
    return out


def plan_cells(params: dict) -> list[dict]:
    """The axis key (``length_factor``) of the cells :func:`run` produces."""
    return [{"length_factor": f} for f in Prop3Params.model_validate(params).test_multipliers]
