"""Single-query associative recall, H3/Hyena style, as used by ICLL (Sec. 3.3, Sec. 4.1).

Each example is a fresh key -> value map, a run of key-value pairs drawn from it, a query
marker and a query key; the model must produce the query key's value (ICLL Sec. 3.3:
``k_1 v_1, ..., k_n v_n k_q``, scored on the last symbol only). ICLL Sec. 4.1 uses
vocabulary 40 (Poli et al. 2023's "hard" setting) and length L = 382.

Worked example (``vocab_size=10, seq_len=10``: keys ``0..3``, values ``4..7``, ``=>`` = 8)::

    inputs  = [2 5  0 4  2 5  3 7 | 8  0]
    labels  = [.  .  .  .  .  .  .  . | .  4]     (. = -100)

Vocabulary (``V = vocab_size``): the ``V - 2`` ordinary symbols are split into keys
``[0, K)`` with ``K = (V-2)//2`` and values ``[K, V-2)`` (disjoint halves, as the authors'
generator); ``V-2`` is the query marker ``=>`` and ``V-1`` the "no answer" symbol ``.``
(label only when ``query_present=False`` and the query key is absent from the context).
The map sends every key to a value drawn uniformly and independently (two keys may share a
value, as in the authors' generator); the ``(L-2)/2`` context keys are drawn uniformly with
replacement, so a key may repeat (always with its own value). The query key is uniform over
the distinct keys present in the context (``query_present=True``, the authors' default) or
over all keys.

Training labels (``train_labels``): ``"answer"`` supervises the answer only, as scored;
``"all"`` supervises every next token of a training sequence (keys, values, the marker, the
answer), the next-token loss of the authors' code (berlino/seq_icl,
``src/dataloaders/synthetics.py``: only the test labels are masked to the last symbol). Values
whose key appeared earlier in the sequence are then predictable recalls too, many per sequence.
The validation and test splits score the answer only either way. Same inputs either way::

    train_labels="all":  labels = [5 0 4 2 5 3 7 8 0 | 4]     (every next token, the answer last)
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import Field

from mixerzoo.tasks import TASKS
from mixerzoo.tasks.base import IGNORE, Task, TaskData, require


@TASKS.register("ar")
class AssociativeRecall(Task):
    """One query at the end of a run of key-value pairs from a per-sequence map (ICLL Sec. 3.3)."""

    class Params(Task.Params):
        vocab_size: int = Field(
            40,
            ge=6,
            description="vocabulary size V: (V-2)//2 keys, the rest values, "
            "plus the query marker and the no-answer symbol",
        )
        seq_len: int = Field(382, ge=4, description="sequence length L (even): (L-2)/2 pairs, marker, query")
        query_present: bool = Field(
            True, description="query a key present in the context (else any key; absent -> no-answer label)"
        )
        train_labels: Literal["answer", "all"] = Field(
            "answer",
            description="training split's labels: the answer only, or every next token (the authors' "
            "code's next-token loss); validation and test score the answer only",
        )

    def check(self) -> None:
        require(
            self.p.seq_len % 2 == 0,
            f"seq_len = {self.p.seq_len}: must be even ((L-2)/2 pairs + marker + query)",
        )

    @property
    def num_keys(self) -> int:
        return (self.p.vocab_size - 2) // 2

    @property
    def query_marker(self) -> int:
        return self.p.vocab_size - 2

    @property
    def no_answer(self) -> int:
        return self.p.vocab_size - 1

    def answer_values(self) -> int:
        """ICLL Sec. 3.3: the answer is a value from ``[K, V-2)`` (19 at V = 40), or, with
        ``query_present=False``, the no-answer symbol besides."""
        return self.p.vocab_size - 2 - self.num_keys + (0 if self.p.query_present else 1)

    def answers_per_example(self) -> int:
        """One query, scored on the last position only (ICLL Sec. 3.3)."""
        return 1

    def generate_split(self, n: int, rng: np.random.Generator, split: str) -> TaskData:
        data = self.generate(n, rng)
        if split == "train" and self.p.train_labels == "all":
            data.labels[:, :-1] = data.inputs[:, 1:]  # every next token; the answer stays last
        return data

    def generate(self, n: int, rng: np.random.Generator) -> TaskData:
        p = self.p
        K = self.num_keys
        n_pairs = (p.seq_len - 2) // 2
        kv_map = rng.integers(K, p.vocab_size - 2, size=(n, K), dtype=np.int64)  # fresh map per example
        keys = rng.integers(0, K, size=(n, n_pairs), dtype=np.int64)
        values = np.take_along_axis(kv_map, keys, axis=1)

        # Query uniform over the *distinct* keys in context: random scores, absent keys excluded.
        scores = rng.random((n, K))
        if p.query_present:
            present = np.zeros((n, K), dtype=bool)
            np.put_along_axis(present, keys, True, axis=1)
            scores[~present] = -1.0
        query = scores.argmax(axis=1)
        answer = kv_map[np.arange(n), query]
        if not p.query_present:
            seen = (keys == query[:, None]).any(axis=1)
            answer = np.where(seen, answer, self.no_answer)

        inputs = np.empty((n, p.seq_len), dtype=np.int64)
        inputs[:, 0 : 2 * n_pairs : 2] = keys
        inputs[:, 1 : 2 * n_pairs : 2] = values
        inputs[:, -2] = self.query_marker
        inputs[:, -1] = query
        labels = np.full((n, p.seq_len), IGNORE, dtype=np.int64)
        labels[:, -1] = answer
        return TaskData(inputs, labels)
