"""Pairwise total variation distance between predictors (ICLL, Sec. 5.3, Fig. 5).

For predictors ``P_a`` (models, baselines, the true PFA) given as next-token distributions
``[n, l, v]`` on the same RegBench data, the distance of a pair is Eq. 9's TVD
``1/2 sum_x |p_a(x) - p_b(x)|`` averaged over the scored positions (every one with a next token) among
the first ``max_tokens`` tokens of each instance (Fig. 5: "across the first 100 tokens of each
string in the REGBENCH test set"), all instances pooled. The matrix is symmetric with a zero
diagonal by construction.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from mixerzoo.tasks.base import TaskData
from mixerzoo.tasks.regbench import scored_positions


def _scored_rows(
    dists: dict[str, np.ndarray], data: TaskData, max_tokens: int
) -> tuple[list[str], dict[str, np.ndarray], np.ndarray]:
    """``(names, rows, instance)``: each predictor's distributions at the scored positions among the
    first ``max_tokens`` tokens (``[positions, v]``, float64), and the instance of each position."""
    names = list(dists)
    if not names:
        raise ValueError("pairwise_tvd needs at least one predictor")
    shape = data.inputs.shape
    for name, d in dists.items():
        if d.shape[:2] != shape:
            raise ValueError(f"predictor {name!r}: distributions {d.shape} do not match the data {shape}")
    mask = scored_positions(data).copy()
    mask[:, max_tokens:] = False
    rows = {k: np.asarray(v[mask], dtype=np.float64) for k, v in dists.items()}
    return names, rows, np.nonzero(mask)[0]


def _tvd(rows: dict[str, np.ndarray], a: str, b: str) -> np.ndarray:
    """Eq. 9's TVD of predictors ``a`` and ``b`` at each scored position."""
    return 0.5 * np.abs(rows[a] - rows[b]).sum(-1)


def pairwise_tvd(
    dists: dict[str, np.ndarray], data: TaskData, max_tokens: int = 100
) -> tuple[list[str], np.ndarray]:
    """``(names, D)`` with ``D[a, b]`` the mean TVD of predictors ``a`` and ``b`` (see module doc)."""
    names, rows, _ = _scored_rows(dists, data, max_tokens)
    m = len(names)
    out = np.zeros((m, m))
    for a in range(m):
        for b in range(a + 1, m):
            out[a, b] = out[b, a] = _tvd(rows, names[a], names[b]).mean()
    return names, out


def pairwise_tvd_errors(dists: dict[str, np.ndarray], data: TaskData, max_tokens: int = 100) -> np.ndarray:
    """``E[a, b]``: the standard error of :func:`pairwise_tvd`'s ``D[a, b]`` over test instances.

    The positions of one instance share its language, so they are not independent draws; the
    pooled mean is a ratio of per-instance sums, and its error is the instances' (cluster) one:
    ``sqrt(k / (k - 1) * sum_i (s_i - D n_i)^2) / sum_i n_i`` over the ``k`` instances with scored
    positions, ``s_i`` an instance's summed TVD and ``n_i`` its scored positions. Names in the
    order of ``dists``, as :func:`pairwise_tvd` gives them.
    """
    names, rows, instance = _scored_rows(dists, data, max_tokens)
    _, index = np.unique(instance, return_inverse=True)  # the instances with scored positions
    n = np.bincount(index).astype(np.float64)
    k, m = len(n), len(names)
    out = np.zeros((m, m))
    if k < 2:
        return out
    for a in range(m):
        for b in range(a + 1, m):
            sums = np.bincount(index, weights=_tvd(rows, names[a], names[b]), minlength=k)
            mean = sums.sum() / n.sum()
            out[a, b] = out[b, a] = float(np.sqrt(k / (k - 1) * ((sums - mean * n) ** 2).sum()) / n.sum())
    return out


def plot_pairwise_tvd(
    names: list[str], matrix: np.ndarray, out: str | Path, title: str | None = None
) -> Path:
    """Heat-map of the matrix with each cell's value written in it (Fig. 5's layout); PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    m = len(names)
    fig, ax = plt.subplots(figsize=(1.0 + 0.7 * m, 0.8 + 0.6 * m))
    im = ax.imshow(matrix, cmap="viridis_r", vmin=0.0, vmax=max(float(matrix.max()), 1e-9))
    ax.set_xticks(range(m), names, rotation=45, ha="right")
    ax.set_yticks(range(m), names)
    for a in range(m):
        for b in range(m):
            ax.text(
                b,
                a,
                f"{matrix[a, b]:.2f}",
                ha="center",
                va="center",
                fontsize=8,
                color="white" if matrix[a, b] > 0.5 * matrix.max() else "black",
            )
    fig.colorbar(im, ax=ax, label="TVD")
    ax.set_title(title or "pairwise total variation distance")
    fig.tight_layout()
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
