"""The grid of the scaling benchmark (``mixerzoo bench``): every mixer at every length.

Each point runs by :func:`mixerzoo.training.throughput.bench_point`'s rules (estimated first and
skipped when it would not fit the memory budget, measured in a fresh process on CPU). Without a
fixed batch, every point trains on the same number of tokens per step
(:func:`~mixerzoo.training.throughput.batch_for_length`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mixerzoo.training import throughput as tp


def bench_grid(
    names: list[str],
    lens: list[int],
    *,
    batch: int | None,
    tokens: int,
    timeout_s: float | None,
    max_mem_mb: float | None,
    on_row: Callable[[tp.BenchResult], None] | None = None,
    **model: Any,
) -> list[tp.BenchResult]:
    """One row per (mixer, length), mixers outermost; ``on_row`` sees each row as it is measured.

    ``max_mem_mb``: the memory budget (None: what is available on ``model["device"]`` now);
    ``model``: the rest of :func:`~mixerzoo.training.throughput.bench_one`'s arguments
    (``d_model``, ``n_layers``, ``vocab_size``, ``steps``, ``warmup``, ``device``, ``dtype``).
    """
    budget = max_mem_mb or tp.available_memory_mb(model.get("device", "cpu"))
    rows = []
    for name in names:
        for L in lens:
            b = batch or tp.batch_for_length(L, tokens)
            point = dict(mixer=name, seq_len=L, batch=b, **model)
            row = tp.bench_point(timeout_s=timeout_s, budget_mb=budget, **point)
            rows.append(row)
            if on_row is not None:
                on_row(row)
    return rows
