"""Multi-query N-gram associative recall (CAT Def. 5; CAT-ws App. C.1/C.3).

Worked example (``vocab_size=32, seq_len=12, n=2, key_vocab_size=3, num_kv_pairs=2``)::

    inputs = [1 3 20 | 3 3 9 | 3 3 9 | 1 3 20]
    labels = [.     . | .    . | .  9 . | .  20 .]   (. = -100)

Keys are N-grams, distinct within an example, whose tokens come from a small key alphabet
``[1, key_vocab_size]`` so that single tokens repeat across keys and only the whole N-gram
identifies a key (as in Table 1, "(a b) 2 (b a) q (a a) 4"). Values are drawn uniformly from
``[key_vocab_size + 1, V)``. The k (N-gram, value) pairs come first, then every N-gram is
queried once in random order, each query followed by its value; the label sits on the last
token of each query N-gram. Unused trailing positions hold the pad token 0.

Default k: ``floor(30 L / (64 (N+1)))``, i.e. k = 10/20/40 for N=2 at L = 64/128/256 (App. C.1).
The paper does not state the key alphabet; ``key_vocab_size`` is this project's choice.
"""

from __future__ import annotations

import numpy as np
from pydantic import Field

from mixerzoo.tasks import TASKS
from mixerzoo.tasks.base import IGNORE, Task, TaskData, require, sample_distinct


@TASKS.register("mqnar")
class MQNAR(Task):
    """CAT-paper multi-query N-gram AR: N-gram keys, each queried once (CAT Def. 5)."""

    class Params(Task.Params):
        vocab_size: int = Field(8192, ge=4, description="vocabulary size V (token 0 = pad)")
        seq_len: int = Field(64, ge=4, description="sequence length L")
        n: int = Field(2, ge=1, description="N-gram length of keys and queries")
        num_kv_pairs: int | None = Field(
            None, ge=1, description="keys k per example (default 30L/(64(N+1)): 10/20/40 for N=2)"
        )
        key_vocab_size: int = Field(16, ge=1, description="alphabet size of key N-gram tokens")

    @property
    def k(self) -> int:
        p = self.p
        if p.num_kv_pairs is not None:
            return p.num_kv_pairs
        return (30 * p.seq_len) // (64 * (p.n + 1))

    def check(self) -> None:
        p, k = self.p, self.k
        require(k >= 1, f"seq_len = {p.seq_len}: too short for one {p.n}-gram key, value, query, value")
        require(
            2 * k * (p.n + 1) <= p.seq_len,
            f"num_kv_pairs = {k}: needs 2*num_kv_pairs*(n+1) = {2 * k * (p.n + 1)} <= seq_len = {p.seq_len}",
        )
        require(
            p.key_vocab_size**p.n >= k,
            f"key_vocab_size = {p.key_vocab_size}: key_vocab_size**n must be >= num_kv_pairs = {k}",
        )
        require(
            p.vocab_size > p.key_vocab_size + 1,
            f"vocab_size = {p.vocab_size}: must exceed key_vocab_size + 1 = {p.key_vocab_size + 1}",
        )

    def answer_values(self) -> int:
        """CAT Def. 5 (CAT-ws App. C.1): values uniform over ``[key_vocab_size + 1, V)``."""
        return self.p.vocab_size - self.p.key_vocab_size - 1

    def answers_per_example(self) -> int:
        """Every one of the k N-gram keys is queried once, labelled on its last token."""
        return self.k

    def generate(self, n: int, rng: np.random.Generator) -> TaskData:
        p, k = self.p, self.k
        N, A, L = p.n, p.key_vocab_size, p.seq_len
        codes = sample_distinct(rng, n, k, 0, A**N)  # distinct N-grams as base-A numbers
        digits = (codes[..., None] // (A ** np.arange(N - 1, -1, -1))) % A
        grams = digits + 1  # [n, k, N] tokens in [1, A]
        values = rng.integers(A + 1, p.vocab_size, size=(n, k), dtype=np.int64)
        order = np.argsort(rng.random((n, k)), axis=1)
        qgrams = np.take_along_axis(grams, order[..., None], axis=1)
        qvals = np.take_along_axis(values, order, axis=1)

        block = N + 1
        ctx = np.concatenate([grams, values[..., None]], axis=2).reshape(n, k * block)
        qry = np.concatenate([qgrams, qvals[..., None]], axis=2).reshape(n, k * block)
        inputs = np.zeros((n, L), dtype=np.int64)
        inputs[:, : 2 * k * block] = np.concatenate([ctx, qry], axis=1)
        labels = np.full((n, L), IGNORE, dtype=np.int64)
        last = k * block + np.arange(k) * block + (N - 1)
        labels[:, last] = qvals
        return TaskData(inputs, labels)
