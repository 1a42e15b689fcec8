"""MAD memorization (Poli et al. 2024, arXiv 2403.17844; MAD-lab
``generate_memorization_instance`` / ``generate_kv_map``, ``configs/tasks/memorization.yml``).

One fixed key -> value table for the whole data set (train and test alike): each example is
``L/2`` keys, each followed by an insert token at which the model must output the key's
value, which it can only have learned into its weights. Worked example (``vocab_size=9,
seq_len=8``: keys ``[0, 4)``, values ``[4, 8)``, insert token ``8``; table of ``table_seed``)::

    inputs = [3 8  2 8  2 8  1 8]      (table: 0->4, 1->5, 2->6, 3->7, MAD-lab's for seed 12345)
    labels = [. 7  . 6  . 6  . 5]     (. = -100)

Vocabulary (``V``, ``N = noise_vocab_size``): insert token ``V-1``; the ``V-1-N`` other
non-noise ids split into keys ``[0, (V-1-N)/2)`` and values after them; noise ``[V-1-N, V-1)``.
The table is MAD-lab's for the same seed (``generate_kv_map``: a shuffled key list zipped
with a shuffled value list from ``numpy.random.default_rng(table_seed)``; MAD's config seed is
12345), a uniformly random injection of keys into values, independent of the example seed and
split (:func:`kv_table`). ``table = "permutation"`` draws another table from the same seed
(the values permuted once, ``table[key]`` the key-th of them), which agrees with MAD-lab's in
about one entry in ``K``.
Keys are uniform with replacement. With ``frac_noise > 0`` a slot is, with that probability,
two noise tokens with no label (one slot is always a key).
"""

from __future__ import annotations

from functools import cached_property
from typing import Literal

import numpy as np
from pydantic import Field

from mixerzoo.tasks import TASKS
from mixerzoo.tasks.base import IGNORE, Task, TaskData, require


def kv_table(ns: int, seed: int) -> np.ndarray:
    """MAD-lab's ``generate_kv_map(ns, seed=seed)`` as an array, ``table[key] = value``.

    MAD-lab shuffles the key list ``[0, ns/2)`` and then the value list ``[ns/2, ns)`` with one
    ``numpy.random.default_rng(seed)`` and pairs them in order (the longer value list's last
    entry left over); ``Generator.shuffle`` of a list draws as ``permutation`` of an array.
    """
    rng = np.random.default_rng(seed)
    K = ns // 2
    keys, values = rng.permutation(K), rng.permutation(np.arange(K, ns))
    table = np.empty(K, dtype=np.int64)
    table[keys] = values[:K]
    return table


@TASKS.register("mad_memorization")
class MADMemorization(Task):
    """MAD memorization: a fixed key -> value table shared by every example (weights, not context)."""

    class Params(Task.Params):
        vocab_size: int = Field(
            256, ge=4, description="vocabulary size V incl. insert token (MAD: 256 .. 8192)"
        )
        seq_len: int = Field(32, ge=2, description="sequence length L, even (MAD: 32)")
        table_seed: int = Field(
            12345, ge=0, description="seed of the fixed key -> value table (not the example seed)"
        )
        table: Literal["madlab", "permutation"] = Field(
            "madlab", description="madlab: MAD-lab's table for the seed; permutation: value permutation[key]"
        )
        noise_vocab_size: int = Field(0, ge=0, description="noise tokens N, taken from the vocabulary")
        frac_noise: float = Field(0.0, ge=0.0, lt=1.0, description="probability a slot is noise")

    @property
    def num_keys(self) -> int:
        return (self.p.vocab_size - 1 - self.p.noise_vocab_size) // 2

    @property
    def insert_token(self) -> int:
        return self.p.vocab_size - 1

    def answer_values(self) -> int:
        """MAD (arXiv 2403.17844) memorization: a label is ``table[key]``; the table sends the K keys to
        K distinct values, so a label takes K values."""
        return self.num_keys

    def answers_per_example(self) -> int | None:
        """``L/2`` insert tokens without noise; noise slots are unlabelled, so with noise it varies."""
        return self.p.seq_len // 2 if self.p.frac_noise == 0 else None

    @cached_property
    def table(self) -> np.ndarray:
        """``table[key]`` = its value; the same for every seed and split."""
        ns = self.p.vocab_size - 1 - self.p.noise_vocab_size
        if self.p.table == "permutation":  # the values [K, ns) permuted, the first K taken in key order
            return np.random.default_rng(self.p.table_seed).permutation(np.arange(ns // 2, ns))[: ns // 2]
        return kv_table(ns, self.p.table_seed)

    def check(self) -> None:
        p = self.p
        require(p.seq_len % 2 == 0, f"seq_len = {p.seq_len}: must be even (key, insert token pairs)")
        require(
            self.num_keys >= 1,
            f"noise_vocab_size = {p.noise_vocab_size}: leaves no key in vocab_size = {p.vocab_size}",
        )
        require(
            p.frac_noise == 0 or p.noise_vocab_size > 0,
            f"frac_noise = {p.frac_noise}: needs noise_vocab_size > 0",
        )

    def generate(self, n: int, rng: np.random.Generator) -> TaskData:
        p = self.p
        L, N = p.seq_len, p.noise_vocab_size
        P = L // 2
        keys = rng.integers(0, self.num_keys, size=(n, P), dtype=np.int64)
        inputs = np.empty((n, L), dtype=np.int64)
        labels = np.full((n, L), IGNORE, dtype=np.int64)
        inputs[:, 0::2], inputs[:, 1::2] = keys, self.insert_token
        labels[:, 1::2] = self.table[keys]
        if p.frac_noise > 0:
            noise = rng.random((n, P)) < p.frac_noise
            noise[np.arange(n), rng.integers(0, P, size=n)] = False  # at least one key
            ns = p.vocab_size - 1 - N
            tok = rng.integers(ns, ns + N, size=(n, P, 2), dtype=np.int64)
            inputs = np.where(np.repeat(noise, 2, axis=1), tok.reshape(n, L), inputs)
            labels[:, 1::2][noise] = IGNORE
        return TaskData(inputs, labels)
