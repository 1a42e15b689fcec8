"""MAD selective copying (Poli et al. 2024, arXiv 2403.17844; MAD-lab
``generate_selective_copying_instance``, ``configs/tasks/selective-copying.yml``).

``K = num_tokens_to_copy`` tokens scattered among blanks, a copy token, then ``K`` blanks at
whose positions the model writes the scattered tokens back, in order. Unlike ``selective_copy``
(CAT-ws Def. 4, teacher-forced: the answers are fed back as inputs), MAD's answer positions
hold blanks, so the model must keep the whole list until it has emitted it. Worked example
(``vocab_size=6, seq_len=12, num_tokens_to_copy=3``: tokens ``[0, 4)``, blank ``4``, copy ``5``)::

    inputs = [3 2 4 4 4 4 4 2 | 5 | 4 4 4]
    labels = [. . . . . . . . | . | 3 2 2]     (. = -100)

Layout: tokens uniform over ``[0, V-2)`` with replacement; ``L - 2K - 1`` blanks spread over
the ``K`` gaps *before* each token (MAD inserts them with ``np.insert`` at indices uniform in
``[0, K)``, i.e. a multinomial count per gap, so the last token always directly precedes the
copy token); then the copy token ``V-1`` and ``K`` blanks ``V-2``. ``labels[L-K+i]`` is token
``i``, the same in every split (MAD trains and tests on these targets alone).
MAD-lab draws the insertion indices from numpy's global generator rather than the seeded
one, so its data sets are not reproducible from the seed; here every draw is seeded.
"""

from __future__ import annotations

import numpy as np
from pydantic import Field

from mixerzoo.tasks import TASKS
from mixerzoo.tasks.base import IGNORE, Task, TaskData, require


@TASKS.register("mad_selective_copy")
class MADSelectiveCopy(Task):
    """MAD selective copying: K tokens among blanks, recalled in order after a copy token."""

    class Params(Task.Params):
        vocab_size: int = Field(
            16, ge=3, description="vocabulary size V incl. blank and copy (MAD: 16 .. 128)"
        )
        seq_len: int = Field(256, ge=4, description="sequence length L (MAD levels: 256, 512, 1024)")
        num_tokens_to_copy: int = Field(16, ge=1, description="tokens K to copy (MAD levels: 16 .. 96)")

    @property
    def blank(self) -> int:
        return self.p.vocab_size - 2

    @property
    def copy_token(self) -> int:
        return self.p.vocab_size - 1

    def answer_values(self) -> int:
        """MAD (arXiv 2403.17844) selective copying: the copied tokens are uniform over ``[0, V-2)``."""
        return self.p.vocab_size - 2

    def answers_per_example(self) -> int:
        """The K tokens written back after the copy token."""
        return self.p.num_tokens_to_copy

    def check(self) -> None:
        p = self.p
        K = p.num_tokens_to_copy
        require(
            p.seq_len > 2 * K + 1,
            f"seq_len = {p.seq_len}: needs > 2*num_tokens_to_copy + 1 = {2 * K + 1} (MAD's bound)",
        )

    def generate(self, n: int, rng: np.random.Generator) -> TaskData:
        p = self.p
        L, K = p.seq_len, p.num_tokens_to_copy
        blanks = L - 2 * K - 1
        tokens = rng.integers(0, p.vocab_size - 2, size=(n, K), dtype=np.int64)
        before = rng.multinomial(blanks, np.full(K, 1.0 / K), size=n)  # blanks in front of token i
        pos = np.arange(K) + np.cumsum(before, axis=1)
        inputs = np.full((n, L), self.blank, dtype=np.int64)
        np.put_along_axis(inputs, pos, tokens, axis=1)
        inputs[:, L - K - 1] = self.copy_token
        labels = np.full((n, L), IGNORE, dtype=np.int64)
        labels[:, L - K :] = tokens
        return TaskData(inputs, labels)
