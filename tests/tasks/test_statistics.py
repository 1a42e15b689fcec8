"""Task.statistics: the per-example summary `mixerzoo data --stats` prints, for every task."""

from __future__ import annotations

import numpy as np
import pytest

from mixerzoo.tasks import IGNORE, TASKS, build_task


@pytest.mark.parametrize("name", TASKS.names())
def test_statistics_of_every_task(name, task_params):
    task = build_task(name, **task_params(name))
    data = task.make(6, seed=0)
    stats = task.statistics(data)
    assert stats and all(set(v) == {"mean", "std", "min", "max"} for v in stats.values())
    assert all(np.isfinite(x) for v in stats.values() for x in v.values())
    # the first entry counts what is scored per example, recounted here row by row
    first, summary = next(iter(stats.items()))
    if task.output == "tokens":
        counts = [sum(int(y) != IGNORE for y in row) for row in data.labels]
    else:
        counts = [int(sum(bool(m) for m in row)) for row in data.mask]
    assert summary["mean"] == pytest.approx(np.mean(counts))
    assert summary["min"] == min(counts) and summary["max"] == max(counts)
    assert first in {"supervised_positions", "scored_positions", "real_tokens"}
