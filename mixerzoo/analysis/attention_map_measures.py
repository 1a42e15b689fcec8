"""How smooth an attention map is and how far it reaches (LaS App. D, Fig. 4).

LaS App. D shows attention maps of LaS and vanilla attention language models and reads them by
eye: the LaS maps "are more attuned to long-range dependencies", the vanilla ones focus "on
short-range dependencies", and LaS "produces smoother attention matrices". These functions turn
the two readings into numbers per query row of a causal map ``A`` (row ``i`` spreads over keys
``j <= i``; each row is first divided by its sum, since LaS's zero-padded pooling leaves rows
near their ends slightly short of 1):

* :func:`roughness`: the mean ``|A[i, j+1] - A[i, j]|`` over neighbouring keys ``0 <= j < i``
  of the row (lower: smoother). The masked keys past ``i`` are left out: every causal row drops
  to 0 there, so that edge says nothing about smoothness. A uniform row has 0; a one-hot row 1 / i;
* :func:`mean_distance`: ``sum_j A[i, j] (i - j)``, the row's mean attention distance;
* :func:`far_share`: the row's mass on keys more than ``far`` positions back, ``i - j > far``.

Each takes maps ``[..., l, l]`` and query positions and returns ``[..., queries]``: one number per
sampled row, which :func:`mean_and_error` averages with its standard error.
:func:`plot_map_pair` draws two maps side by side, min-max normalised as LaS Fig. 4 is.

Dimension names: ``l`` length (queries and keys), ``q`` sampled query positions.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np


def _rows(maps: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """The rows ``[..., q, l]`` at the query positions, each divided by its sum."""
    rows = np.asarray(maps, dtype=np.float64)[..., np.asarray(queries), :]
    total = rows.sum(axis=-1, keepdims=True)
    return rows / np.where(total > 0, total, 1.0)


def _causal(length: int, queries: np.ndarray) -> np.ndarray:
    """``[q, l]`` distances ``i - j``, negative past the query (masked keys)."""
    return np.asarray(queries)[:, None] - np.arange(length)[None, :]


def roughness(maps: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """Mean ``|A[i, j+1] - A[i, j]|`` over ``0 <= j < i`` of each query row ``i`` (>= 1): ``[..., q]``."""
    queries = np.asarray(queries)
    if (queries < 1).any():
        raise ValueError("roughness needs query positions >= 1 (row 0 has one key, no neighbours)")
    rows = _rows(maps, queries)
    steps = np.abs(np.diff(rows, axis=-1))  # step j: keys j and j + 1
    inside = _causal(rows.shape[-1], queries)[:, 1:] >= 0  # key j + 1 <= i
    return (steps * inside).sum(axis=-1) / queries


def mean_distance(maps: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """``sum_j A[i, j] (i - j)`` of each query row: ``[..., q]``."""
    rows = _rows(maps, queries)
    d = np.maximum(_causal(rows.shape[-1], queries), 0)
    return (rows * d).sum(axis=-1)


def far_share(maps: np.ndarray, queries: np.ndarray, far: int) -> np.ndarray:
    """The mass of each query row on keys with ``i - j > far``: ``[..., q]``."""
    rows = _rows(maps, queries)
    return (rows * (_causal(rows.shape[-1], queries) > far)).sum(axis=-1)


def mean_and_error(values: np.ndarray) -> tuple[float, float | None]:
    """The mean of the sampled rows' numbers and its standard error, ``sd / sqrt(n)`` (None for one)."""
    v = np.asarray(values, dtype=np.float64).ravel()
    se = float(np.std(v, ddof=1) / math.sqrt(v.size)) if v.size > 1 else None
    return float(v.mean()), se


def window_mean_and_error(values: np.ndarray, axis: int = 1) -> tuple[float, float | None]:
    """The mean over every sampled row, and its standard error clustered by window: ``values`` hold
    one number per row with the windows along ``axis``; the rows of one window share its text, so
    the error is that of the windows' means, ``sd(window means) / sqrt(windows)`` (None for one)."""
    v = np.moveaxis(np.asarray(values, dtype=np.float64), axis, 0)
    per_window = v.reshape(v.shape[0], -1).mean(axis=1)
    return mean_and_error(per_window)


def min_max(weights: np.ndarray) -> np.ndarray:
    """A causal map scaled to [0, 1] over its causal part (LaS App. D: "min-max normalization");
    the masked upper triangle is set to 0."""
    w = np.asarray(weights, dtype=np.float64)
    causal = np.tril(np.ones(w.shape, dtype=bool))
    lo, hi = w[causal].min(), w[causal].max()
    scaled = (w - lo) / (hi - lo) if hi > lo else np.zeros_like(w)
    return np.where(causal, scaled, 0.0)


def plot_map_pair(maps: dict[str, np.ndarray], out: str | Path, title: str = "") -> Path:
    """One ``[l, l]`` map per label, side by side (query rows, key columns), as LaS Fig. 4."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(maps), figsize=(4.2 * len(maps), 4.4), squeeze=False)
    for ax, (label, w) in zip(axes[0], maps.items()):
        ax.imshow(min_max(w), cmap="viridis", vmin=0.0, vmax=1.0)
        ax.set_title(label, fontsize=9)
        ax.set_xlabel("key")
        ax.set_ylabel("query")
    if title:
        fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
