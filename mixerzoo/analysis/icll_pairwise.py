"""Fig. 5 of ICLL as a checked experiment: pairwise TVD of trained models and baselines (Sec. 5.3).

    mixerzoo study run icll-fig5            # quick preset: small Transformers, short RegBench strings
    mixerzoo study report icll-fig5 --json

:func:`run` trains the figure's models in-process on RegBench (``n_train`` instances; Fig. 5:
N = 2,500, "TF" a 12-layer and "TF/2" a 2-layer Transformer), computes every baseline's
in-context next-token distributions (:mod:`mixerzoo.baselines`: n-gram with backoff, LNW /
LNW_r trained on the same training instances, Baum-Welch, the true PFA), and measures
:func:`~mixerzoo.analysis.pairwise_tvd.pairwise_tvd` over the first ``max_tokens`` tokens of
each of the ``n_test`` held-out instances (Fig. 5: "across the first 100 tokens of each string
in the REGBENCH test set"). Every predictor sees the instances cut to their first
``max_tokens`` tokens: each row depends on its prefix only, so the scored rows are unchanged
and Baum-Welch fits no strings it would not be scored on.

Cells: one per ordered pair of distinct predictors, axes ``a`` and ``b`` (labels), metric
``tvd`` (the matrix is symmetric; both orders are listed so a claim can fix ``a``). When the
baselines include the true PFA (``true``) and the in-context unigram (``ngram`` with ``n: 1``),
each model's cell against the true PFA also holds ``unigram_tvd_gain``: the unigram's TVD to the
true PFA minus the model's (above 0: the model predicts the language better than the symbol
frequencies of its context).
``reference_seeds`` > 0 retrains the first model with other seeds and reports the mean TVD
between the seeds (the caption's reference, 0.11 for TF) as a line and as cells with ``b`` =
``<label>@seed<k>``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch
from pydantic import Field, model_validator

from mixerzoo.analysis.icll_probes import RegBenchModels, Trainer, regbench_data, train_model
from mixerzoo.analysis.outcome import Outcome
from mixerzoo.tasks.base import TaskData

STATEMENT = (
    "ICLL Sec. 5.3 / Fig. 5: the 12-layer Transformer (TF) is closest to LNW_r; the 2-layer "
    "Transformer (TF/2) is closer to a 2-gram than a 3-gram model; large Transformers are closer "
    "to n-gram models than to the ground-truth DFA or Baum-Welch (pairwise TVD, first 100 tokens)."
)


class PairwiseParams(RegBenchModels):
    baselines: dict[str, dict[str, Any]] = Field(
        default_factory=dict,
        description="label -> {name: a baseline, its parameters}; lnw is trained on the models' data",
    )
    max_tokens: int = Field(100, ge=1, description="first tokens compared per test instance (Fig. 5: 100)")
    reference_seeds: int = Field(0, ge=0, description="extra seeds of the first model (caption: 0.11)")
    figure: str = Field("icll-fig5", pattern=r"^[A-Za-z0-9_.-]+$", description="figure file stem")

    @model_validator(mode="after")
    def _baselines_valid(self):
        from mixerzoo.baselines import build_baseline
        from mixerzoo.registry import ConfigError

        for label, spec in self.baselines.items():
            if label in self.models:
                raise ValueError(f"baselines.{label}: the label is also a model's; labels must differ")
            spec = dict(spec)
            name = spec.pop("name", None)
            if not isinstance(name, str):
                raise ValueError(f"baselines.{label}: give the baseline's name (e.g. name: ngram)")
            try:
                build_baseline(name, **spec)
            except ConfigError as err:
                raise ValueError(f"baselines.{label}: {err}") from None
        if len(self.models) + len(self.baselines) < 2:
            raise ValueError("pairwise TVD needs at least two predictors (models + baselines)")
        return self


PARAMS = PairwiseParams


def first_tokens(data: TaskData, k: int) -> TaskData:
    """The instances cut to their first ``k`` tokens (per-position extras such as ``state`` alike)."""
    if k >= data.inputs.shape[1]:
        return data
    extras = {}
    for key, v in data.extras.items():
        if v.shape == data.inputs.shape:
            extras[key] = v[:, :k]
        elif key == "length":
            extras[key] = np.minimum(v, k).astype(v.dtype)
        else:
            extras[key] = v
    return TaskData(data.inputs[:, :k], data.labels[:, :k], extras)


def baseline_distributions(spec: dict[str, Any], train: TaskData, test: TaskData) -> np.ndarray:
    """A baseline's distributions on ``test``; ``lnw`` is first fitted on ``train`` (App. D: same data)."""
    from mixerzoo.baselines import build_baseline, check_rows

    spec = dict(spec)
    baseline = build_baseline(spec.pop("name"), **spec)
    if getattr(baseline, "fit", None) is not None and getattr(baseline.p, "train_data", None) is None:
        baseline.fit(train)
    dist = baseline.distributions(test)
    check_rows(dist, deficit_ok=not baseline.rows_sum_to_one)
    return dist


def run(p: PairwiseParams, log=print, trainer: Trainer | None = None) -> Outcome:
    import time

    from mixerzoo.analysis.pairwise_tvd import pairwise_tvd, pairwise_tvd_errors
    from mixerzoo.evaluation.regbench_metrics import model_distributions, score_distributions

    train_data, test_data = regbench_data(p)
    test = first_tokens(test_data, p.max_tokens)
    dists: dict[str, np.ndarray] = {}
    for label in p.models:
        model, _ = train_model(p, label, (train_data, test_data), log, trainer=trainer)
        dists[label] = model_distributions(model, torch.from_numpy(test.inputs))
    for label, spec in p.baselines.items():
        t0 = time.perf_counter()
        dists[label] = baseline_distributions(spec, train_data, test)
        log(f"baseline {label} ({spec['name']}): {time.perf_counter() - t0:.0f} s")
    seeds: dict[str, np.ndarray] = {}
    first = next(iter(p.models))
    for k in range(1, p.reference_seeds + 1):
        model, _ = train_model(p, first, (train_data, test_data), log, seed=p.seed + k, trainer=trainer)
        seeds[f"{first}@seed{p.seed + k}"] = model_distributions(model, torch.from_numpy(test.inputs))

    out = Outcome(axes=["a", "b"], metric="tvd")
    for label, d in dists.items():
        s = score_distributions(d, test)
        out.add_line(
            f"{label}: Eq. 8-9 on the first {p.max_tokens} tokens",
            "(scores of the predictor itself)",
            f"accuracy {s['accuracy']:.4f}, TVD {s['tvd']:.4f}",
            log,
        )
    names, matrix = pairwise_tvd(dists, test, p.max_tokens)
    errors = pairwise_tvd_errors(dists, test, p.max_tokens)
    for i, a in enumerate(names):
        for j, b in enumerate(names):
            if i != j:
                out.cells.append({"a": a, "b": b, "tvd": float(matrix[i, j]), "se:tvd": float(errors[i, j])})
    _add_unigram_gains(out.cells, names, matrix, p)
    for i, a in enumerate(names):
        others = sorted((float(matrix[i, j]), b) for j, b in enumerate(names) if j != i)
        out.add_line(
            f"closest to {a}",
            "see the claims",
            ", ".join(f"{b} {v:.3f}" for v, b in others),
            log,
        )
    if seeds:
        _add_seed_cells(out, first, dists[first], seeds, test, p.max_tokens, log)
    out.plot = lambda folder: _plot(names, matrix, p, folder)
    return out


def _add_seed_cells(
    out: Outcome, first: str, dist, seeds: dict, test: TaskData, max_tokens: int, log
) -> None:
    """The caption's reference: model ``first`` against itself trained with other seeds."""
    from mixerzoo.analysis.pairwise_tvd import pairwise_tvd, pairwise_tvd_errors

    pairs = {first: dist, **seeds}
    _, seed_matrix = pairwise_tvd(pairs, test, max_tokens)
    seed_errors = pairwise_tvd_errors(pairs, test, max_tokens)
    for j, b in enumerate(seeds, start=1):
        out.cells.append(
            {"a": first, "b": b, "tvd": float(seed_matrix[0, j]), "se:tvd": float(seed_errors[0, j])}
        )
    out.add_line(
        f"{first} vs itself with other seeds",
        "0.11 (Fig. 5 caption: TF vs TFs with other seeds)",
        f"mean TVD {float(seed_matrix[0, 1:].mean()):.4f} over {len(seeds)} seeds",
        log,
    )


def _add_unigram_gains(cells: list[dict], names: list[str], matrix: np.ndarray, p: PairwiseParams) -> None:
    """``unigram_tvd_gain`` on each (model, true PFA) cell, when both baselines are there."""
    true = [k for k, s in p.baselines.items() if s.get("name") == "true"]
    unigram = [k for k, s in p.baselines.items() if s.get("name") == "ngram" and s.get("n") == 1]
    if not (true and unigram):
        return
    t, u = names.index(true[0]), names.index(unigram[0])
    for cell in cells:
        if cell["a"] in p.models and cell["b"] == true[0]:
            cell["unigram_tvd_gain"] = float(matrix[u, t] - matrix[names.index(cell["a"]), t])


def plan_cells(params: dict) -> list[dict]:
    """The axis keys (``a``, ``b``) of the cells :func:`run` produces for ``params``."""
    p = PairwiseParams.model_validate(params)
    names = [*p.models, *p.baselines]
    cells = [{"a": a, "b": b} for a in names for b in names if a != b]
    first = next(iter(p.models))
    return cells + [{"a": first, "b": f"{first}@seed{p.seed + k}"} for k in range(1, p.reference_seeds + 1)]


def _plot(names: list[str], matrix: np.ndarray, p: PairwiseParams, folder: Path) -> list[Path]:
    from mixerzoo.analysis.pairwise_tvd import plot_pairwise_tvd

    title = f"pairwise TVD, first {p.max_tokens} tokens, N_train = {p.n_train:,} (ICLL Fig. 5)"
    return [plot_pairwise_tvd(names, matrix, Path(folder) / f"{p.figure}.png", title=title)]
