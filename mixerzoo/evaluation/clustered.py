"""Standard errors of means over samples that come in groups (cluster-robust errors).

Positions of one sequence share its context (its language, its key-value pairs, its text), so they
are not independent draws: the sequences are. A mean over positions drawn from a few sequences is a
ratio ``sum_i S_i / sum_i n_i`` of per-sequence sums ``S_i`` over per-sequence counts ``n_i``, and
its error is the cluster-robust one with the sequences as the units,

    sqrt(g / (g - 1) * sum_i (S_i - mean * n_i)^2) / sum_i n_i

over the ``g`` sequences that hold a sample. With one sample per sequence it is the usual error of
a mean, ``std(ddof=1) / sqrt(g)``; samples that repeat a sequence's value add no evidence.
"""

from __future__ import annotations

import math

import numpy as np


def ratio_error(sums: np.ndarray, counts: np.ndarray) -> float | None:
    """The cluster-robust error of ``sums.sum() / counts.sum()`` (1-D, one entry per group; groups
    with a zero count are left out); None when fewer than two groups hold a sample."""
    sums, counts = np.asarray(sums, dtype=np.float64), np.asarray(counts, dtype=np.float64)
    keep = counts > 0
    g = int(keep.sum())
    if g < 2:
        return None
    total = float(counts.sum())
    residual = sums[keep] - sums.sum() / total * counts[keep]
    return float(math.sqrt(g / (g - 1) * float((residual**2).sum())) / total)


def grouped_error(values: np.ndarray, groups: np.ndarray) -> float | None:
    """The error of ``values.mean()`` (1-D samples) when ``groups[k]`` names the sequence sample k
    was drawn from (:func:`ratio_error` over the groups)."""
    values = np.asarray(values, dtype=np.float64)
    _, index = np.unique(np.asarray(groups), return_inverse=True)
    return ratio_error(np.bincount(index, weights=values), np.bincount(index))
