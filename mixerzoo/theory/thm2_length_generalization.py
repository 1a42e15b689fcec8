"""Thm. 2 (CAT Sec. 4; proof CAT-ws App. E.2): every CAT that solves AR at one length solves all lengths.

Statement: a CAT layer that solves AR up to eps on all sequences of length L has (i) a value
filter within ``L eps_0`` (l1) of ``D_-1``, (ii) at any length L' an attention map within ``L'
eps_0`` (l1) of the "golden" map, and (iii) error ``<= R L' eps_0`` at length L'. "All CAT models
that approximately solve the AR problem end up learning convolution and attention weights that
are consistent with the constructive result of Theorem 1."

Our CAT is causal, so the construction a trained layer can reach is Thm. 1's *key delay* form
(Cor. 1): key filter ``D_1``, query and value filters ``D_0``, and at each query the attention map
``s*`` = all mass on the position after the earlier copy of the query (CAT-ws App. E.1: ``I_{alpha+1}``).
The tools below measure how far a trained 1-layer ``cat`` is from that:
  * :func:`filter_distance`: ``|| F / ||F||_1 * sign(F_lag) - D_lag ||_1`` per head, in [0, 2]
    (a filter is defined up to the scale and sign that ``W`` absorbs, ``(X * F) W = (X W) * F``);
  * :func:`shifted_filter_distances`: the key and value filters against Cor. 1's moved by one
    common delay s (key ``D_(1+s)``, value ``D_s``), which solves AR as well (App. E.1's proof);
  * :func:`attention_distance`: mean and max over supervised queries of ``|| S(q K^T) - s* ||_1``
    in [0, 2], at any test length L', and against the map moved by s positions.
:func:`run` trains at L with the project's training loop and reports both, with accuracy, at
L' = L ... 16 L.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
from pydantic import Field

from mixerzoo.analysis.outcome import Outcome
from mixerzoo.evaluation import evaluate_tokens
from mixerzoo.ops.heads import split_heads
from mixerzoo.params import Params
from mixerzoo.tasks import IGNORE, build_task

STATEMENT = (
    "Thm. 2: a CAT that solves AR at length L solves it at every L' (error <= R L' eps_0), with "
    "filters and attention consistent with Thm. 1's construction."
)


class Thm2Params(Params):
    train_seq_len: int = Field(64, ge=8, description="training length L")
    test_multipliers: list[int] = Field([1, 2, 4, 8, 16], min_length=1, description="L' = m L")
    d_model: int = Field(64, ge=2)
    vocab_size: int = Field(8192, ge=8)
    n_train: int = Field(12800, ge=1)
    n_test: int = Field(200, ge=1, description="test examples per length")
    epochs: int = Field(8, ge=1)
    lr: float = Field(1e-3, gt=0)
    batch_size: int = Field(64, ge=1)
    early_stop_accuracy: float | None = Field(0.99, gt=0, le=1)
    seed: int = Field(0, ge=0)


def filter_distance(taps: torch.Tensor, lag: int) -> torch.Tensor:
    """taps (h, w) lag-indexed -> (h,) l1 distance of each normalized filter from the delay D_lag."""
    f = taps.detach().double()
    f = f / f.abs().sum(dim=-1, keepdim=True).clamp_min(1e-12)
    f = f * torch.sign(f[:, lag : lag + 1]).where(f[:, lag : lag + 1] != 0, torch.ones(1, dtype=f.dtype))
    target = torch.zeros_like(f)
    target[:, lag] = 1.0
    return (f - target).abs().sum(dim=-1)


def shifted_filter_distances(mixer) -> dict[str, float | int]:
    """Distances of the key and value filters from Cor. 1's moved by one common delay s (key
    ``D_(1+s)``, value ``D_s``), at the s that brings both nearest (the larger of the two least).

    Thm. 1's key-delay construction (proof: CAT-ws App. E.1) holds verbatim when the key and value
    streams share one more delay ``D_s``: the query's earlier copy at alpha then sits in the keys at
    alpha + 1 + s, where the values hold ``x_(alpha+1)``, the answer (s <= t - alpha - 1 at a query
    t). Thm. 2's first bullet fixes the value filter relative to the keys (``D_-1``), which a common
    delay keeps. A model without a value filter (identity) can only be at s = 0."""
    k = mixer.filters["k"]
    v = mixer.filters["v"] if "v" in mixer.filters else None
    if k.dim() != 2 or (v is not None and v.dim() != 2):
        raise ValueError("filter distances need conv_type = per_head")
    if k.shape[-1] < 2:
        raise ValueError("the key-delay construction needs a key filter of width >= 2")
    best: tuple[float, int, float, float] | None = None
    for s in range(k.shape[-1] - 1 if v is not None else 1):
        kd = float(filter_distance(k, 1 + s).min())
        vd = float(filter_distance(v, s).min()) if v is not None else 0.0
        if best is None or max(kd, vd) < best[0]:
            best = (max(kd, vd), s, kd, vd)
    assert best is not None
    return {"k_filter_l1_shifted": best[2], "v_filter_l1_shifted": best[3], "filter_shift": best[1]}


def cat_filter_distances(mixer) -> dict[str, float]:
    """Distances of a trained ``cat`` mixer's filters from Cor. 1's (k: D_1; q, v: D_0), best head."""
    out = {}
    for name, lag in (("q", 0), ("k", 1), ("v", 0)):
        if name in mixer.filters:
            f = mixer.filters[name]
            if f.dim() != 2:
                raise ValueError("filter distances need conv_type = per_head")
            out[f"{name}_filter_l1"] = float(filter_distance(f, lag).min())
    return out


@torch.no_grad()
def attention_probabilities(model, inputs: torch.Tensor) -> torch.Tensor:
    """inputs (b, l) -> the first layer's softmax attention (b, h, l, l) of a ``cat`` mixer."""
    block = model.blocks[0]
    mixer = block.mixer
    x = model.embed(inputs)
    if model.pos_embed is not None:
        x = x + model.pos_embed(torch.arange(inputs.shape[1]))
    h = block.norm1(x)
    q, k, _ = (mixer.convolve(t, c) for t, c in zip(mixer.qkv(h).chunk(3, dim=-1), "qkv"))
    q, k = split_heads(q, mixer.p.num_heads), split_heads(k, mixer.p.num_heads)
    scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    l = inputs.shape[1]
    future = torch.ones(l, l, dtype=torch.bool).triu(1)
    return torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1)


def golden_positions(inputs: np.ndarray, labels: np.ndarray) -> list[tuple[int, int, int]]:
    """(example, query position t, alpha + 1) for each supervised query whose token occurred
    earlier at alpha (the Cor. 1 map puts all its mass on alpha + 1)."""
    out = []
    for i, t in zip(*np.nonzero(labels != IGNORE)):
        earlier = np.nonzero(inputs[i, :t] == inputs[i, t])[0]
        if len(earlier):
            out.append((int(i), int(t), int(earlier[-1]) + 1))
    return out


@torch.no_grad()
def attention_distance(
    model, inputs: np.ndarray, labels: np.ndarray, batch: int = 16, shifts: int = 3
) -> dict[str, float]:
    """Mean and max l1 distance (best head) of the attention maps from Cor. 1's map, over queries.

    Also the distance from the map shifted by s = 1 .. ``shifts`` positions (all mass on alpha + 1 + s):
    ``attention_l1_best_shift`` is the smallest mean over s = 0 .. shifts and ``best_shift`` its s,
    which tells a shifted solution (e.g. key filter D_2 with value filter D_1) from no solution.
    """
    dists: list[list[float]] = [[] for _ in range(shifts + 1)]
    for start in range(0, inputs.shape[0], batch):
        x, y = inputs[start : start + batch], labels[start : start + batch]
        probs = attention_probabilities(model, torch.from_numpy(x)).double()
        for i, t, target in golden_positions(x, y):
            for s in range(shifts + 1):
                if target + s > t:
                    continue
                row = probs[i, :, t].clone()  # (h, l)
                row[:, target + s] -= 1.0
                dists[s].append(float(row.abs().sum(dim=-1).min()))
    means = [float(np.mean(d)) if d else float("inf") for d in dists]
    best = int(np.argmin(means))
    return {
        "attention_l1_mean": means[0],
        "attention_l1_max": float(np.max(dists[0])),
        "attention_l1_best_shift": means[best],
        "best_shift": best,
    }


def dominant_lags(mixer) -> dict[str, int]:
    """The lag of the largest |tap| of each filter (head 0): 1 for Cor. 1's key filter, 0 for q, v."""
    return {
        f"{name}_filter_lag": int(f[0].abs().argmax()) for name, f in mixer.filters.items() if f.dim() == 2
    }


def run_config(p: Thm2Params) -> dict[str, Any]:
    task = {"name": "mqar_cat", "vocab_size": p.vocab_size, "seq_len": p.train_seq_len}
    return one_layer_cat_config(p, task, "cat-1L (Thm. 2)")


def one_layer_cat_config(p: Any, task: dict[str, Any], name: str) -> dict[str, Any]:
    """The run config of a 1-layer CAT (conv width 3) trained on ``task`` at the training length,
    as the length-generalization checks train it (Thm. 2, Prop. 3); ``p``: their parameters."""
    return {
        "name": name,
        "data": {
            "task": task,
            "n_train": p.n_train,
            "n_test": p.n_test,
            "seed": p.seed,
        },
        "model": {"d_model": p.d_model, "n_layers": 1, "mixer": {"name": "cat", "conv_width": 3}},
        "train": {
            "epochs": p.epochs,
            "batch_size": p.batch_size,
            "lr": p.lr,
            "schedule": "constant",
            "warmup_frac": 0.02,
            "early_stop_accuracy": p.early_stop_accuracy,
            "device": "cpu",
            "seed": p.seed,
        },
    }


PARAMS = Thm2Params


def run(p: Thm2Params, log=print) -> Outcome:
    from mixerzoo.config import load_run_config
    from mixerzoo.training.train import train

    cfg = load_run_config(run_config(p))
    log(f"training a 1-layer CAT on mqar_cat at L = {p.train_seq_len} ...")
    result = train(cfg, progress=False)
    model = result.model.cpu().eval()
    mixer = model.blocks[0].mixer
    filters = {**cat_filter_distances(mixer), **shifted_filter_distances(mixer), **dominant_lags(mixer)}
    log(
        f"trained in {result.wall_s:.1f} s, {result.steps} steps; "
        "filters (l1 distance in [0, 2], dominant lag): "
        + ", ".join(f"{k} {v:.3f}" if isinstance(v, float) else f"{k} {v}" for k, v in filters.items())
    )
    out = Outcome(axes=["length_factor"], metric="accuracy_per_query")
    for factor in p.test_multipliers:
        cell = length_cell(model, p, factor)
        cell.update(filters, train_steps=result.steps)
        cell["shift_mismatch"] = abs(cell["best_shift"] - filters["filter_shift"])
        out.cells.append(cell)
        out.add_line(
            f"trained at L={p.train_seq_len}, tested at L'={cell['test_seq_len']}",
            "accuracy stays ~1; attention map near Cor. 1's (error <= R L' eps_0)",
            f"accuracy {cell['accuracy_per_query']:.4f}; attention l1 mean {cell['attention_l1_mean']:.3f} "
            f"max {cell['attention_l1_max']:.3f} "
            f"(best shift s={cell['best_shift']}: {cell['attention_l1_best_shift']:.3f}); "
            f"key filter l1 from D_1 {filters['k_filter_l1']:.3f}, from D_(1+s) at the filters' "
            f"shift s={filters['filter_shift']} {filters['k_filter_l1_shifted']:.3f} (value "
            f"from D_s {filters['v_filter_l1_shifted']:.3f})",
            log,
        )
    return out


def plan_cells(params: dict) -> list[dict]:
    """The axis key (``length_factor``, L' / L) of the cells :func:`run` produces: CAT Fig. 6's
    lengths are multiples of the training length."""
    p = Thm2Params.model_validate(params)
    return [{"length_factor": f} for f in p.test_multipliers]


def length_cell(model, p: Thm2Params, factor: int) -> dict[str, Any]:
    """Accuracy and attention distances of the trained model at L' = factor * L."""
    length = factor * p.train_seq_len
    task = build_task("mqar_cat", vocab_size=p.vocab_size, seq_len=length)
    data = task.make(p.n_test, p.seed + 1, "test")
    m = evaluate_tokens(
        model,
        torch.from_numpy(data.inputs),
        torch.from_numpy(data.labels),
        batch_size=max(1, 16384 // length),
    )
    att = attention_distance(model, data.inputs, data.labels, batch=max(1, 8192 // length))
    return {
        "test_seq_len": length,
        "train_seq_len": p.train_seq_len,
        "length_factor": factor,
        "accuracy_per_query": m["accuracy_per_query"],
        "n_test": p.n_test,  # the size of the evidence: the claims' noise margin reads it
        "seeds": 1,
        **att,
    }
