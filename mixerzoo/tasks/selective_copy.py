"""Selective copying (CAT/CAT-ws Def. 4, App. D.3; Jing et al. 2019, Gu & Dao 2023).

The vocabulary is signal tokens S, noise tokens N and a special ``⊥``. The context X holds
``K = num_tokens_to_copy`` signal tokens at random positions among noise; after ``⊥`` the
model must output X's signal subsequence X_S in order, autoregressively (Def. 4). Training
is teacher-forced: the positions after ``⊥`` hold the previous outputs, so the targets are
``X_S[0]`` at ``⊥`` and ``X_S[i+1]`` at the position holding ``X_S[i]``.

Worked example (``vocab_size=6, seq_len=10, num_tokens_to_copy=3``: noise ``0``, signal
``1..4``, ``⊥`` = 5, context length 10 - 3 = 7)::

    inputs  = [0 3 0 0 1 3 0 | 5  3  1]
    labels  = [. . . . . . . | 3  1  3]     (. = -100)

Token ids: noise ``[0, N)``, signal ``[N, V-1)``, ``⊥ = V-1`` (``N = num_noise_tokens``).
Signal tokens are drawn uniformly with replacement, or distinct within an example with
``unique=True`` (Def. 4's "unique selective copying", the setting of Theorems 3/4); their
positions are a uniform K-subset of the ``L - K`` context positions; noise tokens are uniform
over N. ``seq_len`` is the total length (context + ``⊥`` + K-1 fed-back outputs), as the
zoology/Mamba generators count it.
"""

from __future__ import annotations

import numpy as np
from pydantic import Field

from mixerzoo.tasks import TASKS
from mixerzoo.tasks.base import IGNORE, Task, TaskData, require, sample_distinct


@TASKS.register("selective_copy")
class SelectiveCopy(Task):
    """Copy the K signal tokens hidden among noise, in order, after ``⊥`` (CAT-ws Def. 4)."""

    class Params(Task.Params):
        vocab_size: int = Field(16, ge=3, description="vocabulary size V = |S| + |N| + 1")
        seq_len: int = Field(256, ge=2, description="total length L: context (L-K), ⊥, K-1 fed-back outputs")
        num_tokens_to_copy: int = Field(16, ge=1, description="signal tokens K per example (App. D.3: 16)")
        num_noise_tokens: int = Field(1, ge=1, description="size of the noise vocabulary N")
        unique: bool = Field(False, description="signal tokens distinct within an example (unique SC)")

    def check(self) -> None:
        p = self.p
        K = p.num_tokens_to_copy
        require(
            p.seq_len >= 2 * K,
            f"seq_len = {p.seq_len}: needs seq_len >= 2*num_tokens_to_copy = {2 * K} "
            "(the context must hold the signal tokens)",
        )
        n_signal = p.vocab_size - 1 - p.num_noise_tokens
        require(
            n_signal >= 1,
            f"vocab_size = {p.vocab_size}: leaves no signal token after "
            f"{p.num_noise_tokens} noise tokens and ⊥",
        )
        require(
            not p.unique or n_signal >= K,
            f"vocab_size = {p.vocab_size}: unique=True needs vocab_size >= num_tokens_to_copy + "
            f"num_noise_tokens + 1 = {K + p.num_noise_tokens + 1}",
        )

    @property
    def separator(self) -> int:
        """The id of ``⊥``."""
        return self.p.vocab_size - 1

    def answer_values(self) -> int:
        """CAT-ws Def. 4: every output is a signal token, ids ``[N, V-1)``."""
        return self.p.vocab_size - 1 - self.p.num_noise_tokens

    def answers_per_example(self) -> int:
        """The K signal tokens, output after ``⊥`` (Def. 4)."""
        return self.p.num_tokens_to_copy

    def generate(self, n: int, rng: np.random.Generator) -> TaskData:
        p = self.p
        K, N, L = p.num_tokens_to_copy, p.num_noise_tokens, p.seq_len
        ctx = L - K
        if p.unique:
            signal = sample_distinct(rng, n, K, N, p.vocab_size - 1)
        else:
            signal = rng.integers(N, p.vocab_size - 1, size=(n, K), dtype=np.int64)
        positions = np.sort(sample_distinct(rng, n, K, 0, ctx), axis=1)

        inputs = np.empty((n, L), dtype=np.int64)
        inputs[:, :ctx] = rng.integers(0, N, size=(n, ctx), dtype=np.int64)
        np.put_along_axis(inputs, positions, signal, axis=1)
        inputs[:, ctx] = self.separator
        inputs[:, ctx + 1 :] = signal[:, :-1]  # teacher forcing: the previous outputs
        labels = np.full((n, L), IGNORE, dtype=np.int64)
        labels[:, ctx:] = signal
        return TaskData(inputs, labels)
