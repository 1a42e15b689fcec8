"""The task interface: a seeded, vectorized generator of (inputs, labels) arrays.

Conventions shared by every task, by the kind of output it is scored on (``Task.output``):
  * ``"tokens"``: ``inputs`` int64 ``[n, l]`` token ids; ``labels`` int64 ``[n, l]``,
    ``labels[i, t]`` is the target of the model's output at position ``t``, i.e. after reading
    ``inputs[i, :t+1]``; ``IGNORE`` (-100) where unsupervised.
  * ``"regression"``: ``inputs`` float32 ``[n, l, c]`` real values; ``labels`` float32
    ``[n, l]`` (or ``[n, l, k]``), same position convention; ``mask`` bool ``[n, l]`` marks the
    scored positions (labels are 0 elsewhere).
  * ``"classification"``: ``inputs`` int64 ``[n, l]`` token ids (padded); ``labels`` int64
    ``[n]``, one class per sequence; ``mask`` bool ``[n, l]`` marks the real (non-pad)
    tokens, over which the model pools.
  * Randomness comes only from the ``numpy.random.Generator`` passed in; ``Task.make``
    derives it from ``(seed, split)`` so train and test come from disjoint seed streams.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from mixerzoo.params import Params, validate
from mixerzoo.registry import ConfigError

IGNORE = -100
SPLITS = {"train": 0, "test": 1, "valid": 2}


@dataclass
class TaskData:
    """Materialized examples of a task. ``extras`` holds task-specific arrays (saved to .npz).

    ``mask`` (bool ``[n, l]``) is used by the regression and classification kinds: the scored
    positions, or the real tokens to pool over. Token tasks leave it ``None`` (they mark
    unsupervised positions with ``IGNORE`` in the labels).
    """

    inputs: np.ndarray
    labels: np.ndarray
    extras: dict[str, np.ndarray] = field(default_factory=dict)
    mask: np.ndarray | None = None

    def __len__(self) -> int:
        return int(self.inputs.shape[0])

    def arrays(self) -> dict[str, np.ndarray]:
        out = {"inputs": self.inputs, "labels": self.labels, **self.extras}
        if self.mask is not None:
            out["mask"] = self.mask
        return out


class Task:
    """Base class. Subclasses define ``Params`` and ``generate(n, rng)``."""

    name: ClassVar[str] = ""
    #: what the model's output is scored against (see the module docstring):
    #: "tokens" (next-token classes at supervised positions), "regression" (real targets at
    #: masked positions, MSE / R^2) or "classification" (one class per sequence).
    output: ClassVar[str] = "tokens"
    #: classification: every class is equally frequent in every split by construction, so chance is
    #: 1/classes without looking at data (``mixerzoo.evaluation.chance``)
    balanced_classes: ClassVar[bool] = False

    class Params(Params):
        pass

    def __init__(self, **params: Any) -> None:
        self.p = validate(type(self).Params, params, where=f"task[{type(self).name}]")
        self.check()

    # -- to override -------------------------------------------------------------------
    def check(self) -> None:
        """Raise :class:`ConfigError` for parameter combinations the generator cannot honour."""

    def generate(self, n: int, rng: np.random.Generator) -> TaskData:  # pragma: no cover
        raise NotImplementedError

    @property
    def vocab_size(self) -> int:
        return int(self.p.vocab_size)  # type: ignore[attr-defined]

    @property
    def seq_len(self) -> int:
        return int(self.p.seq_len)  # type: ignore[attr-defined]

    def answer_values(self) -> int | None:
        """Token tasks: how many distinct values a supervised label of the test split can take, from the
        parameters (the answer space chance levels are taken over); ``None`` where the task does not say."""
        return None

    def answers_per_example(self) -> int | None:
        """Token tasks: the supervised positions of every test example where that is fixed, else ``None``."""
        return None

    def model_defaults(self) -> dict[str, Any]:
        """Model config fields this task implies (``RunConfig`` fills those the user left out).

        Token tasks: vocabulary and length. Tasks with another ``output`` kind override this to
        add the input kind (``input``, ``input_dim``) and head (``head``, ``output_dim``,
        ``num_classes``) they need.
        """
        return {"vocab_size": self.vocab_size, "max_len": self.seq_len}

    # -- shared ------------------------------------------------------------------------
    def statistics(self, data: TaskData) -> dict[str, dict[str, float]]:
        """Summary of a data set: mean / std / min / max over examples of each per-example number.

        Always the supervised positions per example (labels that are not ``IGNORE`` for token
        tasks, ``mask`` for the others), plus every one-dimensional numeric array in
        ``data.extras`` (RegBench: ``length``, ``num_strings``, ``num_states``).
        """
        per: dict[str, np.ndarray] = {}
        if self.output == "tokens":
            per["supervised_positions"] = (data.labels != IGNORE).sum(axis=1)
        elif self.output == "regression" and data.mask is not None:
            per["scored_positions"] = data.mask.sum(axis=1)
        elif data.mask is not None:
            per["real_tokens"] = data.mask.sum(axis=1)
        for name, arr in data.extras.items():
            if arr.ndim == 1 and arr.shape[0] == len(data) and np.issubdtype(arr.dtype, np.number):
                per[name] = arr
        return {
            name: {
                "mean": float(np.mean(v)),
                "std": float(np.std(v)),
                "min": float(np.min(v)),
                "max": float(np.max(v)),
            }
            for name, v in per.items()
        }

    def make(self, n: int, seed: int, split: str = "train") -> TaskData:
        """``n`` examples for ``split``, reproducible from ``(params, seed, split)`` on any machine."""
        if n < 1:
            raise ConfigError(f"n = {n}: the number of examples must be >= 1")
        if seed < 0:
            raise ConfigError(f"seed = {seed}: a seed must be >= 0")
        if split not in SPLITS:
            raise ConfigError(f"split = {split!r}: allowed: {', '.join(SPLITS)}")
        self.check_fits(n)
        rng = np.random.default_rng([int(seed), SPLITS[split]])
        return self.generate_split(int(n), rng, split)

    def bytes_per_example(self) -> int:
        """A lower bound on the memory of one example, by output kind (extras not counted).

        tokens: int64 inputs and labels (16 bytes a position); regression: float32 inputs (one
        channel at least) and labels, bool mask (9); classification: int64 inputs, bool mask
        (9) and one int64 label.
        """
        if self.output == "tokens":
            return 16 * self.seq_len
        return 9 * self.seq_len + (8 if self.output == "classification" else 0)

    def check_fits(self, n: int) -> None:
        """Refuse, before allocating, ``n`` examples whose arrays alone exceed the machine's memory."""
        need = n * self.bytes_per_example()
        have = physical_memory_bytes()
        if have and need > have:
            raise ConfigError(
                f"task {type(self).name}: {n:,} examples of length {self.seq_len:,} need at least "
                f"{format_bytes(need)} for inputs and labels alone; this machine has {format_bytes(have)} "
                "of memory (lower n or seq_len)"
            )

    def generate_split(self, n: int, rng: np.random.Generator, split: str) -> TaskData:
        """Examples for one split. Tasks whose splits must not share examples (ListOps programs,
        RegBench languages) override this; the rest draw from their own seed stream per split."""
        return self.generate(n, rng)


def physical_memory_bytes() -> int | None:
    """Total physical memory of this machine, or None where the OS does not say."""
    import os

    try:
        return int(os.sysconf("SC_PHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, ValueError, OSError):
        return None


def format_bytes(n: float) -> str:
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if n < 1000 or unit == "TB":
            return f"{n:,.1f} {unit}"
        n /= 1000
    return f"{n:,.1f} TB"  # pragma: no cover


def require(ok: bool, message: str) -> None:
    """Raise a one-line :class:`ConfigError` when ``ok`` is false."""
    if not ok:
        raise ConfigError(message)


def sample_distinct(rng: np.random.Generator, n: int, k: int, low: int, high: int) -> np.ndarray:
    """``[n, k]`` integers from ``[low, high)``, distinct within each row, in random order.

    Uniform over k-subsets, vectorized, O(n*k) memory (never an ``[n, high-low]`` permutation):
    draw with replacement and redraw duplicates until none remain. The procedure commutes
    with any relabelling of ``[low, high)``, so the resulting set is uniform over k-subsets.
    When the range is tight (``high - low < 2k``) Floyd's algorithm is used instead.
    """
    m = high - low
    if k > m:
        raise ConfigError(f"cannot draw {k} distinct values from [{low}, {high})")
    if m < 2 * k:
        out = np.empty((n, k), dtype=np.int64)
        for i, j in enumerate(range(m - k, m)):
            t = rng.integers(0, j + 1, size=n)
            taken = (out[:, :i] == t[:, None]).any(axis=1) if i else np.zeros(n, dtype=bool)
            out[:, i] = np.where(taken, j, t)
    else:
        out = rng.integers(0, m, size=(n, k), dtype=np.int64)
        while True:
            out.sort(axis=1)
            dup = out[:, 1:] == out[:, :-1]
            count = int(dup.sum())
            if count == 0:
                break
            out[:, 1:][dup] = rng.integers(0, m, size=count)
    order = np.argsort(rng.random((n, k)), axis=1)
    return np.take_along_axis(out, order, axis=1) + low
