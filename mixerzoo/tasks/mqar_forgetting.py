"""Forgetting MQAR: some keys are re-assigned later; the last value wins (zoology repository,
``data/forgetting_mqar.py``).

Worked example (``vocab_size=20, seq_len=24, num_kv_pairs=3, num_updates=2, power_a=1,
random_non_queries=False``: keys 8, 2, 1 first valued 13, 12, 14; then 8 -> 14 and 1 -> 13)::

    inputs = [8 13  2 12  1 14 | 8 14  1 13 | 1  0  0  0  0  0  8  0  0  0  0  0  2  0]
    labels = [.  .  .  .  .  . | .  .  .  . | 13 .  .  .  .  . 14  .  .  .  .  . 12  .]   (. = -100)

Keys come from ``[1, V/2)`` and values from ``[V/2, V)``. The ``D`` distinct keys are shown
with distinct values, then ``U = num_updates`` of them (a random subset, in random order)
are shown again with a new value, drawn uniformly from the value range minus the key's own
first value. Every key is then queried once, at offset ``2(D+U) + 2*gap`` with the power-law
gaps of MQAR (Zoology Alg. 1), and its label is the *last* value shown for it.

Differences from the zoology generator, which has two slips: its "new value differs from
the original" test compares against the wrong key's value (``original_values[i, j]`` with
``j`` the update's index, not the updated key's), and it needs ``vocab_size > seq_len``
and an even ``seq_len``, which nothing depends on. Here the new value differs from the
updated key's own first value.
"""

from __future__ import annotations

import numpy as np
from pydantic import Field

from mixerzoo.tasks import TASKS
from mixerzoo.tasks.base import IGNORE, Task, TaskData, require, sample_distinct
from mixerzoo.tasks.mqar_compositional import fill_random_non_queries, power_law_gaps


@TASKS.register("mqar_forgetting")
class ForgettingMQAR(Task):
    """zoology's forgetting MQAR: U of the D keys are re-assigned; queries expect the last value."""

    class Params(Task.Params):
        vocab_size: int = Field(8192, ge=6, description="vocabulary size V (keys [1, V/2), values [V/2, V))")
        seq_len: int = Field(64, ge=4, description="sequence length L")
        num_kv_pairs: int = Field(8, ge=1, description="distinct keys D per example")
        num_updates: int = Field(4, ge=0, description="keys U re-assigned a new value after the D pairs")
        power_a: float = Field(0.01, gt=0, description="power-law exponent alpha of query gaps")
        random_non_queries: bool = Field(
            True, description="fill non-query positions with random tokens instead of 0"
        )

    @property
    def context_size(self) -> int:
        return 2 * (self.p.num_kv_pairs + self.p.num_updates)

    def check(self) -> None:
        p = self.p
        require(
            p.num_updates <= p.num_kv_pairs,
            f"num_updates = {p.num_updates}: must be <= num_kv_pairs = {p.num_kv_pairs}",
        )
        need = self.context_size + 2 * p.num_kv_pairs
        require(
            need <= p.seq_len,
            f"seq_len = {p.seq_len}: needs 2*(num_kv_pairs + num_updates) + 2*num_kv_pairs = {need}",
        )
        half = p.vocab_size // 2
        require(
            half - 1 >= p.num_kv_pairs and p.vocab_size - half >= max(p.num_kv_pairs, 2),
            f"vocab_size = {p.vocab_size}: keys come from [1, V/2) and values from [V/2, V), which "
            f"must hold num_kv_pairs = {p.num_kv_pairs} distinct keys and values",
        )

    def answer_values(self) -> int:
        """zoology ``forgetting_mqar``: a key's last value, first or re-assigned, lies in ``[V/2, V)``."""
        return self.p.vocab_size - self.p.vocab_size // 2

    def answers_per_example(self) -> int:
        """Each of the D keys is queried once (Zoology Alg. 1 gaps)."""
        return self.p.num_kv_pairs

    def generate(self, n: int, rng: np.random.Generator) -> TaskData:
        p = self.p
        V, L, D, U = p.vocab_size, p.seq_len, p.num_kv_pairs, p.num_updates
        half = V // 2
        keys = sample_distinct(rng, n, D, 1, half)
        first = sample_distinct(rng, n, D, half, V)
        updated = sample_distinct(rng, n, U, 0, D) if U else np.zeros((n, 0), dtype=np.int64)
        old = np.take_along_axis(first, updated, axis=1)
        # uniform over the V - half - 1 values other than the key's first one
        new = rng.integers(half, V - 1, size=(n, U), dtype=np.int64)
        new += new >= old
        final = first.copy()
        np.put_along_axis(final, updated, new, axis=1)

        ctx = self.context_size
        inputs = np.zeros((n, L), dtype=np.int64)
        labels = np.full((n, L), IGNORE, dtype=np.int64)
        inputs[:, 0 : 2 * D : 2], inputs[:, 1 : 2 * D : 2] = keys, first
        inputs[:, 2 * D : ctx : 2] = np.take_along_axis(keys, updated, axis=1)
        inputs[:, 2 * D + 1 : ctx : 2] = new
        gaps = power_law_gaps(rng, n, (L - ctx) // 2, D, p.power_a)
        qpos = ctx + 2 * gaps
        np.put_along_axis(inputs, qpos, keys, axis=1)
        np.put_along_axis(labels, qpos, final, axis=1)
        if p.random_non_queries:
            fill_random_non_queries(rng, inputs, ctx, V)
        return TaskData(inputs, labels)
