"""In-context baselines for RegBench (ICLL, Sec. 4.3, App. C-D).

Each baseline maps a RegBench data set to its next-token distributions, float32
``[n, l, vocab]``: row ``t`` of instance ``i`` is the predicted distribution of
``inputs[i, t + 1]`` computed from ``inputs[i, :t + 1]`` alone (the instance's prefix, i.e.
in context), so the rows feed the Eq. 8-9 scorer
(:func:`mixerzoo.evaluation.regbench_metrics.score_distributions`) as a model's softmax does.
Every row sums to 1 (:func:`check_rows`), padding rows included, except where a baseline follows
a source whose rows do not (``ngram`` in the authors' form: ``rows_sum_to_one`` is then False and
its rows sum to at most 1).

Registry names (``mixerzoo baselines list``): ``ngram`` (App. C.1, backoff), ``baum_welch``
(App. C.2, Alg. 2), ``lnw`` (App. D, learned n-gram reweighting), ``true`` (the instance's own
PFA: accuracy 1, TVD 0 by construction, a check of the scorer and the data).
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from mixerzoo.params import Params, validate
from mixerzoo.registry import Registry, import_submodules
from mixerzoo.tasks.base import TaskData


class Baseline:
    """Base class: declare ``Params``, implement :meth:`distributions`."""

    name: ClassVar[str] = ""
    rows_sum_to_one: bool = True

    class Params(Params):
        pass

    def __init__(self, **params: Any) -> None:
        self.p = validate(type(self).Params, params, where=f"baseline[{type(self).name}]")

    def distributions(self, data: TaskData) -> np.ndarray:  # pragma: no cover
        """float32 ``[n, l, vocab]`` next-token distributions from each instance's prefix."""
        raise NotImplementedError


BASELINES: Registry[Baseline] = Registry("baseline")


def build_baseline(name: str, **params: Any) -> Baseline:
    """A registered baseline by name, with validated parameters (``ConfigError`` otherwise)."""
    return BASELINES.get(name)(**params)


def check_rows(dist: np.ndarray, atol: float = 1e-5, deficit_ok: bool = False) -> float:
    """Largest ``|sum - 1|`` over the rows of ``dist`` ``[..., vocab]``; raises if above ``atol``
    or if any entry is negative or not finite. ``deficit_ok``: rows may sum to less than 1 (the
    largest excess over 1 is checked and returned instead)."""
    dist = np.asarray(dist, dtype=np.float64)
    if not np.isfinite(dist).all() or (dist < 0).any():
        raise AssertionError("distributions contain negative or non-finite entries")
    dev = dist.sum(axis=-1) - 1.0
    err = float((np.maximum(dev, 0.0) if deficit_ok else np.abs(dev)).max()) if dist.size else 0.0
    if err > atol:
        raise AssertionError(f"a distribution row sums to 1 +- {err:.2e} (> {atol:.0e})")
    return err


import_submodules(__name__, __path__)
