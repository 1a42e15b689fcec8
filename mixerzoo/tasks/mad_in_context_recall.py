"""MAD in-context recall (Poli et al. 2024, arXiv 2403.17844; MAD-lab
``mad/data/instances.py::generate_in_context_recall_instance``, ``configs/tasks/in-context-recall.yml``).

A sequence of key-value pairs; a key seen again takes the value it was first given in the
sequence, so a model can predict the value of a repeated key from context. Worked example
(``vocab_size=8, seq_len=12, multi_query=True``: keys ``[0, 4)``, values ``[4, 8)``;
labels of the test split; MAD-lab's layout, 11 tokens, the final value 4 shifted out)::

    inputs = [2 4  1 6  1 6  2 4  2 4  2]
    labels = [. .  . .  6 .  4 .  4 .  4]     (. = -100)

Vocabulary (``V = vocab_size``, ``N = noise_vocab_size``): with ``multi_query`` the ``V - N``
non-noise ids split into keys ``[0, (V-N)/2)`` and values ``[(V-N)/2, V-N)``; without it,
``V-1`` is a copy prefix and keys / values split ``V-1-N``. Noise tokens are ``[V-N, V)``
(resp. ``[V-1-N, V-1)``).

Each example holds ``P = seq_len / 2`` pair slots. Slots ``0..P-2``: a key drawn uniformly
(with replacement); a key's value is drawn uniformly at its first occurrence in the example
and repeated afterwards. With ``frac_noise > 0`` each slot is instead, with that probability,
two uniform noise tokens (one slot, uniform among ``0..P-2``, is always a pair). The last slot
repeats a key already shown, drawn uniformly among the distinct keys shown, with its value.
``multi_query=True`` (MAD's benchmark setting): every pair whose key was shown before is a
query (label: its value, at the key's position); ``False``: only the final pair, after a copy
prefix token.

Labels by split, as MAD trains and scores (``mad/data/dataset.py`` ``is_training``): the
test / valid split labels the queries only (MAD's test accuracy); the train split, with
``train_targets = "next_token"`` (MAD), labels every position with the next input token
(language modelling, queries included); ``"queries"`` trains on the queries only.

Layout (``layout``): ``"madlab"`` (default) is MAD-lab's: its multi-query sequences are
``seq_len - 1`` tokens long (it builds a ``seq_len`` stream ending in the final value and
shifts it, so inputs stop before that value), e.g. 127 tokens at ``seq_len = 128``; without
``multi_query`` the copy prefix makes the stream ``seq_len + 1`` long and inputs are
``seq_len`` tokens. ``"clean"`` keeps multi-query inputs ``seq_len`` tokens long, the extra
last token being the final value, whose own label (the next token, past the end) is ignored;
the labels of the first ``seq_len - 1`` positions are the same in both.

Difference from MAD-lab, outside what is scored: MAD's guaranteed non-noise slot is drawn
among all ``P`` slots and can fall on the final one (when every context slot is then noise,
its generator fails for want of a key to repeat); here it is drawn among the context slots,
which lowers the expected number of noise slots by ``frac_noise / P`` (0.003 at MAD's
baseline).
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import Field

from mixerzoo.tasks import TASKS
from mixerzoo.tasks.base import IGNORE, Task, TaskData, require

TrainTargets = Literal["next_token", "queries"]
#: "madlab": MAD-lab's sequence layout; "clean": the variant each task's docstring gives
Layout = Literal["madlab", "clean"]


def first_occurrence(codes: np.ndarray) -> np.ndarray:
    """bool ``[n, m]``: ``codes[i, j]`` occurs in row ``i`` for the first time at ``j``.

    A stable sort groups equal codes with the earliest position first (vectorized over rows).
    """
    order = np.argsort(codes, axis=1, kind="stable")
    s = np.take_along_axis(codes, order, axis=1)
    head = np.ones_like(s, dtype=bool)
    head[:, 1:] = s[:, 1:] != s[:, :-1]
    out = np.empty_like(head)
    np.put_along_axis(out, order, head, axis=1)
    return out


def next_token_labels(stream: np.ndarray, length: int) -> np.ndarray:
    """Labels of MAD's training split: ``labels[:, t] = stream[:, t+1]`` (IGNORE past the end)."""
    n = stream.shape[0]
    labels = np.full((n, length), IGNORE, dtype=np.int64)
    m = min(length, stream.shape[1] - 1)
    labels[:, :m] = stream[:, 1 : m + 1]
    return labels


@TASKS.register("mad_in_context_recall")
class MADInContextRecall(Task):
    """MAD in-context recall: key-value pairs; repeated keys are queries (arXiv 2403.17844)."""

    class Params(Task.Params):
        vocab_size: int = Field(16, ge=3, description="vocabulary size V (MAD levels: 16, 32, 64, 128)")
        seq_len: int = Field(128, ge=4, description="sequence length L, even (MAD levels: 128 .. 1024)")
        multi_query: bool = Field(
            True, description="every repeated key is a query (MAD benchmark); else only the last"
        )
        noise_vocab_size: int = Field(0, ge=0, description="noise tokens N, taken from the vocabulary")
        frac_noise: float = Field(0.0, ge=0.0, lt=1.0, description="probability a pair slot is noise")
        train_targets: TrainTargets = Field(
            "next_token", description="train split labels: every next token (MAD) or the queries only"
        )
        layout: Layout = Field(
            "madlab", description="madlab: multi-query inputs seq_len - 1 long (MAD-lab); clean: seq_len"
        )

    @property
    def width(self) -> int:
        """Tokens per example: MAD-lab's multi-query sequences are one shorter than ``seq_len``."""
        p = self.p
        return p.seq_len - 1 if p.layout == "madlab" and p.multi_query else p.seq_len

    def bytes_per_example(self) -> int:
        return 16 * self.width  # int64 inputs and labels, ``width`` positions

    @property
    def non_special(self) -> int:
        """Number of key + value ids."""
        p = self.p
        return p.vocab_size - (0 if p.multi_query else 1) - p.noise_vocab_size

    def answer_values(self) -> int:
        """MAD (arXiv 2403.17844) in-context recall: a test label is a value, ids ``[ns/2, ns)``."""
        return self.non_special - self.non_special // 2

    def answers_per_example(self) -> int | None:
        """One final query without ``multi_query``; with it, as many as the example repeats keys (varies)."""
        return None if self.p.multi_query else 1

    def check(self) -> None:
        p = self.p
        require(p.seq_len % 2 == 0, f"seq_len = {p.seq_len}: must be even (key-value pairs)")
        require(
            self.non_special >= 2,
            f"noise_vocab_size = {p.noise_vocab_size}: leaves {self.non_special} of vocab_size = "
            f"{p.vocab_size} for keys and values (needs >= 2)",
        )
        require(
            p.frac_noise == 0 or p.noise_vocab_size > 0,
            f"frac_noise = {p.frac_noise}: needs noise_vocab_size > 0",
        )

    def generate(self, n: int, rng: np.random.Generator) -> TaskData:
        return self._generate(n, rng, training=False)

    def generate_split(self, n: int, rng: np.random.Generator, split: str) -> TaskData:
        return self._generate(n, rng, training=split == "train")

    def _generate(self, n: int, rng: np.random.Generator, training: bool) -> TaskData:
        p = self.p
        L, ns = p.seq_len, self.non_special
        K = ns // 2  # keys [0, K), values [K, ns), noise [ns, ns + N)
        P = L // 2
        C = P - 1  # context slots; the last slot is the final query
        rows = np.arange(n)[:, None]

        keys = rng.integers(0, K, size=(n, C), dtype=np.int64)
        table = rng.integers(K, ns, size=(n, K), dtype=np.int64)  # a key's value, fixed per example
        values = table[rows, keys]
        noise = np.zeros((n, C), dtype=bool)
        if p.frac_noise > 0:
            noise = rng.random((n, C)) < p.frac_noise
            noise[np.arange(n), rng.integers(0, C, size=n)] = False  # at least one pair
        # the final query: a key shown before, uniform over the distinct keys shown
        shown = np.zeros((n, K), dtype=bool)
        shown[np.broadcast_to(rows, keys.shape)[~noise], keys[~noise]] = True
        score = np.where(shown, rng.random((n, K)), -1.0)
        q_key = score.argmax(axis=1)
        q_value = table[np.arange(n), q_key]

        pairs = np.stack([keys, values], axis=2)
        if p.frac_noise > 0:
            noise_tok = rng.integers(ns, ns + p.noise_vocab_size, size=(n, C, 2), dtype=np.int64)
            pairs = np.where(noise[..., None], noise_tok, pairs)
        tail = [q_key[:, None], q_value[:, None]]
        if not p.multi_query:
            tail.insert(0, np.full((n, 1), p.vocab_size - 1, dtype=np.int64))  # copy prefix
        stream = np.concatenate([pairs.reshape(n, 2 * C), *tail], axis=1)
        inputs = stream[:, : self.width].copy()

        if training and p.train_targets == "next_token":
            return TaskData(inputs, next_token_labels(stream, self.width))
        labels = np.full((n, L), IGNORE, dtype=np.int64)
        labels[:, -1 if not p.multi_query else L - 2] = q_value
        if p.multi_query:
            codes = np.where(noise, K + np.arange(C), keys)  # noise slots never match
            repeat = ~first_occurrence(codes) & ~noise
            labels[:, 0 : 2 * C : 2] = np.where(repeat, values, IGNORE)
        return TaskData(inputs, labels[:, : self.width].copy())
