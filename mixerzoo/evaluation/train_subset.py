"""The training examples a run's training-split metrics are measured on (``train_<metric>``).

A run scores its final model on training examples as it scores the test split, so that fitting
the training set can be told from generalising beyond it (ICLL Sec. 4.5: "other models start to
overfit to the training set with increasing depth"). Scoring every training example would cost as
many evaluation passes as the training set is larger than the test set; a fixed subset as large as
the test set (all of the training set when it is smaller) costs one test pass and carries the test
split's noise, so the two numbers are compared on equal footing (``claims/noise.py`` reads both
with the test count).

The subset is drawn from a seed stream of its own (the data seed beside :data:`SUBSET_STREAM`): it
is the same for every run of one data section, whatever the model, and it draws nothing from the
streams that make the data or order the training batches.
"""

from __future__ import annotations

import numpy as np

from mixerzoo.tasks.base import TaskData

#: the second word of the subset's seed (``[data.seed, SUBSET_STREAM]``), apart from every data stream
SUBSET_STREAM = 0x7452_4149  # "tRAI"


def subset_rows(n_train: int, n: int, seed: int) -> np.ndarray:
    """Sorted indices of ``min(n, n_train)`` distinct training examples, fixed by ``seed``."""
    if n >= n_train:
        return np.arange(n_train)
    rng = np.random.default_rng([seed, SUBSET_STREAM])
    return np.sort(rng.choice(n_train, size=n, replace=False))


def take_rows(data: TaskData, rows: np.ndarray) -> TaskData:
    """The examples ``rows`` of ``data``: inputs, labels, mask and every per-example extra (an extra
    whose first axis is as long as the data; any other extra is kept whole)."""
    n = len(data)
    extras = {k: v[rows] if v.ndim and v.shape[0] == n else v for k, v in data.extras.items()}
    mask = None if data.mask is None else data.mask[rows]
    return TaskData(data.inputs[rows], data.labels[rows], extras, mask)


def training_subset(train: TaskData, n: int, seed: int) -> TaskData:
    """The fixed subset of ``train`` a run's ``train_`` metrics read: ``n`` examples (the test
    split's size), or ``train`` itself when it holds no more."""
    return train if n >= len(train) else take_rows(train, subset_rows(len(train), n, seed))
