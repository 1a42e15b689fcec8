"""Multi-pass MQAR: the key-value pairs are shown ``num_passes`` times before the queries
(zoology repository, ``data/multiquery_ar.py`` ``num_passes``, after JRT, Arora et al. 2024,
arXiv 2407.05483, "Just read twice").

Worked example (``vocab_size=20, seq_len=20, num_kv_pairs=2, num_passes=2, power_a=1,
random_non_queries=False``)::

    inputs = [1 15  8 18 | 1 15  8 18 | 0  0  8  0  0  0  1  0  0  0  0  0]
    labels = [.  .  .  . | .  .  .  . | .  . 18  .  .  . 15  .  .  .  .  .]   (. = -100)

As MQAR (Zoology Alg. 1): ``D`` distinct keys from ``[1, V/2)`` with distinct values from
``[V/2, V)``; the block of ``D`` pairs is repeated ``num_passes`` times; each key is queried
once at offset ``2*D*num_passes + 2*gap`` with power-law gaps; the label at a query is its
value. A recurrent model with a small state can use the second pass knowing which keys come.

zoology's discrete generator tiles the same block (``np.tile``), but as written it fails for
``num_passes > 1`` (it assigns ``D`` keys into ``D*num_passes`` slots, then tiles again); its
continuous variant (``data/stacked_mqar.py``) shuffles the pair order anew in every pass.
``reorder_passes`` picks between the two: ``False`` (default) repeats the block verbatim, as
JRT repeats the prompt; ``True`` draws a fresh order per pass.
"""

from __future__ import annotations

import numpy as np
from pydantic import Field

from mixerzoo.tasks import TASKS
from mixerzoo.tasks.base import IGNORE, Task, TaskData, require, sample_distinct
from mixerzoo.tasks.mqar_compositional import fill_random_non_queries, power_law_gaps


@TASKS.register("mqar_multipass")
class MultiPassMQAR(Task):
    """zoology's multi-pass MQAR: the D pairs repeated num_passes times, then power-law queries."""

    class Params(Task.Params):
        vocab_size: int = Field(8192, ge=4, description="vocabulary size V (keys [1, V/2), values [V/2, V))")
        seq_len: int = Field(64, ge=4, description="sequence length L")
        num_kv_pairs: int = Field(4, ge=1, description="key-value pairs D per example")
        num_passes: int = Field(2, ge=1, description="times the block of D pairs is shown")
        reorder_passes: bool = Field(False, description="shuffle the pair order anew in every pass")
        power_a: float = Field(0.01, gt=0, description="power-law exponent alpha of query gaps")
        random_non_queries: bool = Field(
            True, description="fill non-query positions with random tokens instead of 0"
        )

    @property
    def context_size(self) -> int:
        return 2 * self.p.num_kv_pairs * self.p.num_passes

    def check(self) -> None:
        p = self.p
        need = self.context_size + 2 * p.num_kv_pairs
        require(
            need <= p.seq_len,
            f"seq_len = {p.seq_len}: needs 2*num_kv_pairs*(num_passes + 1) = {need}",
        )
        require(
            p.vocab_size // 2 - 1 >= p.num_kv_pairs,
            f"vocab_size = {p.vocab_size}: keys come from [1, V/2), which must hold "
            f"num_kv_pairs = {p.num_kv_pairs} distinct keys",
        )

    def answer_values(self) -> int:
        """As MQAR (Zoology App. E.1, Alg. 1 step 3): values from ``[V/2, V)``."""
        return self.p.vocab_size - self.p.vocab_size // 2

    def answers_per_example(self) -> int:
        """Each of the D keys is queried once after the passes."""
        return self.p.num_kv_pairs

    def generate(self, n: int, rng: np.random.Generator) -> TaskData:
        p = self.p
        V, L, D = p.vocab_size, p.seq_len, p.num_kv_pairs
        keys = sample_distinct(rng, n, D, 1, V // 2)
        values = sample_distinct(rng, n, D, V // 2, V)
        inputs = np.zeros((n, L), dtype=np.int64)
        labels = np.full((n, L), IGNORE, dtype=np.int64)
        for i in range(p.num_passes):
            order = np.argsort(rng.random((n, D)), axis=1) if p.reorder_passes and i else None
            k = keys if order is None else np.take_along_axis(keys, order, axis=1)
            v = values if order is None else np.take_along_axis(values, order, axis=1)
            start = 2 * D * i
            inputs[:, start : start + 2 * D : 2], inputs[:, start + 1 : start + 2 * D : 2] = k, v
        ctx = self.context_size
        gaps = power_law_gaps(rng, n, (L - ctx) // 2, D, p.power_a)
        qpos = ctx + 2 * gaps
        np.put_along_axis(inputs, qpos, keys, axis=1)
        np.put_along_axis(labels, qpos, values, axis=1)
        if p.random_non_queries:
            fill_random_non_queries(rng, inputs, ctx, V)
        return TaskData(inputs, labels)
