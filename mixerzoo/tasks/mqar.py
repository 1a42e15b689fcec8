"""Multi-query associative recall, Zoology style (Zoology, App. E.1, Algorithm 1).

Worked example (``vocab_size=16, seq_len=16, num_kv_pairs=2, random_non_queries=False``)::

    inputs  = [3 12  5  9 | 0  0  5  0  0  0  3  0  0  0  0  0]
    labels  = [.  .  .  . | .  .  9  .  .  .  12 .  .  .  .  .]     (. = -100)

Keys come from ``[1, V/2)`` and values from ``[V/2, V)``, distinct within an example;
the ``D`` pairs fill the first ``2D`` positions; each key is queried once more at an even
offset ``2D + 2*gap`` whose ``gap`` follows the power law ``p(g) ∝ a·g^(a-1)`` over
``g = 1..(L-2D)/2`` (sampled without replacement, as the reference generator does); the
label at a query is its value. With ``random_non_queries`` the remaining zeros become
uniform random tokens from ``[0, V)`` (reference semantics: they may coincide with keys).
"""

from __future__ import annotations

import numpy as np
from pydantic import Field

from mixerzoo.tasks import TASKS
from mixerzoo.tasks.base import IGNORE, Task, TaskData, require, sample_distinct


@TASKS.register("mqar")
class MQAR(Task):
    """Zoology MQAR: D key-value pairs up front, power-law-placed queries (Zoology Alg. 1)."""

    class Params(Task.Params):
        vocab_size: int = Field(8192, ge=4, description="vocabulary size V")
        seq_len: int = Field(64, ge=4, description="sequence length L")
        num_kv_pairs: int = Field(4, ge=1, description="key-value pairs D per example")
        power_a: float = Field(0.01, gt=0, description="power-law exponent alpha of query gaps")
        random_non_queries: bool = Field(
            True, description="fill non-query positions with random tokens instead of 0"
        )

    def check(self) -> None:
        p = self.p
        require(
            4 * p.num_kv_pairs <= p.seq_len,
            f"num_kv_pairs = {p.num_kv_pairs}: needs 4*num_kv_pairs <= seq_len = {p.seq_len}",
        )
        require(
            p.vocab_size // 2 - 1 >= p.num_kv_pairs,
            f"vocab_size = {p.vocab_size}: keys come from [1, V/2), which must hold "
            f"num_kv_pairs = {p.num_kv_pairs} distinct keys",
        )

    def answer_values(self) -> int:
        """Zoology App. E.1, Alg. 1 step 3: a query's label is a value, drawn from ``[V/2, V)``."""
        return self.p.vocab_size - self.p.vocab_size // 2

    def answers_per_example(self) -> int:
        """Alg. 1 step 5: each of the D keys is queried once (distinct gaps, distinct positions)."""
        return self.p.num_kv_pairs

    def generate(self, n: int, rng: np.random.Generator) -> TaskData:
        p = self.p
        V, L, D = p.vocab_size, p.seq_len, p.num_kv_pairs
        half = V // 2
        keys = sample_distinct(rng, n, D, 1, half)  # Alg. 1 steps 1-3
        values = sample_distinct(rng, n, D, half, V)
        ctx = 2 * D
        space = (L - ctx) // 2
        # Alg. 1 step 5: gap index g-1 drawn with p(g) ∝ a g^(a-1), without replacement.
        # Gumbel-top-k draws exactly an ordered weighted sample without replacement.
        g = np.arange(1, space + 1, dtype=np.float64)
        logp = np.log(p.power_a) + (p.power_a - 1.0) * np.log(g)
        scores = rng.gumbel(size=(n, space))
        scores += logp[None, :]
        gaps = np.argpartition(-scores, D - 1, axis=1)[:, :D]
        del scores

        inputs = np.zeros((n, L), dtype=np.int64)
        labels = np.full((n, L), IGNORE, dtype=np.int64)
        inputs[:, 0:ctx:2] = keys
        inputs[:, 1:ctx:2] = values
        qpos = ctx + 2 * gaps
        np.put_along_axis(inputs, qpos, keys, axis=1)
        np.put_along_axis(labels, qpos, values, axis=1)
        if p.random_non_queries:
            empty = inputs == 0
            empty[:, :ctx] = False
            inputs[empty] = rng.integers(0, V, size=int(empty.sum()), dtype=np.int64)
        return TaskData(inputs, labels)
