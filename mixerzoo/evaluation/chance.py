"""Chance levels: what each metric a task's runs record reads when nothing was learned.

A verdict needs to know where "nothing learned" sits: two models tied at chance are no win for
either, and a premise may say "above chance". :func:`chance_levels` gives, for a task (and
optionally its test split), ``{metric: chance value}`` for the score metrics its runs record
(``evaluate.py``, ``task_metrics.py``). The reference predictor, by kind of task:

  * token tasks that state their answer space (``Task.answer_values() = m``, the values a
    supervised label of the test split can take): a guess uniform over the m values, independent
    at every supervised position. ``accuracy_per_query`` = 1/m exactly, whatever the labels'
    distribution (the recall tasks draw their values uniformly, so always guessing one value
    scores 1/m too); ``accuracy_per_example`` = the mean, over the examples with a supervised
    position (as ``evaluate_tokens`` counts them), of (1/m)^q with q the example's supervised
    positions: from the parameters where q is fixed (``Task.answers_per_example()``), else
    measured on the data. These numbers are exact, however small: (1/4096)^4 is not rounded to 0.
  * MAD tasks, ``accuracy_macro`` and its batch mean: the same guess (:func:`_macro`).
  * bit circuits (``parity``, ``majority``): the more likely label at each position, computed
    exactly over uniform bits with the task's own label rule (:func:`_circuit`).
  * ``mad_compression``: the uniform guess, except that the last label (always the compression
    token) is right (:func:`_compression`).
  * ``regbench``: the in-context unigram (:func:`_regbench`).
  * classification: 1/classes where the classes are balanced by construction
    (``Task.balanced_classes``), else the majority-class share of the data (:func:`_classification`).
  * regression: ``r2`` = 0 (:func:`_regression`).

Without data, :func:`chance_levels` returns only the levels the parameters determine and leaves
the others out. Not stated for any task: ``loss`` (a cross-entropy or MSE, not a score in
[0, 1]), ``n_supervised`` and timings.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from typing import Any

import numpy as np

from mixerzoo.evaluation.mad_metrics import BATCH_MEAN_METRIC, MACRO_METRIC, MAD_EVAL_BATCH
from mixerzoo.evaluation.regbench_metrics import score_distributions
from mixerzoo.registry import ConfigError
from mixerzoo.tasks.base import IGNORE, Task, TaskData
from mixerzoo.tasks.circuits import BitCircuit
from mixerzoo.tasks.mad_levels import MAD_NAMES

TOKEN_METRICS = ("accuracy_per_query", "accuracy_per_example")
REGBENCH_METRICS = ("regbench_accuracy", "regbench_tvd")
MAD_METRICS = (MACRO_METRIC, BATCH_MEAN_METRIC)
#: test examples the catalog generates to measure the levels that need data
CATALOG_EXAMPLES = 200


@dataclass(frozen=True)
class Level:
    """One chance level: its value, why (``basis``), and whether it was measured on data."""

    value: float
    basis: str
    measured: bool = False


def scored_metrics(task: Task) -> tuple[str, ...]:
    """The metrics of ``task``'s runs that have a chance level (whether or not it needs data)."""
    if task.output == "regression":
        return ("r2",)
    if task.output == "classification":
        return ("accuracy",)
    extra = REGBENCH_METRICS if type(task).name == "regbench" else ()
    extra += MAD_METRICS if type(task).name in MAD_NAMES else ()
    return TOKEN_METRICS + extra


def chance_levels(task: Task, data: TaskData | None = None) -> dict[str, float]:
    """``{metric: chance value}`` for the metrics ``task``'s runs record; ``data``: its test split.

    Without ``data`` only the levels the parameters determine; with it, every level in
    :func:`scored_metrics`. See the module docstring for the predictor behind each value.
    """
    return {name: level.value for name, level in chance_details(task, data).items()}


def chance_details(task: Task, data: TaskData | None = None) -> dict[str, Level]:
    """:func:`chance_levels` with the basis of each value and whether it was measured on ``data``."""
    name = type(task).name
    if task.output == "regression":
        return _regression(task)
    if task.output == "classification":
        return _classification(task, data)
    if name == "regbench":
        return _regbench(task, data)
    if name == "mad_compression":
        return _compression(task, data)
    if isinstance(task, BitCircuit):
        return _circuit(task)
    m = task.answer_values()
    if m is None:
        return {}
    levels = _uniform_answers(task, data, m)
    if name in MAD_NAMES:
        levels.update(_macro(data, m))
    return levels


def chance_table(task: Task, n: int = CATALOG_EXAMPLES, seed: int = 0) -> list[dict[str, Any]]:
    """Rows ``{metric, value, basis, measured_on, seed}`` for every scored metric (``mixerzoo tasks``).

    Levels that need data are measured on ``n`` test examples generated with ``seed``
    (``measured_on = n``; ``None`` for the levels the parameters give); where those cannot be
    generated (a data file missing) ``value`` is None and ``basis`` says why.
    """
    levels = chance_details(task)
    measured_on, missing = None, "not stated for this task"
    if set(scored_metrics(task)) - set(levels):
        try:
            levels = chance_details(task, task.make(n, seed, "test"))
            measured_on = n
        except ConfigError as err:
            missing = f"needs the test data: {err}"
    rows = []
    for metric in scored_metrics(task):
        level = levels.get(metric)
        if level is None:
            rows.append(
                {"metric": metric, "value": None, "basis": missing, "measured_on": None, "seed": None}
            )
            continue
        on = measured_on if level.measured else None
        row = {"metric": metric, "value": level.value, "basis": level.basis}
        rows.append({**row, "measured_on": on, "seed": None if on is None else seed})
    return rows


# -- token tasks ---------------------------------------------------------------------------
def _supervised_counts(data: TaskData) -> np.ndarray:
    """Supervised positions of each example that has one (``evaluate_tokens`` skips the others)."""
    q = (data.labels != IGNORE).sum(axis=1)
    return q[q > 0]


def _uniform_answers(task: Task, data: TaskData | None, m: int) -> dict[str, Level]:
    """A guess uniform over the m answer values (the value ranges the tasks cite in
    ``answer_values``: Zoology App. E.1 Alg. 1, CAT-ws App. C.1, CAT Def. 4-5, ICLL Sec. 3.3, MAD)."""
    basis = f"1/{m}: a uniform guess among the {m} values of an answer"
    levels = {"accuracy_per_query": Level(1.0 / m, basis)}
    q = task.answers_per_example()
    if q is not None:
        basis = f"(1/{m})^{q}: all {q} answers of an example guessed right"
        levels["accuracy_per_example"] = Level(float(m) ** -q, basis)
    elif data is not None:
        value = float(np.mean(float(m) ** -_supervised_counts(data).astype(np.float64)))
        basis = f"mean over examples of (1/{m})^q, q its answers (their number varies)"
        levels["accuracy_per_example"] = Level(value, basis, measured=True)
    return levels


def _macro(data: TaskData | None, m: int) -> dict[str, Level]:
    """MAD's macro accuracy (``mad_metrics``) under the uniform guess over the m answer values.

    Each class that is a target has expected recall 1/m; the guess predicts every one of the m
    values somewhere (each is then a present class), so the macro mean is k / m^2 with k the
    values that occur as targets: 1/m when all do (assumed without data; MAD's 1,280 test
    examples hold every value). The batch mean takes k per batch of ``MAD_EVAL_BATCH`` examples.
    """
    formula = f"k/{m}^2 (uniform guess: recall 1/{m} per target value)"
    return _macro_levels(data, m, lambda k: k / m**2, formula)


def _macro_levels(data: TaskData | None, classes: int, value, formula: str) -> dict[str, Level]:
    """Both MAD metrics from ``value(k)``, the macro accuracy when k of the ``classes`` are targets:
    k = ``classes`` without data, else counted on the data and on each evaluation batch."""
    if data is None:
        basis = f"{formula}, k = {classes}: every class a target"
        return {metric: Level(value(classes), basis) for metric in MAD_METRICS}
    k = _targets(data.labels, classes)
    starts = range(0, len(data), MAD_EVAL_BATCH)
    per_batch = [value(_targets(data.labels[s : s + MAD_EVAL_BATCH], classes)) for s in starts]
    sizes = [min(MAD_EVAL_BATCH, len(data) - s) for s in starts]
    batch_basis = f"{formula}, k the classes that are targets in each batch of {MAD_EVAL_BATCH}"
    return {
        MACRO_METRIC: Level(value(k), f"{formula}, k = {k} classes targets", True),
        BATCH_MEAN_METRIC: Level(float(np.average(per_batch, weights=sizes)), batch_basis, True),
    }


def _targets(labels: np.ndarray, classes: int) -> int:
    """Distinct supervised label values (at most ``classes``)."""
    return min(len(np.unique(labels[labels != IGNORE])), classes)


def _compression(task: Task, data: TaskData | None) -> dict[str, Level]:
    """MAD compression (arXiv 2403.17844): a uniform guess over the ``ns`` content tokens at every
    position but the last, whose label is always the compression token (right at chance too).

    Macro: the guess predicts the ns content classes and the compression token's; a content class
    that is a target has recall 1/ns, the compression token's 1, so with k content values targets
    the mean is (k/ns + 1)/(ns + 1): 2/(ns + 1) when all are.
    """
    ns, L = task.answer_values(), task.seq_len
    if task.answers_per_example() is not None:
        per_query, per_example = ((L - 1) / ns + 1) / L, float(ns) ** -(L - 1)
    elif data is not None:
        q = _supervised_counts(data).astype(np.float64)
        per_query = float(((q - 1) / ns + 1).sum() / q.sum())
        per_example = float(np.mean(float(ns) ** -(q - 1)))
    else:
        return {}
    basis = f"1/{ns} at each content position, the compression token at the last always right"
    measured = task.answers_per_example() is None
    levels = {
        "accuracy_per_query": Level(per_query, basis, measured),
        "accuracy_per_example": Level(per_example, basis, measured),
    }
    formula = f"((k-1)/{ns} + 1)/{ns + 1} (1/{ns} per target content value, 1 for the last token)"
    levels.update(_macro_levels(data, ns + 1, lambda k: ((k - 1) / ns + 1) / (ns + 1), formula))
    return levels


def _circuit(task: BitCircuit) -> dict[str, Level]:
    """zoology circuits over uniform bits: predict at each position its more likely label.

    Exact, by the distribution of the number of ones in each prefix (the labels of parity and
    majority depend on it alone) and the task's own label rule (``prefix_labels`` /
    ``final_labels``, ties included: a cumulative majority tie is 1, so predicting 1 beats 0.5).
    Where both labels are equally likely the guess is 1: for the cumulative majority, always 1 is
    then the most likely label sequence (``accuracy_per_example``: no prefix has fewer ones than
    zeros, C(L, L//2) / 2^L); for parity every guess scores the same.
    """
    L, cumulative = task.seq_len, task.p.cumulative
    n = L if cumulative else L - 1  # bits read
    bits = (np.arange(n)[None, :] < np.arange(n + 1)[:, None]).astype(np.int64)  # row j: j ones, then zeros
    # label[j, t]: the label after t + 1 bits holding j ones (rows j <= t + 1 are used)
    if cumulative:
        label = task.prefix_labels(bits)
    else:
        label = np.zeros((n + 1, n), dtype=np.int64)
        label[:, -1] = task.final_labels(bits)
    scored = range(n) if cumulative else [n - 1]
    prob = alive = np.array([1.0])  # P(j ones so far); the same, restricted to strings guessed right so far
    right = []
    for t in range(n):
        prob, alive = np.convolve(prob, [0.5, 0.5]), np.convolve(alive, [0.5, 0.5])
        if t in scored:
            p1 = float(prob @ label[: t + 2, t])
            right.append(max(p1, 1.0 - p1))
            alive = alive * (label[: t + 2, t] == int(p1 > 0.5 - 1e-9))  # a tie (up to rounding) guesses 1
    basis = "the more likely label at each position, exact over uniform bits"
    return {
        "accuracy_per_query": Level(float(np.mean(right)), basis),
        "accuracy_per_example": Level(float(alive.sum()), basis),
    }


# -- RegBench ------------------------------------------------------------------------------
def in_context_unigram(inputs: np.ndarray, num_symbols: int) -> np.ndarray:
    """float32 ``[n, l, A + 2]``: at position t the frequencies of the symbols in ``inputs[:, :t+1]``.

    ICLL App. C.1's in-context n-gram at n = 1 (``baselines.ngram`` with ``n=1``, whose value
    tests/evaluation/test_chance.py checks this against): counted here because ``baselines/``
    sits above ``evaluation/`` in the layer order. Token layout: pad 0, symbols 1..A, separator
    A + 1 (both left at probability 0); uniform over the symbols before any symbol is read.
    """
    onehot = inputs[..., None] == np.arange(1, num_symbols + 1)
    counts = np.cumsum(onehot, axis=1, dtype=np.float64)
    total = counts.sum(axis=-1, keepdims=True)
    out = np.zeros((*inputs.shape, num_symbols + 2), dtype=np.float32)
    out[..., 1:-1] = np.where(total > 0, counts / np.maximum(total, 1), 1.0 / num_symbols)
    return out


def _regbench(task: Task, data: TaskData | None, batch: int = 128) -> dict[str, Level]:
    """RegBench (ICLL Sec. 4.4): the in-context unigram's Eq. 8-9 scores, and its greedy choice's
    next-token accuracies (per position and per instance). Needs the data."""
    if data is None:
        return {}
    a = int(data.extras["transitions"].shape[2])
    hits = tvd = scored = right = n_sup = whole = n_ex = 0.0
    for s in range(0, len(data), batch):
        part = _rows(data, slice(s, s + batch))
        pred = in_context_unigram(part.inputs, a)
        scores = score_distributions(pred, part)
        hits, tvd = hits + scores["accuracy"] * scores["n_scored"], tvd + scores["tvd"] * scores["n_scored"]
        scored += scores["n_scored"]
        sup = part.labels != IGNORE
        wrong = sup & (pred.argmax(axis=-1) != part.labels)
        right, n_sup = right + (sup & ~wrong).sum(), n_sup + sup.sum()
        has = sup.any(axis=1)
        whole, n_ex = whole + (has & ~wrong.any(axis=1)).sum(), n_ex + has.sum()
    basis = "the in-context unigram (ICLL App. C.1, n = 1)"
    return {
        "accuracy_per_query": Level(float(right / n_sup), f"{basis}, its most likely symbol", True),
        "accuracy_per_example": Level(float(whole / n_ex), f"{basis}, its most likely symbols", True),
        "regbench_accuracy": Level(hits / scored, f"{basis}, Eq. 8", True),
        "regbench_tvd": Level(tvd / scored, f"{basis}, Eq. 9", True),
    }


def _rows(data: TaskData, rows: slice) -> TaskData:
    """The instances ``rows`` of a data set, with every per-instance extra."""
    n = len(data)
    extras = {k: v[rows] if v.ndim and v.shape[0] == n else v for k, v in data.extras.items()}
    return TaskData(data.inputs[rows], data.labels[rows], extras)


# -- classification and regression ----------------------------------------------------------
def _classification(task: Task, data: TaskData | None) -> dict[str, Level]:
    """Always predicting the most frequent class: 1/classes where the task balances its classes by
    construction (Pathfinder: Linsley et al. 2018, LRA; half the images positive), else the
    majority-class share of the test labels (ListOps about 0.17, LRA Sec. 3; image and text sets)."""
    k = getattr(task, "num_classes", None)
    if task.balanced_classes and k is not None:
        return {"accuracy": Level(1.0 / k, f"1/{k}: the {k} classes are balanced by construction")}
    if data is None:
        return {}
    counts = np.bincount(np.asarray(data.labels, dtype=np.int64), minlength=k or 0)
    share = float(counts.max() / counts.sum())
    basis = f"majority class {int(counts.argmax())}: {share:.3f} of the labels"
    return {"accuracy": Level(share, basis, measured=True)}


def _regression(task: Task) -> dict[str, Level]:
    """R^2 (LaS Table 7, atomic tasks) of the constant prediction at the targets' mean: 0 exactly,
    as ``evaluate_regression`` pools every scored target (any other constant scores below 0)."""
    return {"r2": Level(0.0, "predicting the mean of the targets gives R^2 = 0")}


def cell_chance_levels(data_json: str) -> dict[str, float]:
    """The chance levels of a run's task, from its ``data`` section as JSON (``RunConfig.data``):
    measured on that run's own test split where a level needs data (the majority class, the
    in-context unigram), else from the parameters. A test length's ``accuracy@L`` takes the
    per-query level. Cached: the cells of one study share a few data sections."""
    return dict(_cell_levels(data_json))


@functools.lru_cache(maxsize=256)
def _cell_levels(data_json: str) -> tuple[tuple[str, float], ...]:
    from mixerzoo.config import DataConfig

    data_cfg = DataConfig.model_validate(json.loads(data_json))
    task = data_cfg.build_task()
    levels = chance_levels(task)
    if set(scored_metrics(task)) - set(levels):
        levels = chance_levels(task, task.make(data_cfg.n_test, data_cfg.seed, "test"))
    return tuple(sorted(levels.items()))


def level_for(levels: dict[str, float], metric: str) -> float | None:
    """The chance level of ``metric`` (``accuracy@L``: the per-query level, L being a test length)."""
    if metric in levels:
        return levels[metric]
    if metric.startswith("accuracy@"):
        return levels.get("accuracy_per_query", levels.get("accuracy"))
    return None
