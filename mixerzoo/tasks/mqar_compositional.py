"""Compositional MQAR: two-token keys on a grid (zoology repository, ``data/compositional_mqar.py``).

Worked example (``vocab_size=30, seq_len=24, num_kv_pairs=4, power_a=1, random_non_queries=False``;
first-key tokens from ``[1, 10)``, second-key tokens from ``[10, 20)``, values from ``[20, 30)``)::

    inputs = [8 18 23  1 18 24  1 15 25  8 15 28 | 8 18  0  1 15  0  8 15  0  1 18  0]
    labels = [.  .  .  .  .  .  .  .  .  .  .  . | . 23  .  . 25  .  . 28  .  . 24  .]   (. = -100)

The ``D`` keys are the grid ``{A, B} x {X, Y}`` of ``sqrt(D)`` first tokens by ``sqrt(D)``
second tokens, shown as (K1, K2, value) triples in random order with distinct values, so
neither key token alone determines the value. Each key is queried once, K1 K2 at offset
``3D + 3*gap``; the label sits on K2 (the model answers after reading both). ``gap`` follows the
power law ``p(g) ∝ a·g^(a-1)`` over ``g = 1..(L-3D)/3`` without replacement, as in MQAR
(Zoology Alg. 1). With ``random_non_queries`` the zeros after the context become uniform
tokens from ``[0, V)`` (zoology's semantics: they may coincide with key tokens).

zoology asserts an even ``seq_len`` and ``vocab_size > seq_len``; neither is needed here.
"""

from __future__ import annotations

import math

import numpy as np
from pydantic import Field

from mixerzoo.tasks import TASKS
from mixerzoo.tasks.base import IGNORE, Task, TaskData, require, sample_distinct


def power_law_gaps(rng: np.random.Generator, n: int, space: int, k: int, a: float) -> np.ndarray:
    """``[n, k]`` distinct gap indices ``g-1`` in ``[0, space)``, drawn with ``p(g) ∝ a g^(a-1)``
    without replacement (Zoology Alg. 1 step 5; Gumbel-top-k is exactly an ordered weighted
    sample without replacement, as zoology's ``np.random.choice(replace=False, p=...)``)."""
    g = np.arange(1, space + 1, dtype=np.float64)
    logp = np.log(a) + (a - 1.0) * np.log(g)
    scores = rng.gumbel(size=(n, space)) + logp[None, :]
    return np.argpartition(-scores, k - 1, axis=1)[:, :k]


def fill_random_non_queries(
    rng: np.random.Generator, inputs: np.ndarray, context: int, vocab_size: int
) -> None:
    """Replace, in place, the zeros after the first ``context`` positions by uniform tokens."""
    empty = inputs == 0
    empty[:, :context] = False
    inputs[empty] = rng.integers(0, vocab_size, size=int(empty.sum()), dtype=np.int64)


@TASKS.register("mqar_compositional")
class CompositionalMQAR(Task):
    """zoology's compositional MQAR: (K1, K2) keys on a sqrt(D) x sqrt(D) grid, each queried once."""

    class Params(Task.Params):
        vocab_size: int = Field(8192, ge=6, description="vocabulary size V (thirds: K1, K2, values)")
        seq_len: int = Field(64, ge=6, description="sequence length L")
        num_kv_pairs: int = Field(4, ge=1, description="keys D per example, a perfect square (grid)")
        power_a: float = Field(0.01, gt=0, description="power-law exponent alpha of query gaps")
        random_non_queries: bool = Field(
            True, description="fill non-query positions with random tokens instead of 0"
        )

    @property
    def grid(self) -> int:
        return math.isqrt(self.p.num_kv_pairs)

    def check(self) -> None:
        p, g = self.p, self.grid
        require(
            g * g == p.num_kv_pairs,
            f"num_kv_pairs = {p.num_kv_pairs}: must be a perfect square (4, 9, 16, ...) for the key grid",
        )
        require(
            6 * p.num_kv_pairs <= p.seq_len,
            f"num_kv_pairs = {p.num_kv_pairs}: needs 6*num_kv_pairs <= seq_len = {p.seq_len}",
        )
        third = p.vocab_size // 3
        require(
            third - 1 >= g and p.vocab_size - 2 * third >= p.num_kv_pairs,
            f"vocab_size = {p.vocab_size}: its thirds must hold {g} first-key tokens (from 1), "
            f"{g} second-key tokens and {p.num_kv_pairs} distinct values",
        )

    def answer_values(self) -> int:
        """zoology ``compositional_mqar``: values come from the last third, ``[2 (V // 3), V)``."""
        return self.p.vocab_size - 2 * (self.p.vocab_size // 3)

    def answers_per_example(self) -> int:
        """Each of the D grid keys is queried once, labelled on its second token."""
        return self.p.num_kv_pairs

    def generate(self, n: int, rng: np.random.Generator) -> TaskData:
        p, g = self.p, self.grid
        V, L, D = p.vocab_size, p.seq_len, p.num_kv_pairs
        third = V // 3
        k1_set = sample_distinct(rng, n, g, 1, third)
        k2_set = sample_distinct(rng, n, g, third, 2 * third)
        k1 = np.repeat(k1_set, g, axis=1)  # grid rows: A A B B
        k2 = np.tile(k2_set, (1, g))  # grid columns: X Y X Y
        order = np.argsort(rng.random((n, D)), axis=1)  # pairs in random order in the context
        k1 = np.take_along_axis(k1, order, axis=1)
        k2 = np.take_along_axis(k2, order, axis=1)
        values = sample_distinct(rng, n, D, 2 * third, V)

        ctx = 3 * D
        gaps = power_law_gaps(rng, n, (L - ctx) // 3, D, p.power_a)
        inputs = np.zeros((n, L), dtype=np.int64)
        labels = np.full((n, L), IGNORE, dtype=np.int64)
        inputs[:, 0:ctx:3], inputs[:, 1:ctx:3], inputs[:, 2:ctx:3] = k1, k2, values
        qpos = ctx + 3 * gaps
        np.put_along_axis(inputs, qpos, k1, axis=1)
        np.put_along_axis(inputs, qpos + 1, k2, axis=1)
        np.put_along_axis(labels, qpos + 1, values, axis=1)
        if p.random_non_queries:
            fill_random_non_queries(rng, inputs, ctx, V)
        return TaskData(inputs, labels)
