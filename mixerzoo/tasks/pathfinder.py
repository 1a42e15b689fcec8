"""Pathfinder (Linsley et al. 2018; LRA, Tay et al. 2021; LaS Table 2): are two dots joined?

An image holds two marked discs, two long curved "snakes" and short distractor snakes. The
label is 1 when the two marked discs sit on the two ends of the same snake, 0 when they sit on
different snakes. The image is read pixel by pixel (row-major), each pixel an intensity token
0..255, and classified as a whole: 1,024 tokens at 32x32, 4,096 at 64x64 and 16,384 at 128x128
(Path-X is the 128x128 hard set: ``resolution=128, difficulty=hard``).

Generation follows the semantics of the original generator (drewlinsley/pathfinder
``snakes2``, with LRA's per-resolution settings; not its code, which is unseeded and needs
OpenCV): the two target snakes start ``seed_distance`` apart and grow together, one segment of
``paddle_length + margin`` pixels at a time; each new segment turns by an angle drawn with
density ``cos(continuity * delta)**2`` on ``|delta| < pi / (2 * continuity)`` (the original's
continuity weighting) and must keep clear of what is already drawn. Then
``distractor_budget // distractor_length`` distractor snakes of ``distractor_length =
contour_length // 3`` segments are placed where they fit (the original's ``num_distractor_snakes``;
one that does not fit after a number of tries is left out, as the original's
``allow_incomplete``). Positive: the discs mark the start and the end of one target snake;
negative: the start of one and the end of the other.

Difficulty = target length in segments (``contour_length``): easy 6 (LRA's ``curv_baseline``),
intermediate 9 (``curv_contour_length_9``), hard 14 (``curv_contour_length_14``).

Deviation, so that the label is decided by the pixels: snakes are drawn as solid 8-connected
strokes (the original draws dashes, each ``paddle_length`` long, ``margin`` pixels apart), and
different snakes, discs included, are always separated by at least ``gap`` blank pixels (no two
are 8-neighbours). A flood fill over the non-zero pixels from one marked disc therefore reaches
the other exactly when the label is 1 (checked on every example in the tests). Everything is
vectorized over the batch with numpy (per growth step, not per pixel); the generator is seeded.

Worked example (``resolution=32``): ``inputs`` int64 ``[n, 1024]`` tokens in ``{0, 255}``
(row-major pixels), ``labels`` ``[n]`` in ``{0, 1}``, ``mask`` all true; ``extras``:
``marker_a``/``marker_b`` ``[n, 2]`` (row, column) of the two disc centres, ``num_distractors``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import Field

from mixerzoo.registry import ConfigError
from mixerzoo.tasks import TASKS
from mixerzoo.tasks.base import Task, TaskData

#: LRA's target lengths (segments) per difficulty (TFDS builder splits easy / intermediate / hard)
CONTOUR_LENGTH = {"easy": 6, "intermediate": 9, "hard": 14}


@dataclass(frozen=True)
class Geometry:
    """Per-resolution settings, after LRA's TFDS builder notes on the generator's arguments."""

    paddle_length: int
    margins: tuple[int, ...]  # the original's paddle_margin_list (one drawn per image)
    thickness: int  # stroke width in pixels (the original's paddle_thickness, rounded up)
    marker_radius: float
    seed_distance: int
    continuity: float
    distractor_budget: int  # num_distractor_snakes = distractor_budget // distractor_length
    gap: int  # blank pixels kept between different snakes (Chebyshev distance > gap)


#: LRA's TFDS builder (pathfinder.py) lists these generator arguments per resolution; the 64x64
#: paddle_length is not among them (ours), thickness is rounded up to whole pixels
GEOMETRY = {
    32: Geometry(2, (1,), 1, 1.5, 7, 1.0, 20, 1),
    64: Geometry(3, (1,), 1, 2.5, 12, 1.8, 22, 1),
    128: Geometry(5, (2, 3), 2, 3.0, 20, 1.8, 35, 2),
}

FAR = 1e4  # coordinate of a vertex that does not exist (never close to anything)
TURNS = 25  # turn angles weighed per segment (a snake with none free is stuck and redrawn)
DISTRACTOR_TRIES = 12
TARGET_ROUNDS = 200
CHUNK = 2048  # images generated at once (bounds memory at 128x128)
CANDIDATE_PIXELS = 1 << 22  # pixels of target attempts drawn at once (attempts per image x images)


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


@TASKS.register("pathfinder")
class Pathfinder(Task):
    """Binary classification: are the two marked discs joined by one path? (LRA Pathfinder / Path-X)"""

    output: ClassVar[str] = "classification"
    num_classes: ClassVar[int] = 2

    class Params(Task.Params):
        resolution: Literal[32, 64, 128] = Field(
            32, description="image side: 32, 64 or 128 (LRA Pathfinder-32/64/128; 128 hard = Path-X)"
        )
        difficulty: Literal["easy", "intermediate", "hard"] = Field(
            "hard",
            description="target length 6 / 9 / 14 segments (LRA curv_baseline / contour_length_9 / _14); "
            "LRA reports the hard set",
        )

    @property
    def vocab_size(self) -> int:
        return 256

    @property
    def seq_len(self) -> int:
        return int(self.p.resolution) ** 2

    @property
    def geometry(self) -> Geometry:
        return GEOMETRY[int(self.p.resolution)]

    @property
    def contour_length(self) -> int:
        return CONTOUR_LENGTH[self.p.difficulty]

    @property
    def distractor_length(self) -> int:
        return max(self.contour_length // 3, 1)

    @property
    def num_distractors(self) -> int:
        return self.geometry.distractor_budget // self.distractor_length

    @property
    def padding(self) -> int:
        """Vertices stay this far from the border so that strokes and discs fit in the image."""
        return max(int(np.floor(self.geometry.marker_radius)), self.geometry.thickness)

    def model_defaults(self) -> dict[str, Any]:
        return {
            "vocab_size": self.vocab_size,
            "max_len": self.seq_len,
            "head": "classification",
            "num_classes": self.num_classes,
        }

    # -- growth ------------------------------------------------------------------------
    def _turns(self) -> tuple[np.ndarray, np.ndarray]:
        """Candidate turn angles and their weights cos(continuity·δ)² on |δ| < π/(2·continuity).

        snakes2 (get_coords_cmf) weighs every free direction on a circle around the snake's tip
        this way and samples one; directions that are blocked get weight 0.
        """
        c = self.geometry.continuity
        grid = np.linspace(-np.pi / (2 * c), np.pi / (2 * c), TURNS + 2)[1:-1]
        return grid, np.cos(c * grid) ** 2

    def _grow(
        self,
        rng: np.random.Generator,
        starts: np.ndarray,
        headings: np.ndarray,
        steps: int,
        step_len: np.ndarray,
        blocked: tuple[np.ndarray, np.ndarray] | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Grow ``k`` snakes per row together, one segment each per step.

        starts ``[m, k, 2]``, headings ``[m, k]``, step_len ``[m]``; ``blocked`` = (canvas, rows):
        pixels a new vertex may not land on. A new vertex must lie inside the padded image, at
        least 0.75 step from the snake's own earlier vertices (no tight curls), more than ``gap +
        thickness + 1`` from every other snake's, and off ``blocked``; one of ``TURNS`` turn
        angles is drawn with the continuity weights among those that qualify. Distances are
        checked on pixel canvases of discs around the vertices (gathers, not pairwise
        distances); strokes are checked pixel by pixel afterwards. Returns vertices
        ``[m, k, steps+1, 2]`` and ``ok [m]`` (False: a snake of the row got stuck).
        """
        m, k, _ = starts.shape
        g, side = self.geometry, int(self.p.resolution)
        lo, hi = self.padding, side - 1 - self.padding
        verts = np.full((m, k, steps + 1, 2), FAR)
        verts[:, :, 0] = starts
        heading = headings.astype(float).copy()
        ok = np.ones(m, dtype=bool)
        rows = np.arange(m)
        turns, weights = self._turns()
        own_disc = disc_offsets(0.75 * float(step_len.min()) - 0.5) if len(step_len) else disc_offsets(0)
        near_disc = disc_offsets(g.gap + g.thickness + 1)
        curl = np.zeros((k, m, side, side), dtype=bool)  # near the snake's own older vertices
        near = np.zeros((k, m, side, side), dtype=bool)  # near the snake's vertices (for the others)

        def mark(canvas: np.ndarray, at: np.ndarray, vertex: np.ndarray, disc: np.ndarray) -> None:
            pts = np.clip(np.rint(vertex).astype(np.int64)[:, None] + disc[None], 0, side - 1)
            paint(canvas, at, pts)

        if k > 1:
            for j in range(k):
                mark(near[j], rows, starts[:, j], near_disc)
        for s in range(1, steps + 1):
            act = np.flatnonzero(ok)  # rows with a stuck snake are dropped (they are redrawn)
            r = np.arange(len(act))
            for j in range(k):
                if s >= 2:
                    mark(curl[j], act, verts[act, j, s - 2], own_disc)
                angle = heading[act, j, None] + turns[None, :]
                step = step_len[act, None, None] * np.stack([np.sin(angle), np.cos(angle)], -1)
                cand = verts[act, j, s - 1][:, None, :] + step
                good = ((cand >= lo) & (cand <= hi)).all(-1)
                pix = np.clip(np.rint(cand).astype(np.int64), 0, side - 1)
                at = (act[:, None], pix[..., 0], pix[..., 1])
                good &= ~curl[j][at]
                for i in range(k):
                    if i != j:
                        good &= ~near[i][at]
                if blocked is not None:
                    canvas, crow = blocked
                    good &= ~canvas[crow[act][:, None], pix[..., 0], pix[..., 1]]
                cdf = np.cumsum(good * weights[None, :], axis=1)
                ok[act] &= cdf[:, -1] > 0
                pick = (
                    (cdf < rng.random(len(act))[:, None] * cdf[:, -1:]).sum(axis=1).clip(max=len(turns) - 1)
                )
                verts[act, j, s] = cand[r, pick]
                heading[act, j] = angle[r, pick]
                if k > 1:
                    mark(near[j], act, verts[act, j, s], near_disc)
        verts[~ok] = np.clip(verts[~ok], lo, hi)  # stuck rows are redrawn; keep indices valid
        return verts, ok

    def _targets(self, rng: np.random.Generator, labels: np.ndarray) -> dict[str, np.ndarray]:
        """Two target snakes and the two markers for every row, redrawing rows until all fit."""
        g = self.geometry
        n, side, S = len(labels), int(self.p.resolution), self.contour_length
        disc = disc_offsets(g.marker_radius)
        out = {
            "verts": np.zeros((n, 2, S + 1, 2)),
            "canvas": np.zeros((n, side, side), dtype=bool),
            "marker_a": np.zeros((n, 2), dtype=np.int64),
            "marker_b": np.zeros((n, 2), dtype=np.int64),
            "step": np.zeros(n),
        }
        lo, hi = self.padding, side - 1 - self.padding
        todo = np.arange(n)
        for _ in range(TARGET_ROUNDS):
            if len(todo) == 0:
                return out
            # several attempts per image at once; the first that fits is kept
            reps = int(np.clip(CANDIDATE_PIXELS // (len(todo) * side * side), 1, 16))
            src = np.tile(todo, reps)
            m = len(src)
            step = g.paddle_length + rng.choice(np.asarray(g.margins), size=m).astype(float)
            # snakes2 initialize_two_seeds: the first seed keeps 2*seed_distance from the border
            # (where the image allows), the second lies seed_distance away in a uniform direction
            edge = min(2 * g.seed_distance, side // 2 - 1)
            first = rng.uniform(edge, side - 1 - edge, size=(m, 2))
            phi = rng.uniform(-np.pi, np.pi, size=m)
            second = first + g.seed_distance * np.stack([np.sin(phi), np.cos(phi)], -1)
            starts = np.stack([first, second], axis=1)
            verts, ok = self._grow(rng, starts, rng.uniform(-np.pi, np.pi, size=(m, 2)), S, step)
            ok &= ((second >= lo) & (second <= hi)).all(-1)
            # markers: the start of snake i, and the end of snake i (label 1) or of the other (0)
            which = rng.integers(0, 2, size=m)
            other = np.where(labels[src] == 1, which, 1 - which)
            keep = np.flatnonzero(ok)
            if len(keep) == 0:
                continue
            verts, which, other, step, src = verts[keep], which[keep], other[keep], step[keep], src[keep]
            rows = np.arange(len(keep))
            tip_a = np.rint(verts[rows, which, 0]).astype(np.int64)
            tip_b = np.rint(verts[rows, other, S]).astype(np.int64)
            pix = [stroke_points(verts[:, j], g.thickness) for j in range(2)]
            for j in range(2):  # a disc belongs to the snake it sits on (else: a repeated pixel)
                first_pixel = pix[j][:, :1]
                disc_a = np.where((which == j)[:, None, None], tip_a[:, None] + disc[None], first_pixel)
                disc_b = np.where((other == j)[:, None, None], tip_b[:, None] + disc[None], first_pixel)
                pix[j] = np.concatenate([pix[j], disc_a, disc_b], axis=1)
            canvas0 = np.zeros((len(keep), side, side), dtype=bool)
            paint(canvas0, rows, pix[0])
            fits = ~hits(dilate(canvas0, g.gap), rows, pix[1])
            # the first attempt that fits, per image
            cand = np.flatnonzero(fits)
            _, first_of = np.unique(src[cand], return_index=True)
            sel = cand[first_of]
            good = src[sel]
            canvas = np.zeros((len(sel), side, side), dtype=bool)
            r = np.arange(len(sel))
            paint(canvas, r, pix[0][sel])
            paint(canvas, r, pix[1][sel])
            out["verts"][good] = verts[sel]
            out["canvas"][good] = canvas
            out["marker_a"][good] = tip_a[sel]
            out["marker_b"][good] = tip_b[sel]
            out["step"][good] = step[sel]
            todo = np.setdiff1d(todo, good)
        raise ConfigError(
            f"pathfinder: could not place two target snakes in {len(todo)} images after {TARGET_ROUNDS} "
            "rounds (an internal limit; please report the parameters)"
        )

    def _distractors(self, rng: np.random.Generator, canvas: np.ndarray, step: np.ndarray) -> np.ndarray:
        """Add distractor snakes where they fit (in place); returns how many each image got."""
        g = self.geometry
        n, side = canvas.shape[0], canvas.shape[1]
        lo, hi = self.padding, side - 1 - self.padding
        placed = np.zeros(n, dtype=np.int64)
        for _ in range(self.num_distractors):
            forbidden = dilate(canvas, g.gap)
            todo = np.arange(n)
            for _ in range(DISTRACTOR_TRIES):
                if len(todo) == 0:
                    break
                starts = rng.uniform(lo, hi, size=(len(todo), 1, 2))
                pix0 = np.rint(starts[:, 0]).astype(np.int64)
                free = ~forbidden[todo, pix0[:, 0], pix0[:, 1]]  # a start on a drawn area: next try
                rows, starts = todo[free], starts[free]
                if len(rows) == 0:
                    continue
                verts, ok = self._grow(
                    rng,
                    starts,
                    rng.uniform(-np.pi, np.pi, size=(len(rows), 1)),
                    self.distractor_length,
                    step[rows],
                    (forbidden, rows),
                )
                rows, verts = rows[ok], verts[ok]
                pts = stroke_points(verts[:, 0], g.thickness)
                fits = ~hits(forbidden, rows, pts)
                paint(canvas, rows[fits], pts[fits])
                placed[rows[fits]] += 1
                todo = np.setdiff1d(todo, rows[fits])
        return placed

    def _generate_chunk(self, n: int, rng: np.random.Generator, labels: np.ndarray) -> dict[str, np.ndarray]:
        t = self._targets(rng, labels)
        placed = self._distractors(rng, t["canvas"], t["step"])
        return {
            "inputs": t["canvas"].reshape(n, -1).astype(np.int64) * 255,
            "marker_a": t["marker_a"],
            "marker_b": t["marker_b"],
            "num_distractors": placed,
        }

    def generate(self, n: int, rng: np.random.Generator) -> TaskData:
        # labels balanced exactly (the original draws each with probability 1/2)
        labels = rng.permutation(np.arange(n) % 2).astype(np.int64)
        parts = [
            self._generate_chunk(len(labels[i : i + CHUNK]), rng, labels[i : i + CHUNK])
            for i in range(0, n, CHUNK)
        ]
        arrays = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
        inputs = arrays.pop("inputs")
        return TaskData(inputs, labels, extras=arrays, mask=np.ones(inputs.shape, dtype=bool))
