"""MAD memorization (Poli et al. 2024, arXiv 2403.17844; MAD-lab
``generate_memorization_instance`` / ``generate_kv_map``, ``configs/tasks/memorization.yml``).

One fixed key -> value table for the whole data set (train and test alike): each example is
``L/2`` keys, each followed by an insert token at which the model must output the key's
value, which it can only have learned into its weights. Worked example (``vocab_size=9,
seq_len=8``: keys ``[0, 4)``, values ``[4, 8)``, insert token ``8``; table of ``table_seed``)::

    inputs = [3 8  2 8  2 8  1 8]      (table: 0->6, 1->4, 2->7, 3->5)
    labels = [. 5  . 7  . 7  . 4]     (. = -100)

Vocabulary (``V``, ``N = noise_vocab_size``): insert token ``V-1``; the ``V-1-N`` other
non-noise ids split into keys ``[0, (V-1-N)/2)`` and values after them; noise ``[V-1-N, V-1)``.
The table is a uniformly random injection of keys into values drawn from
``numpy.random.default_rng(table_seed)`` (MAD: a shuffled key list zipped with a shuffled
value list, seeded by its config seed 12345), independent of the example seed and split.
Keys are uniform with replacement. With ``frac_noise > 0`` a slot is, with that probability,
two noise tokens with no label (one slot is always a key).
"""

from __future__ import annotations

from functools import cached_property

import numpy as np
from pydantic import Field

from mixerzoo.tasks import TASKS
from mixerzoo.tasks.base import IGNORE, Task, TaskData, require


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
        noise_vocab_size: int = Field(0, ge=0, description="noise tokens N, taken from the vocabulary")
        frac_noise: float = Field(0.0, ge=0.0, lt=1.0, description="probability a slot is noise")

    @property
    def num_keys(self) -> int:
        return (self.p.vocab_size - 1 - self.p.noise_vocab_size) // 2

    @property
    def insert_token(self) -> int:
        return self.p.vocab_size - 1

    @cached_property
    def table(self) -> np.ndarray:
        """``table[key]`` = its value; the same for every seed and split."""
        K = self.num_keys
        ns = self.p.vocab_size - 1 - self.p.noise_vocab_size
        return np.random.default_rng(self.p.table_seed).permutation(np.arange(K, ns))[:K]

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
