"""MAD compression (Poli et al. 2024, arXiv 2403.17844; MAD-lab
``generate_compression_instance``, ``configs/tasks/compression.yml``, ``mad/model/auto_encoder.py``).

A random token string closed by a compression token; the model must reconstruct the whole
string from its encoding at that last position. Worked example (``vocab_size=6, seq_len=8``:
tokens ``[0, 5)``, compression token ``5``)::

    inputs = [4 3 2 1 1 0 0 5]
    labels = [4 3 2 1 1 0 0 5]

``labels[t] = inputs[t]`` at every position, compression token included, in every split. So
the task is meaningful only for MAD's encoder-decoder (``mixerzoo.model.compression``): the
model under test *encodes* the sequence, its output at the last position alone is the
code, and a small decoder (an MLP on the code plus a sine-cosine position embedding) writes
out every position; MAD scores the accuracy of that reconstruction over all ``L`` positions.
Fed to a causal language model directly, the labels are the inputs themselves (trivial).

With ``frac_noise > 0`` each of the first ``L-1`` tokens is, with that probability, a noise
token (ids ``[V-1-N, V-1)``) whose label is ignored. MAD-lab builds this mask but returns the
unmasked inputs as targets (noise is never used in its benchmark); here the mask is applied.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from pydantic import Field

from mixerzoo.tasks import TASKS
from mixerzoo.tasks.base import IGNORE, Task, TaskData, require


@TASKS.register("mad_compression")
class MADCompression(Task):
    """MAD compression: reconstruct a random string from the encoding at its last token."""

    class Params(Task.Params):
        vocab_size: int = Field(
            16, ge=2, description="vocabulary size V incl. the compression token (MAD: 16 .. 128)"
        )
        seq_len: int = Field(32, ge=2, description="sequence length L (MAD levels: 32 .. 256)")
        noise_vocab_size: int = Field(0, ge=0, description="noise tokens N, taken from the vocabulary")
        frac_noise: float = Field(0.0, ge=0.0, lt=1.0, description="probability a token is noise")

    def check(self) -> None:
        p = self.p
        require(
            p.vocab_size - 1 - p.noise_vocab_size >= 1,
            f"noise_vocab_size = {p.noise_vocab_size}: leaves no content token "
            f"in vocab_size = {p.vocab_size}",
        )
        require(
            p.frac_noise == 0 or p.noise_vocab_size > 0,
            f"frac_noise = {p.frac_noise}: needs noise_vocab_size > 0",
        )

    def answer_values(self) -> int:
        """MAD (arXiv 2403.17844) compression: the labels of the first ``L-1`` positions are content
        tokens ``[0, V-1-N)``; the last label is always the compression token (one value)."""
        return self.p.vocab_size - 1 - self.p.noise_vocab_size

    def answers_per_example(self) -> int | None:
        """Every position without noise; noise tokens are unlabelled, so with noise it varies."""
        return self.p.seq_len if self.p.frac_noise == 0 else None

    def model_defaults(self) -> dict[str, Any]:
        """MAD trains compression with its encoder-decoder (``model.backbone = compression``): only
        the encoding at the last position reaches the decoder, so copying the input is no answer."""
        return {**super().model_defaults(), "backbone": "compression"}

    def generate(self, n: int, rng: np.random.Generator) -> TaskData:
        p = self.p
        V, L, N = p.vocab_size, p.seq_len, p.noise_vocab_size
        ns = V - 1 - N
        inputs = np.empty((n, L), dtype=np.int64)
        inputs[:, :-1] = rng.integers(0, ns, size=(n, L - 1), dtype=np.int64)
        inputs[:, -1] = V - 1  # the compression token
        labels = inputs.copy()
        if p.frac_noise > 0:
            noise = rng.random((n, L - 1)) < p.frac_noise
            inputs[:, :-1] = np.where(noise, rng.integers(ns, ns + N, size=(n, L - 1)), inputs[:, :-1])
            labels[:, :-1][noise] = IGNORE
        return TaskData(inputs, labels)
