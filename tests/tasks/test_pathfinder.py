"""Pathfinder (LRA): every label re-decided by an independent flood fill over the rendered pixels."""

from __future__ import annotations

from collections import deque

import numpy as np
import pytest

from mixerzoo.config import load_run_config
from mixerzoo.registry import ConfigError
from mixerzoo.tasks import build_task


def connected(image: np.ndarray, start: tuple[int, int], goal: tuple[int, int], threshold: int = 0) -> bool:
    """Plain BFS over 8-neighbouring pixels brighter than ``threshold``, from ``start``."""
    h, w = image.shape
    if image[start] <= threshold or image[goal] <= threshold:
        return False
    seen = {start}
    queue = deque([start])
    while queue:
        y, x = queue.popleft()
        if (y, x) == goal:
            return True
        for dy in (-1, 0, 1):
            for dx in (-1, 0, 1):
                q = (y + dy, x + dx)
                if 0 <= q[0] < h and 0 <= q[1] < w and q not in seen and image[q] > threshold:
                    seen.add(q)
                    queue.append(q)
    return False


def components(image: np.ndarray) -> int:
    """Number of 8-connected components of non-zero pixels (BFS labelling)."""
    todo = {tuple(p) for p in np.argwhere(image > 0)}
    count = 0
    while todo:
        count += 1
        queue = deque([todo.pop()])
        while queue:
            y, x = queue.popleft()
            for dy in (-1, 0, 1):
                for dx in (-1, 0, 1):
                    q = (y + dy, x + dx)
                    if q in todo:
                        todo.remove(q)
                        queue.append(q)
    return count


def check_labels_by_flood_fill(task, data):
    side = task.p.resolution
    for image, label, a, b in zip(data.inputs, data.labels, data.extras["marker_a"], data.extras["marker_b"]):
        img = image.reshape(side, side)
        assert img[tuple(a)] > 0 and img[tuple(b)] > 0  # both marked points are drawn
        assert connected(img, tuple(a), tuple(b)) == bool(label)


@pytest.mark.parametrize("difficulty", ["easy", "intermediate", "hard"])
def test_flood_fill_agrees_with_every_label_at_32(difficulty):
    task = build_task("pathfinder", resolution=32, difficulty=difficulty)
    data = task.make(200, seed=3)
    assert data.inputs.shape == (200, 1024) and data.inputs.dtype == np.int64
    assert set(np.unique(data.inputs)) <= set(range(256)) and data.mask.all()
    check_labels_by_flood_fill(task, data)
    # two target snakes plus the distractors, each its own component (none touch)
    counts = [components(x.reshape(32, 32)) for x in data.inputs[:40]]
    assert counts == [2 + int(k) for k in data.extras["num_distractors"][:40]]


@pytest.mark.parametrize("resolution, n", [(64, 30), (128, 6)])
def test_flood_fill_agrees_at_higher_resolutions(resolution, n):
    task = build_task("pathfinder", resolution=resolution, difficulty="hard")
    data = task.make(n, seed=1, split="test")
    assert data.inputs.shape == (n, resolution**2)
    check_labels_by_flood_fill(task, data)


def test_labels_are_balanced_and_distractors_placed():
    task = build_task("pathfinder", resolution=32, difficulty="easy")
    data = task.make(1001, seed=0)
    assert abs(int(data.labels.sum()) - 500) <= 1
    # the original generator's num_distractor_snakes = 20 // (6 // 3) = 10, mostly all placed
    assert task.num_distractors == 10
    assert data.extras["num_distractors"].max() == 10 and data.extras["num_distractors"].mean() > 8


def test_difficulty_sets_the_target_length():
    lengths = {
        d: build_task("pathfinder", difficulty=d).contour_length for d in ("easy", "intermediate", "hard")
    }
    assert lengths == {"easy": 6, "intermediate": 9, "hard": 14}
    easy, hard = (build_task("pathfinder", difficulty=d).make(100, 0) for d in ("easy", "hard"))
    # longer targets, fewer (longer) distractors: more lit pixels on the hard set
    assert (hard.inputs > 0).mean() > (easy.inputs > 0).mean()


def test_determinism_and_splits():
    task = build_task("pathfinder", resolution=32, difficulty="intermediate")
    a, b = task.make(50, 7), task.make(50, 7)
    assert np.array_equal(a.inputs, b.inputs) and np.array_equal(a.labels, b.labels)
    c = task.make(50, 7, split="test")
    assert not np.array_equal(a.inputs, c.inputs)
    assert not np.array_equal(a.inputs, task.make(50, 8).inputs)


def test_task_implies_a_binary_classifier():
    cfg = load_run_config({"data": {"task": {"name": "pathfinder", "resolution": 64}}, "model": {}})
    assert (cfg.model.head, cfg.model.num_classes, cfg.model.vocab_size, cfg.model.max_len) == (
        "classification",
        2,
        256,
        4096,
    )


@pytest.mark.parametrize(
    "params, match",
    [({"resolution": 48}, "resolution"), ({"difficulty": "medium"}, "difficulty"), ({"size": 3}, "size")],
)
def test_bad_parameters(params, match):
    with pytest.raises(ConfigError, match=match):
        build_task("pathfinder", **params)
