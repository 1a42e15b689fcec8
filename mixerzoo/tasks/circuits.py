"""Parity and majority of a bit string (zoology repository, ``data/circuits.py``).

Tokens: bits ``0`` and ``1``, the end marker ``2`` (``vocab_size`` may be larger; the other ids
never occur). Two label layouts, as zoology has both:

* ``cumulative=False`` (zoology ``parity`` / ``majority``): ``L-1`` uniform bits, then the end
  marker; one label, at the end marker. Worked example (``seq_len=6``)::

      parity:    inputs = [1 0 1 1 0 2]   labels = [. . . . . 1]   (three ones: odd)
      majority:  inputs = [1 0 1 1 0 2]   labels = [. . . . . 1]   (3/5 > 1/2)

* ``cumulative=True`` (zoology ``cumulative_parity`` / ``cumulative_majority``, the forms its
  circuit experiments train on): ``L`` uniform bits, a label at every position, of the prefix
  read so far::

      parity:    inputs = [1 0 1 1 0 0]   labels = [1 1 0 1 1 1]
      majority:  inputs = [1 0 1 1 0 0]   labels = [1 1 1 1 1 1]

Ties follow zoology, which is not consistent between its two layouts: the end-of-sequence
majority is ``ones / (L-1) > 1/2`` (a tie is 0), the cumulative one is ``ones >= zeros``
(a tie is 1).
"""

from __future__ import annotations

import numpy as np
from pydantic import Field

from mixerzoo.tasks import TASKS
from mixerzoo.tasks.base import IGNORE, Task, TaskData

END = 2


class BitCircuit(Task):
    """Shared layout of the bit-string circuits; subclasses give the label of a bit prefix."""

    class Params(Task.Params):
        vocab_size: int = Field(3, ge=3, description="vocabulary size (bits 0, 1 and the end marker 2)")
        seq_len: int = Field(64, ge=2, description="sequence length L")
        cumulative: bool = Field(False, description="label every prefix (True) or only the end marker")

    @staticmethod
    def prefix_labels(bits: np.ndarray) -> np.ndarray:  # pragma: no cover
        """bits int64 [n, m] -> labels [n, m] of every prefix ``bits[:, :t+1]``."""
        raise NotImplementedError

    @staticmethod
    def final_labels(bits: np.ndarray) -> np.ndarray:  # pragma: no cover
        """bits int64 [n, m] -> label [n] of the whole string."""
        raise NotImplementedError

    def answer_values(self) -> int:
        """A label is a bit, 0 or 1 (zoology ``data/circuits.py``)."""
        return 2

    def answers_per_example(self) -> int:
        """Every position with ``cumulative``, else the end marker alone."""
        return self.p.seq_len if self.p.cumulative else 1

    def generate(self, n: int, rng: np.random.Generator) -> TaskData:
        L = self.p.seq_len
        if self.p.cumulative:
            bits = rng.integers(0, 2, size=(n, L), dtype=np.int64)
            return TaskData(bits, self.prefix_labels(bits))
        bits = rng.integers(0, 2, size=(n, L - 1), dtype=np.int64)
        inputs = np.concatenate([bits, np.full((n, 1), END, dtype=np.int64)], axis=1)
        labels = np.full((n, L), IGNORE, dtype=np.int64)
        labels[:, -1] = self.final_labels(bits)
        return TaskData(inputs, labels)


@TASKS.register("parity")
class Parity(BitCircuit):
    """Parity of a bit string, at the end marker or of every prefix (zoology circuits)."""

    @staticmethod
    def prefix_labels(bits: np.ndarray) -> np.ndarray:
        return np.cumsum(bits, axis=1) % 2

    @staticmethod
    def final_labels(bits: np.ndarray) -> np.ndarray:
        return bits.sum(axis=1) % 2


@TASKS.register("majority")
class Majority(BitCircuit):
    """Majority bit of a bit string, at the end marker or of every prefix (zoology circuits)."""

    @staticmethod
    def prefix_labels(bits: np.ndarray) -> np.ndarray:
        return ((2 * bits - 1).cumsum(axis=1) >= 0).astype(np.int64)  # a tie is 1

    @staticmethod
    def final_labels(bits: np.ndarray) -> np.ndarray:
        return (2 * bits.sum(axis=1) > bits.shape[1]).astype(np.int64)  # a tie is 0
