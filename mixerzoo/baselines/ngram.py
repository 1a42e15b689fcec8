"""In-context n-gram language model with backoff (ICLL, App. C.1, Alg. 1, Eq. 93-94).

At every position the prefix ``x[:t+1]`` is the corpus: split at separators, each string padded
on the left (:mod:`mixerzoo.baselines.counts`), n-grams of every order ``1..n`` counted. The
separator plays the padding/end token ``w`` of App. C.1: its probability is *excluded*, which
reserves the backoff mass without explicit smoothing ("worked slightly better than add-one").
For order ``m >= 2`` with context ``h`` (the last ``m - 1`` tokens) and its shortened context
``h'``, with ``c*`` the counts plus ``add_k`` (0 = no smoothing, as in the paper)::

    P_m(w | h) = c*(h w) / c*(h)                      if c(h w) > 0          (Alg. 1 line 11)
               = alpha(h) P_{m-1}(w | h')             otherwise              (line 14)
    beta(h)  = 1 - sum_{w: c(h w) > 0} c*(h w) / c*(h)                       (Eq. 93)
    alpha(h) = beta(h) / sum_{w: c(h w) = 0} P_{m-1}(w | h')                 (Eq. 94)

``c*(h)`` sums over the symbols *and* the end token; ``w`` ranges over the symbols. Two cases
the equations leave open, resolved so that every row sums to 1: a context never seen in the
prefix backs off entirely (``P_m = P_{m-1}``); when every symbol the lower order allows has
been seen (``sum_{w: c(h w) = 0} P_{m-1} = 0``) the seen estimates are renormalized. Order 1
is the prefix's symbol frequencies (uniform over the symbols before any symbol is seen). The
authors' script (``ngram.py`` in berlino/seq_icl) instead counts the padding character as a
unigram and leaves some rows summing to less than 1; here every row sums to 1.

Output: zero probability for padding and separator (the true distributions give the
separator none, see :mod:`mixerzoo.tasks.regbench`).
"""

from __future__ import annotations

import numpy as np
import torch
from pydantic import Field

from mixerzoo.baselines import BASELINES, Baseline
from mixerzoo.baselines.counts import ngram_counts
from mixerzoo.tasks.base import TaskData
from mixerzoo.tasks.regbench import PAD


def regbench_layout(data: TaskData) -> tuple[int, int]:
    """``(num_symbols, separator)``: token layout pad 0, symbols 1..A, separator A + 1."""
    if "transitions" in data.extras:
        a = int(data.extras["transitions"].shape[2])
    else:
        a = int(data.inputs.max()) - 1
    return a, a + 1


def backoff(counts: list[torch.Tensor], num_symbols: int, add_k: float = 0.0) -> torch.Tensor:
    """float64 ``[..., num_symbols]`` backoff distributions from counts of orders 1..n.

    counts[m - 1]: ``[..., v]`` order-``m`` counts over the token layout (pad 0, symbols
    ``1..A``, end token ``A + 1``).
    """
    a = num_symbols
    uni = counts[0][..., 1 : a + 1].double() + add_k
    total = uni.sum(-1, keepdim=True)
    p = torch.where(total > 0, uni / total.clamp_min(1e-300), torch.full_like(uni, 1.0 / a))
    for c in counts[1:]:
        c = c[..., 1 : a + 2].double()  # symbols and the end token
        seen = c[..., :a] > 0
        smoothed = c + add_k
        denom = smoothed.sum(-1, keepdim=True).clamp_min(1e-300)
        ml = torch.where(seen, smoothed[..., :a] / denom, torch.zeros_like(p))
        beta = (1.0 - ml.sum(-1, keepdim=True)).clamp_min(0.0)  # Eq. 93
        unseen = torch.where(seen, torch.zeros_like(p), p).sum(-1, keepdim=True)
        spread = ml + torch.where(seen, torch.zeros_like(p), p) * (beta / unseen.clamp_min(1e-300))  # Eq. 94
        renorm = ml / ml.sum(-1, keepdim=True).clamp_min(1e-300)
        new = torch.where(unseen > 1e-12, spread, renorm)
        p = torch.where(c.sum(-1, keepdim=True) > 0, new, p)
    return p


@BASELINES.register("ngram")
class NGram(Baseline):
    """In-context n-gram with backoff over orders 1..n (ICLL App. C.1)."""

    class Params(Baseline.Params):
        n: int = Field(3, ge=1, le=8, description="n-gram order (the paper uses 1..4)")
        add_k: float = Field(
            0.0, ge=0.0, description="add-k smoothing of the counts (0: none, the paper's choice)"
        )
        chunk: int = Field(16, ge=1, description="instances per counting batch (memory ~ chunk * l^2)")

    def distributions(self, data: TaskData) -> np.ndarray:
        a, sep = regbench_layout(data)
        vocab = a + 2
        n, l = data.inputs.shape
        out = np.zeros((n, l, vocab), dtype=np.float32)
        out[:, :, 1 : a + 1] = 1.0 / a  # padding rows; real rows are overwritten below
        lengths = (data.inputs != PAD).sum(axis=1)
        order = np.argsort(lengths, kind="stable")  # similar lengths together: trim the padding
        for s in range(0, n, self.p.chunk):
            rows = order[s : s + self.p.chunk]
            width = max(int(lengths[rows].max()), 1)
            x = data.inputs[rows, :width]
            counts = [ngram_counts(x, m, vocab, sep, True, self.p.chunk) for m in range(1, self.p.n + 1)]
            out[rows, :width, 1 : a + 1] = backoff(counts, a, self.p.add_k).float().numpy()
        return out


@BASELINES.register("true")
class TrueDistribution(Baseline):
    """The instance's own PFA (ICLL Sec. 3): the reference every Eq. 8-9 score is taken against."""

    def distributions(self, data: TaskData) -> np.ndarray:
        from mixerzoo.tasks.regbench import true_distributions

        out = true_distributions(data)
        a = out.shape[2] - 2
        empty = out.sum(-1) == 0  # padding rows: uniform over the symbols, so every row is a distribution
        out[empty, 1 : a + 1] = 1.0 / a
        return out
