"""Pixel primitives of the Pathfinder generator: discs, 8-connected strokes, painting, hit tests
and dilation, each over a batch of ``[m, h, w]`` boolean canvases."""

from __future__ import annotations

import numpy as np


def disc_offsets(radius: float) -> np.ndarray:
    """``[q, 2]`` integer offsets with ``dy^2 + dx^2 <= radius^2`` (the original's draw_circle)."""
    r = int(np.floor(radius))
    dy, dx = np.mgrid[-r : r + 1, -r : r + 1]
    keep = dy**2 + dx**2 <= radius**2
    return np.stack([dy[keep], dx[keep]], axis=1)


def stroke_points(vertices: np.ndarray, thickness: int) -> np.ndarray:
    """Pixels of the polyline ``[m, s+1, 2]`` as ``[m, p, 2]`` ints, 8-connected along the line.

    Points are sampled every <= 0.5 pixel, so consecutive rounded points differ by at most one
    pixel in each coordinate; a thickness t > 1 adds the offsets ``0..t-1`` in both directions.
    """
    m, s1, _ = vertices.shape
    if m == 0:
        return np.zeros((0, 1, 2), dtype=np.int64)
    seg = vertices[:, 1:] - vertices[:, :-1]
    longest = float(np.abs(seg).max()) if seg.size else 0.0
    k = max(int(np.ceil(2 * longest)), 1)
    t = np.arange(k) / k
    pts = vertices[:, :-1, None, :] + t[None, None, :, None] * seg[:, :, None, :]
    pts = np.concatenate([pts.reshape(m, -1, 2), vertices[:, -1:]], axis=1)
    pix = np.rint(pts).astype(np.int64)
    if thickness > 1:
        off = np.stack(np.meshgrid(np.arange(thickness), np.arange(thickness), indexing="ij"), -1).reshape(
            -1, 2
        )
        pix = (pix[:, :, None, :] + off[None, None]).reshape(m, -1, 2)
    return pix


def paint(canvas: np.ndarray, rows: np.ndarray, points: np.ndarray, value: int | bool = True) -> None:
    """Set ``canvas[rows[i], y, x]`` for every point ``(y, x)`` of ``points[i]``."""
    b = np.broadcast_to(rows[:, None], points.shape[:2])
    canvas[b, points[..., 0], points[..., 1]] = value


def hits(canvas: np.ndarray, rows: np.ndarray, points: np.ndarray) -> np.ndarray:
    """``[m]`` whether any point of ``points[i]`` is set in ``canvas[rows[i]]``."""
    b = np.broadcast_to(rows[:, None], points.shape[:2])
    return canvas[b, points[..., 0], points[..., 1]].any(axis=1)


def dilate(canvas: np.ndarray, radius: int) -> np.ndarray:
    """Binary dilation of ``[m, h, w]`` by a ``(2r+1)^2`` square (Chebyshev distance <= r)."""
    out = canvas.copy()
    for _ in range(radius):
        grown = out.copy()
        grown[:, 1:] |= out[:, :-1]
        grown[:, :-1] |= out[:, 1:]
        grown2 = grown.copy()
        grown2[:, :, 1:] |= grown[:, :, :-1]
        grown2[:, :, :-1] |= grown[:, :, 1:]
        out = grown2
    return out
