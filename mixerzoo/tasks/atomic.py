"""Real-valued "atomic" tasks Select, CumSum, CumMax (LaS Sec. 5.4, Table 7).

LaS takes them from Gupta, Mehta & Berant 2022 ("Simplifying and understanding state
space models with diagonal linear RNNs", Sec. 3.1) and scores them by R^2. The semantics
follow that paper's released generator:

* input values: ``x ~ N(0, 1)`` i.i.d., then divided by ``max_t |x_t|`` of the sequence, so
  every value lies in ``[-1, 1]``;
* ``cumsum``: ``y_t = (x_0 + ... + x_t) / sqrt(t + 1)`` (0-based t). LaS writes
  ``y_i = Σ_{j<i} x_j``; the generator includes the current element and normalizes by the
  square root of the count (so ``y_t`` stays O(1)). We follow the generator, which also fits
  our convention that the output at ``t`` may use ``inputs[:t+1]``;
* ``cummax``: ``y_t = max(x_0, ..., x_t)``;
* ``select`` (the generator's ``masked_select``): the first ``L - M`` positions hold values,
  ``M`` of them marked by a second input channel equal to 1; the last ``M`` positions hold
  zeros and must output the marked values in order.

Every position is scored for ``cumsum``/``cummax``; only the last ``M`` for ``select``
(``TaskData.mask``). Channels of ``inputs`` (float32 ``[n, l, c]``): ``[value]``, for
``select`` ``[value, marker]``, and with ``position_channels`` two more,
``cos(2πt/L), sin(2πt/L)``, as the generator appends.

Worked example (``select``, ``seq_len=6, num_selected=2``; rows are positions)::

    inputs  = [[ .31 0] [-1.0 1] [ .52 0] [ .77 1] [0 0] [0 0]]
    labels  = [  0       0        0        0       -1.0  .77 ]
    mask    = [  F       F        F        F        T    T   ]
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from pydantic import Field

from mixerzoo.tasks import TASKS
from mixerzoo.tasks.base import Task, TaskData, require, sample_distinct


def _normalized_values(rng: np.random.Generator, n: int, length: int) -> np.ndarray:
    """``[n, length]`` standard normals divided by each row's max |value| (the generator's inf-norm)."""
    x = rng.standard_normal((n, length))
    return x / np.abs(x).max(axis=1, keepdims=True)


class AtomicTask(Task):
    """Shared parts: continuous inputs, one real target per scored position, R^2 metric."""

    output: ClassVar[str] = "regression"
    #: input channels before the optional position channels
    base_channels: ClassVar[int] = 1

    class Params(Task.Params):
        seq_len: int = Field(512, ge=2, description="sequence length L (the generator's default L = 512)")
        position_channels: bool = Field(
            False, description="append cos/sin(2*pi*t/L) input channels, as the reference generator"
        )

    @property
    def vocab_size(self) -> None:  # type: ignore[override]
        """Real-valued inputs: no vocabulary."""
        return None

    @property
    def input_dim(self) -> int:
        return self.base_channels + (2 if self.p.position_channels else 0)

    def model_defaults(self) -> dict[str, Any]:
        return {
            "input": "continuous",
            "input_dim": self.input_dim,
            "head": "regression",
            "output_dim": 1,
            "max_len": self.seq_len,
        }

    def _with_positions(self, channels: list[np.ndarray]) -> np.ndarray:
        n, length = channels[0].shape
        if self.p.position_channels:
            angle = 2 * np.pi * np.arange(length) / length
            channels = channels + [
                np.broadcast_to(np.cos(angle), (n, length)),
                np.broadcast_to(np.sin(angle), (n, length)),
            ]
        return np.stack(channels, axis=-1).astype(np.float32)


@TASKS.register("cumsum")
class CumSum(AtomicTask):
    """``y_t = (x_0 + ... + x_t) / sqrt(t+1)`` at every position (DLR paper Sec. 3.1)."""

    def generate(self, n: int, rng: np.random.Generator) -> TaskData:
        x = _normalized_values(rng, n, self.seq_len)
        y = np.cumsum(x, axis=1) / np.sqrt(np.arange(1, self.seq_len + 1))
        mask = np.ones((n, self.seq_len), dtype=bool)
        return TaskData(self._with_positions([x]), y.astype(np.float32), mask=mask)


@TASKS.register("cummax")
class CumMax(AtomicTask):
    """``y_t = max(x_0, ..., x_t)`` at every position (DLR paper Sec. 3.1)."""

    def generate(self, n: int, rng: np.random.Generator) -> TaskData:
        x = _normalized_values(rng, n, self.seq_len)
        y = np.maximum.accumulate(x, axis=1)
        mask = np.ones((n, self.seq_len), dtype=bool)
        return TaskData(self._with_positions([x]), y.astype(np.float32), mask=mask)


@TASKS.register("select")
class Select(AtomicTask):
    """Output the M marked values, in order, over the last M positions (DLR paper ``masked_select``)."""

    base_channels: ClassVar[int] = 2

    class Params(AtomicTask.Params):
        seq_len: int = Field(
            576,
            ge=2,
            description="total length L: L-M value positions, then M outputs "
            "(the generator's defaults 512 + 2*32)",
        )
        num_selected: int = Field(32, ge=1, description="marked positions M to output")

    def check(self) -> None:
        p = self.p
        require(
            p.seq_len >= 2 * p.num_selected,
            f"seq_len = {p.seq_len}: needs seq_len >= 2*num_selected = {2 * p.num_selected}",
        )

    def generate(self, n: int, rng: np.random.Generator) -> TaskData:
        L, M = self.seq_len, self.p.num_selected
        ctx = L - M
        values = np.zeros((n, L))
        values[:, :ctx] = _normalized_values(rng, n, ctx)
        marked = np.sort(sample_distinct(rng, n, M, 0, ctx), axis=1)
        markers = np.zeros((n, L))
        np.put_along_axis(markers, marked, 1.0, axis=1)
        labels = np.zeros((n, L), dtype=np.float32)
        labels[:, ctx:] = np.take_along_axis(values, marked, axis=1)
        mask = np.zeros((n, L), dtype=bool)
        mask[:, ctx:] = True
        return TaskData(self._with_positions([values, markers]), labels, mask=mask)
