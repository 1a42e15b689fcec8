"""The in-window ceiling of a recall task: the share of queries a window-w layer can answer directly.

A sliding window of w tokens (``attention`` with ``pattern: sliding``: each token sees the previous
w tokens, itself included) lets the query at position t read positions t - w + 1 .. t. A query's
answer is *in the window* when the value it must return sits there, right after an earlier copy of
the query's key: a position p with ``inputs[p - 1] == inputs[t]``, ``inputs[p] == labels[t]`` and
``t - p < w`` (the nearest such p counts). The share of supervised queries in the window is what
one windowed layer can read directly, the ceiling the data puts on a window-w model that recalls by
one hop (Zoology App. F.1 Experiment 3 reads its windows this way: "16 KVs ... 32 total tokens").
Two stacked windowed layers could relay from up to 2w - 1 tokens back; that reach is counted by
``window=2 * w - 1``.

Glossary: n examples, l positions, t a query position, p a value position, w the window.
"""

from __future__ import annotations

import numpy as np

from mixerzoo.tasks import IGNORE, build_task


def value_distances(inputs: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """inputs, labels (n, l) -> (q,) distance t - p from each supervised query to its nearest
    answering value (a key copy at p - 1, the label at p, p < t); -1 where no earlier pair answers it."""
    rows, cols = np.nonzero(labels != IGNORE)
    out = np.full(len(rows), -1, dtype=np.int64)
    for j, (i, t) in enumerate(zip(rows, cols)):
        prev, cur = inputs[i, : t - 1], inputs[i, 1:t]  # pairs (p - 1, p) for p = 1 .. t - 1
        hits = np.nonzero((prev == inputs[i, t]) & (cur == labels[i, t]))[0]
        if len(hits):
            out[j] = t - (int(hits[-1]) + 1)
    return out


def in_window_share(inputs: np.ndarray, labels: np.ndarray, window: int) -> float:
    """The share of supervised queries whose answering value lies among the last ``window`` tokens."""
    if window < 1:
        raise ValueError(f"window = {window}: a window holds at least one token")
    d = value_distances(inputs, labels)
    if not len(d):
        raise ValueError("no supervised query in the data")
    return float(np.mean((d >= 0) & (d < window)))


def window_ceilings(
    task: str, windows: list[int], n: int = 2000, seed: int = 0, **params
) -> dict[int, float]:
    """window -> in-window share on ``n`` test examples of ``task`` (a registered token task)."""
    data = build_task(task, **params).make(n, seed, "test")
    return {w: in_window_share(data.inputs, data.labels, w) for w in windows}
