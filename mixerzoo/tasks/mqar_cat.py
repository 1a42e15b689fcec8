"""Multi-query associative recall as set up in the CAT paper (CAT-ws, App. C.1 and C.3).

Worked example (``vocab_size=16, seq_len=8``; default ``num_kv_pairs = L/4 = 2``)::

    inputs = [ 7  2 11  5 | 11  5  7  2]
    labels = [ .  .  .  . |  5  .  2  .]      (. = -100)

k keys are drawn without replacement from ``[1, V)``; each value is drawn uniformly from the
rest of the vocabulary (``[1, V)`` minus this example's keys; values may repeat). The k pairs
appear in random order, then every key is queried once, in a fresh random order, each
query followed by its value (so the query block reads like the context block). The label
at a query is its value. Positions past ``4k`` (when ``4k < L``) hold the pad token 0.

Interpretation (the paper gives no code): with k = L/4, as App. C.1 sets, pairs plus
query/answer pairs fill exactly L positions, which is what this layout produces.
"""

from __future__ import annotations

import numpy as np
from pydantic import Field

from mixerzoo.tasks import TASKS
from mixerzoo.tasks.base import IGNORE, Task, TaskData, require, sample_distinct


def sample_excluding(rng: np.random.Generator, excluded: np.ndarray, size: int, high: int) -> np.ndarray:
    """``[n, size]`` uniform draws from ``[0, high)`` minus each row's ``excluded`` set (distinct ids).

    Maps a uniform rank ``r`` in the complement to its value: ``r + #{i: s_i - i <= r}`` for the
    sorted excluded ids ``s`` (one global ``searchsorted`` over row-offset keys).
    """
    n, k = excluded.shape
    s = np.sort(excluded, axis=1)
    shifted = s - np.arange(k)[None, :] + (np.arange(n)[:, None] * high)
    r = rng.integers(0, high - k, size=(n, size))
    q = r + np.arange(n)[:, None] * high
    count = np.searchsorted(shifted.ravel(), q.ravel(), side="right").reshape(n, size)
    count -= np.arange(n)[:, None] * k
    return r + count


@TASKS.register("mqar_cat")
class MQARCat(Task):
    """CAT-paper MQAR: shuffled k key-value pairs, then k queries covering every key (CAT-ws App. C.1)."""

    class Params(Task.Params):
        vocab_size: int = Field(8192, ge=4, description="vocabulary size V (token 0 = pad)")
        seq_len: int = Field(64, ge=4, description="sequence length L")
        num_kv_pairs: int | None = Field(
            None, ge=1, description="keys k per example (default L/4, as App. C.1)"
        )

    @property
    def k(self) -> int:
        return self.p.num_kv_pairs if self.p.num_kv_pairs is not None else self.p.seq_len // 4

    def check(self) -> None:
        p = self.p
        require(self.k >= 1, f"seq_len = {p.seq_len}: must be >= 4 so that k = L/4 >= 1")
        require(
            4 * self.k <= p.seq_len,
            f"num_kv_pairs = {self.k}: needs 4*num_kv_pairs <= seq_len = {p.seq_len}",
        )
        require(
            p.vocab_size - 1 > self.k,
            f"vocab_size = {p.vocab_size}: needs more than num_kv_pairs + 1 = {self.k + 1} tokens",
        )

    def answer_values(self) -> int:
        """CAT-ws App. C.1: a value is uniform over ``[1, V)`` less the example's keys, so every one of the
        ``V - 1`` non-pad ids is some example's value."""
        return self.p.vocab_size - 1

    def answers_per_example(self) -> int:
        """Every one of the k keys is queried once (App. C.1)."""
        return self.k

    def generate(self, n: int, rng: np.random.Generator) -> TaskData:
        V, L, k = self.p.vocab_size, self.p.seq_len, self.k
        keys = sample_distinct(rng, n, k, 1, V)
        excluded = np.concatenate([np.zeros((n, 1), dtype=np.int64), keys], axis=1)
        values = sample_excluding(rng, excluded, k, V)
        order = np.argsort(rng.random((n, k)), axis=1)
        qkeys = np.take_along_axis(keys, order, axis=1)
        qvals = np.take_along_axis(values, order, axis=1)

        inputs = np.zeros((n, L), dtype=np.int64)
        labels = np.full((n, L), IGNORE, dtype=np.int64)
        inputs[:, 0 : 2 * k : 2] = keys
        inputs[:, 1 : 2 * k : 2] = values
        inputs[:, 2 * k : 4 * k : 2] = qkeys
        inputs[:, 2 * k + 1 : 4 * k : 2] = qvals
        labels[:, 2 * k : 4 * k : 2] = qvals
        return TaskData(inputs, labels)
