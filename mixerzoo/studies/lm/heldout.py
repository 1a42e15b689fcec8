"""Held-out losses of models trained with one budget on one corpus, beside the unigram model: the
cells of the single-corpus comparisons (``lm_las_variants``: LaS App. C; ``lm_hybrids``: Zoology
Table 2).

Every model of ``specs`` is trained once per seed (:func:`~mixerzoo.studies.lm.common.train_models`)
and scored on the same contiguous windows of the held-out split; the training split's unigram
distribution is scored on those windows too. Cells (axis ``model``)::

    {"model", "loss", "bpc" | "ppl", "seeds", "se:loss", "sd:loss", "params",
     "unigram_gain", "se:unigram_gain", "chance:loss"}

and the unigram model's own cell ``{"model": "unigram", "loss", "bpc" | "ppl", "se:loss", "seeds"}``.
``loss`` is nats per token averaged over the seeds, its error the rule of
:func:`~mixerzoo.studies.lm.common.combine_seeds`. ``unigram_gain`` is the unigram model's loss
minus the model's (nats; how far the model got below a context-free model), its error the two
losses' errors in quadrature (conservative: the windows are shared). ``chance:loss`` is the unigram
model's loss: the level of a model that learned nothing a context-free model does not know, at
which two models tie (the claims' floor rule).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mixerzoo.evaluation.ar_hits import contiguous_windows, loss_metrics, unigram_losses, window_error
from mixerzoo.studies.lm.common import (
    LMBudget,
    combine_seeds,
    error_cells,
    heldout_tokens,
    heldout_window_losses,
    train_models,
)

UNIGRAM = "unigram"


@dataclass
class HeldoutScores:
    """What scoring every model on the held-out windows gathered (losses in nats per token)."""

    unit: str = "char"
    split: str = ""
    vocab_size: int = 0
    losses: dict[str, list[float]] = field(default_factory=dict)  # model -> one per seed
    errors: dict[str, list[float | None]] = field(default_factory=dict)  # the windows' error, per seed
    unigram: float | None = None
    unigram_se: float | None = None
    params: dict[str, int] = field(default_factory=dict)


def score_heldout(p: LMBudget, specs: dict[str, dict[str, Any]], prefix: str, log=print) -> HeldoutScores:
    """Train every model of ``specs`` once per seed of ``p`` and score it and the unigram model
    on the same ``eval_tokens`` of the held-out split, in windows of ``block_size``."""
    out = HeldoutScores()

    def score(name, seed, model, corpus):
        split, tokens = heldout_tokens(corpus, p.eval_split)
        out.unit, out.split, out.vocab_size = corpus.unit, split, corpus.vocab_size
        windows = heldout_window_losses(model, tokens, p.block_size, p.eval_tokens)
        out.losses.setdefault(name, []).append(float(windows.mean()))
        out.errors.setdefault(name, []).append(window_error(windows))
        if out.unigram is None:
            held = contiguous_windows(tokens, p.block_size, max(1, p.eval_tokens // p.block_size))
            per_window = unigram_losses(corpus.splits["train"], held, corpus.vocab_size).mean(axis=1)
            out.unigram, out.unigram_se = float(per_window.mean()), window_error(per_window)

    out.params = train_models(p, specs, score, prefix, log)
    log(f"scored on the {out.split} split, {p.eval_tokens:,} tokens at most, windows of {p.block_size}")
    return out


def model_cells(scores: HeldoutScores) -> list[dict[str, Any]]:
    """One cell per model (in training order) and the unigram model's (see the module's text)."""
    cells = []
    for model, losses in scores.losses.items():
        mean, se, sd = combine_seeds(losses, scores.errors.get(model, [None] * len(losses)))
        cell: dict[str, Any] = {"model": model, "loss": mean, **loss_metrics(mean, scores.unit)}
        cell.update(error_cells("loss", se, sd, len(losses)))
        if model in scores.params:
            cell["params"] = scores.params[model]
        if scores.unigram is not None:
            cell["unigram_gain"] = scores.unigram - mean
            cell["chance:loss"] = scores.unigram
            if se is not None and scores.unigram_se is not None:
                cell["se:unigram_gain"] = math.hypot(se, scores.unigram_se)
        cells.append(cell)
    if scores.unigram is not None:
        cell = {"model": UNIGRAM, "loss": scores.unigram, **loss_metrics(scores.unigram, scores.unit)}
        cells.append(cell | error_cells("loss", scores.unigram_se, None, 1))
    return cells


def shown(loss: float | None, unit: str) -> str:
    """A loss as the corpus reports it: bits per character / byte, or perplexity."""
    if loss is None:
        return "-"
    if unit in ("char", "byte"):
        return f"{loss / math.log(2):.4f} bpc"
    return f"{math.exp(min(loss, 700.0)):.3f} ppl"


def mean_losses(scores: HeldoutScores) -> dict[str, float]:
    """model -> its loss averaged over the seeds."""
    return {m: float(np.mean(v)) for m, v in scores.losses.items()}
