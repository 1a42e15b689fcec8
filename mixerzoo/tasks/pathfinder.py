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
from typing import Any, ClassVar, Literal, NamedTuple

import numpy as np
from pydantic import Field

from mixerzoo.registry import ConfigError
from mixerzoo.tasks import TASKS
from mixerzoo.tasks.base import Task, TaskData
from mixerzoo.tasks.pathfinder_draw import dilate, disc_offsets, hits, paint, stroke_points

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


@dataclass
class _Growth:
    """Snakes growing together: their vertices and the canvases that keep them apart."""

    verts: np.ndarray  # [m, k, steps+1, 2], FAR where not grown yet
    curl: np.ndarray  # [k, m, side, side] near the snake's own older vertices
    near: np.ndarray  # [k, m, side, side] near the snake's vertices (for the others)
    own_disc: np.ndarray  # offsets kept clear around a snake's own older vertices
    near_disc: np.ndarray  # offsets kept clear around the other snakes' vertices
    side: int
    lo: int  # vertices stay in [lo, hi] in both coordinates
    hi: int

    def mark(self, canvas: np.ndarray, at: np.ndarray, vertex: np.ndarray, disc: np.ndarray) -> None:
        """Set the disc around ``vertex [a, 2]`` on ``canvas[at]``."""
        pts = np.clip(np.rint(vertex).astype(np.int64)[:, None] + disc[None], 0, self.side - 1)
        paint(canvas, at, pts)

    def free(
        self, cand: np.ndarray, act: np.ndarray, j: int, blocked: tuple[np.ndarray, np.ndarray] | None
    ) -> np.ndarray:
        """``[a, TURNS]`` whether snake ``j`` of rows ``act`` may take each candidate vertex."""
        good = ((cand >= self.lo) & (cand <= self.hi)).all(-1)
        pix = np.clip(np.rint(cand).astype(np.int64), 0, self.side - 1)
        at = (act[:, None], pix[..., 0], pix[..., 1])
        good &= ~self.curl[j][at]
        for i in range(len(self.near)):
            if i != j:
                good &= ~self.near[i][at]
        if blocked is not None:
            canvas, crow = blocked
            good &= ~canvas[crow[act][:, None], pix[..., 0], pix[..., 1]]
        return good


class _Attempts(NamedTuple):
    """Attempts at two target snakes that grew whole, several per image."""

    src: np.ndarray  # [m] the image each attempt is for
    step: np.ndarray  # [m] segment length
    verts: np.ndarray  # [m, 2, S+1, 2]
    which: np.ndarray  # [m] the snake marker a starts
    other: np.ndarray  # [m] the snake marker b ends


@TASKS.register("pathfinder")
class Pathfinder(Task):
    """Binary classification: are the two marked discs joined by one path? (LRA Pathfinder / Path-X)"""

    output: ClassVar[str] = "classification"
    num_classes: ClassVar[int] = 2
    #: labels balanced exactly in every generated set (``generate``), as the original draws 1/2 each
    balanced_classes: ClassVar[bool] = True

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
        grow = self._growth(starts, steps, step_len)
        heading = headings.astype(float).copy()
        ok = np.ones(m, dtype=bool)
        turns, weights = self._turns()
        for s in range(1, steps + 1):
            act = np.flatnonzero(ok)  # rows with a stuck snake are dropped (they are redrawn)
            r = np.arange(len(act))
            for j in range(k):
                if s >= 2:
                    grow.mark(grow.curl[j], act, grow.verts[act, j, s - 2], grow.own_disc)
                angle = heading[act, j, None] + turns[None, :]
                step = step_len[act, None, None] * np.stack([np.sin(angle), np.cos(angle)], -1)
                cand = grow.verts[act, j, s - 1][:, None, :] + step
                cdf = np.cumsum(grow.free(cand, act, j, blocked) * weights[None, :], axis=1)
                ok[act] &= cdf[:, -1] > 0
                pick = (
                    (cdf < rng.random(len(act))[:, None] * cdf[:, -1:]).sum(axis=1).clip(max=len(turns) - 1)
                )
                grow.verts[act, j, s] = cand[r, pick]
                heading[act, j] = angle[r, pick]
                if k > 1:
                    grow.mark(grow.near[j], act, grow.verts[act, j, s], grow.near_disc)
        grow.verts[~ok] = np.clip(grow.verts[~ok], grow.lo, grow.hi)  # stuck rows are redrawn
        return grow.verts, ok

    def _growth(self, starts: np.ndarray, steps: int, step_len: np.ndarray) -> _Growth:
        """The growth state of snakes at ``starts [m, k, 2]``: no vertex beyond the first yet."""
        m, k, _ = starts.shape
        g, side = self.geometry, int(self.p.resolution)
        verts = np.full((m, k, steps + 1, 2), FAR)
        verts[:, :, 0] = starts
        own_disc = disc_offsets(0.75 * float(step_len.min()) - 0.5) if len(step_len) else disc_offsets(0)
        grow = _Growth(
            verts=verts,
            curl=np.zeros((k, m, side, side), dtype=bool),
            near=np.zeros((k, m, side, side), dtype=bool),
            own_disc=own_disc,
            near_disc=disc_offsets(g.gap + g.thickness + 1),
            side=side,
            lo=self.padding,
            hi=side - 1 - self.padding,
        )
        if k > 1:
            for j in range(k):
                grow.mark(grow.near[j], np.arange(m), starts[:, j], grow.near_disc)
        return grow

    def _targets(self, rng: np.random.Generator, labels: np.ndarray) -> dict[str, np.ndarray]:
        """Two target snakes and the two markers for every row, redrawing rows until all fit."""
        n, side, S = len(labels), int(self.p.resolution), self.contour_length
        out = {
            "verts": np.zeros((n, 2, S + 1, 2)),
            "canvas": np.zeros((n, side, side), dtype=bool),
            "marker_a": np.zeros((n, 2), dtype=np.int64),
            "marker_b": np.zeros((n, 2), dtype=np.int64),
            "step": np.zeros(n),
        }
        todo = np.arange(n)
        for _ in range(TARGET_ROUNDS):
            if len(todo) == 0:
                return out
            tries = self._target_attempts(rng, labels, todo)
            if len(tries.src) == 0:
                continue
            todo = np.setdiff1d(todo, self._keep_first_fits(tries, out))
        raise ConfigError(
            f"pathfinder: could not place two target snakes in {len(todo)} images after {TARGET_ROUNDS} "
            "rounds (an internal limit; please report the parameters)"
        )

    def _target_attempts(self, rng: np.random.Generator, labels: np.ndarray, todo: np.ndarray) -> _Attempts:
        """Several attempts per image in ``todo`` at once at two target snakes; those that grew whole."""
        g, side, S = self.geometry, int(self.p.resolution), self.contour_length
        lo, hi = self.padding, side - 1 - self.padding
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
        return _Attempts(src[keep], step[keep], verts[keep], which[keep], other[keep])

    def _keep_first_fits(self, tries: _Attempts, out: dict[str, np.ndarray]) -> np.ndarray:
        """Write the first attempt per image whose snakes keep ``gap`` apart into ``out``; its images."""
        g, side = self.geometry, int(self.p.resolution)
        tip_a, tip_b, pix = self._target_pixels(tries)
        rows = np.arange(len(tries.src))
        canvas0 = np.zeros((len(rows), side, side), dtype=bool)
        paint(canvas0, rows, pix[0])
        fits = ~hits(dilate(canvas0, g.gap), rows, pix[1])
        # the first attempt that fits, per image
        cand = np.flatnonzero(fits)
        _, first_of = np.unique(tries.src[cand], return_index=True)
        sel = cand[first_of]
        good = tries.src[sel]
        canvas = np.zeros((len(sel), side, side), dtype=bool)
        r = np.arange(len(sel))
        paint(canvas, r, pix[0][sel])
        paint(canvas, r, pix[1][sel])
        out["verts"][good] = tries.verts[sel]
        out["canvas"][good] = canvas
        out["marker_a"][good] = tip_a[sel]
        out["marker_b"][good] = tip_b[sel]
        out["step"][good] = tries.step[sel]
        return good

    def _target_pixels(self, tries: _Attempts) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
        """The two marker centres ``[m, 2]`` and each target snake's pixels with the discs it carries."""
        g, S = self.geometry, self.contour_length
        disc = disc_offsets(g.marker_radius)
        rows = np.arange(len(tries.src))
        tip_a = np.rint(tries.verts[rows, tries.which, 0]).astype(np.int64)
        tip_b = np.rint(tries.verts[rows, tries.other, S]).astype(np.int64)
        pix = [stroke_points(tries.verts[:, j], g.thickness) for j in range(2)]
        for j in range(2):  # a disc belongs to the snake it sits on (else: a repeated pixel)
            first_pixel = pix[j][:, :1]
            disc_a = np.where((tries.which == j)[:, None, None], tip_a[:, None] + disc[None], first_pixel)
            disc_b = np.where((tries.other == j)[:, None, None], tip_b[:, None] + disc[None], first_pixel)
            pix[j] = np.concatenate([pix[j], disc_a, disc_b], axis=1)
        return tip_a, tip_b, pix

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
