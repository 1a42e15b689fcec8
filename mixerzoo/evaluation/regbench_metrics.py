"""RegBench scoring against the true next-token distributions (ICLL, Sec. 4.4, Eq. 8-9).

For every scored position ``t`` of every test instance, with ``p`` the predictor's next-token
distribution and ``q`` the instance language's (see :mod:`mixerzoo.tasks.regbench`):

  * ``accuracy`` (Eq. 8): ``1[argmax_x p(x) in supp(q)]`` -- greedy decoding produces a valid
    continuation;
  * ``tvd`` (Eq. 9): ``1/2 * sum_x |p(x) - q(x)|``;

both averaged over all scored positions of all instances pooled (``NT`` = number of scored
positions), not per instance first.

Scored positions are those with a next token (not padding), whether or not the labels train on
it (the separator's are not trained by default, as in the authors' code). Eq. 8-9 sum over every symbol
of the test set, so positions whose next token is a separator are scored too (default,
``score_separator_targets=True``); the language assigns the separator no probability (PFAs
without final states), so ``q`` there is the current state's symbol distribution.
``score_separator_targets=False`` scores only positions whose next token is a symbol.

Eq. 9 sums over the shared symbol set ``V``; a predictor that also emits padding or separator
tokens has mass outside ``V``. ``tvd_over="vocab"`` (default) sums over every token, a proper
distance (mass outside ``V`` counts as error); ``tvd_over="symbols"`` sums over ``V`` only, the
literal Eq. 9. Both agree when the predictor puts no mass outside ``V``.

One scorer serves every predictor: :func:`score_distributions` takes any array of next-token
distributions ``[n, l, vocab]`` (n-gram baselines, Baum-Welch, models); :func:`score_model`
feeds it ``softmax(model(inputs))`` batch by batch and, as :func:`score_with_errors`, gives each
score its standard error over the test instances (a baseline's numbers beside a model's, ICLL Fig. 2).
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import torch

from mixerzoo.tasks.base import IGNORE, TaskData
from mixerzoo.tasks.regbench import scored_positions, true_distributions

TvdOver = Literal["vocab", "symbols"]


def scored_mask(data: TaskData, rows: slice, score_separator_targets: bool = True) -> np.ndarray:
    """bool ``[m, l]``: the positions Eq. 8-9 average over, for instances ``rows`` (every
    position with a next token: the labels may leave the separator out of training)."""
    mask = scored_positions(data)[rows].copy()
    if not score_separator_targets:
        separator = data.extras["transitions"].shape[2] + 1
        labels = data.labels[rows]
        # the next token is the separator where the label says so (trained on it) or where a
        # position with a next token has no label (the separator masked out of training): the
        # labels, not the inputs, know the next token of a cut instance's last position
        mask &= (labels != separator) & (labels != IGNORE)
    return mask


def position_scores(
    pred: np.ndarray, true: np.ndarray, tvd_over: TvdOver = "vocab"
) -> tuple[np.ndarray, np.ndarray]:
    """Per-position Eq. 8 hit and Eq. 9 distance: pred, true ``[..., vocab]`` -> two ``[...]`` arrays."""
    pred = np.asarray(pred, dtype=np.float64)
    true = np.asarray(true, dtype=np.float64)
    if pred.shape != true.shape:
        raise ValueError(f"predicted distributions {pred.shape} and true ones {true.shape} differ in shape")
    choice = pred.argmax(axis=-1)
    hit = np.take_along_axis(true, choice[..., None], axis=-1)[..., 0] > 0
    diff = np.abs(pred - true)
    if tvd_over == "symbols":
        diff = diff[..., 1:-1]  # token layout: pad 0, symbols 1..|V|, separator |V| + 1
    return hit, 0.5 * diff.sum(axis=-1)


def score_distributions(
    pred: np.ndarray | torch.Tensor,
    data: TaskData,
    score_separator_targets: bool = True,
    tvd_over: TvdOver = "vocab",
    batch_size: int = 256,
) -> dict[str, float]:
    """Eq. 8-9 for a predictor given as next-token distributions ``pred`` ``[n, l, vocab]``.

    ``pred[i, t]`` is the predicted distribution of ``data.inputs[i, t + 1]``. Returns
    ``{"accuracy", "tvd", "n_scored"}``.
    """
    if isinstance(pred, torch.Tensor):
        pred = pred.detach().cpu().numpy()
    scores = score_with_errors(pred, data, score_separator_targets, tvd_over, batch_size)
    return {key: scores[key] for key in ("accuracy", "tvd", "n_scored")}


def score_with_errors(
    pred: np.ndarray,
    data: TaskData,
    score_separator_targets: bool = True,
    tvd_over: TvdOver = "vocab",
    batch_size: int = 256,
) -> dict[str, float]:
    """:func:`score_distributions`' numbers and the standard error of each over the test instances.

    Eq. 8-9 pool every scored position, but the positions of one instance share its language, so
    the independent draws are the instances: with ``s_i`` an instance's summed hits (or distances),
    ``c_i`` its scored positions and ``r = sum s / sum c`` the pooled score, the error is the
    ratio estimator's, ``sqrt(n / (n - 1) * sum (s_i - r c_i)^2) / sum c`` (0 for one instance).
    Returns ``{"accuracy", "tvd", "n_scored", "se_accuracy", "se_tvd"}``."""
    n = len(data)
    if pred.shape[:2] != data.inputs.shape:
        raise ValueError(f"predicted distributions {pred.shape} do not match inputs {data.inputs.shape}")
    sums = _InstanceSums(n)
    for start in range(0, n, batch_size):
        rows = slice(start, min(start + batch_size, n))
        sums.add(pred[rows], data, rows, score_separator_targets, tvd_over)
    return sums.scores()


class _InstanceSums:
    """Per test instance: its summed Eq. 8 hits, Eq. 9 distances and scored positions, filled batch
    by batch; :meth:`scores` pools them and gives each pooled score its error over the instances."""

    def __init__(self, n: int) -> None:
        self.sums = {"accuracy": np.zeros(n), "tvd": np.zeros(n)}
        self.counts = np.zeros(n)

    def add(self, pred: np.ndarray, data: TaskData, rows: slice, separator: bool, tvd_over: TvdOver) -> None:
        mask = scored_mask(data, rows, separator)
        hit, dist = position_scores(pred[mask], true_distributions(data, rows)[mask], tvd_over)
        instance = np.nonzero(mask)[0]
        self.sums["accuracy"][rows] = np.bincount(instance, hit.astype(np.float64), minlength=mask.shape[0])
        self.sums["tvd"][rows] = np.bincount(instance, dist, minlength=mask.shape[0])
        self.counts[rows] = mask.sum(axis=1)

    def scores(self) -> dict[str, float]:
        n, total = len(self.counts), self.counts.sum()
        if total == 0:
            raise ValueError("no scored positions: every label is -100")
        out: dict[str, float] = {"n_scored": int(total)}
        for name, s in self.sums.items():
            r = s.sum() / total
            spread = float(np.sum((s - r * self.counts) ** 2)) * n / (n - 1) if n > 1 else 0.0
            out[name], out[f"se_{name}"] = float(r), float(np.sqrt(spread) / total)
        return out


@torch.no_grad()
def model_distributions(model, inputs: torch.Tensor, batch_size: int = 64, device=None) -> np.ndarray:
    """``softmax(model(inputs))`` as float32 numpy ``[n, l, vocab]`` (model in eval mode)."""
    return np.concatenate(list(_model_batches(model, inputs, batch_size, device)), axis=0)


@torch.no_grad()
def score_model(
    model,
    data: TaskData,
    score_separator_targets: bool = True,
    tvd_over: TvdOver = "vocab",
    batch_size: int = 64,
    device=None,
) -> dict[str, float]:
    """Eq. 8-9 for a language model: the numbers of ``score_with_errors(model_distributions(...))``
    (the pooled scores and their errors over the test instances), without holding every
    distribution in memory."""
    sums = _InstanceSums(len(data))
    inputs = torch.from_numpy(data.inputs)
    start = 0
    for probs in _model_batches(model, inputs, batch_size, device):
        rows = slice(start, start + probs.shape[0])
        sums.add(probs, data, rows, score_separator_targets, tvd_over)
        start = rows.stop
    return sums.scores()


def _model_batches(model, inputs: torch.Tensor, batch_size: int, device):
    was_training = model.training
    model.eval()
    device = device or next(model.parameters()).device
    try:
        for start in range(0, inputs.shape[0], batch_size):
            logits = model(inputs[start : start + batch_size].to(device))
            yield torch.softmax(logits.float(), dim=-1).cpu().numpy()
    finally:
        model.train(was_training)
