"""LaS attention against vanilla attention as a language model (LaS Sec. 5.5, Table 8, Fig. 2, App. C).

LaS trains "a BERT-like architecture with six layers and a model width of 768 ... with a context
length of 512" with vanilla and LaS attention on text8 and enwik8, "the same hyperparameters
across the experiments", and reports the bits per byte averaged over three seeds (Table 8:
text8 1.3557 vs 1.3332, enwik8 1.2885 vs 1.2826); App. C reports "a small degradation" with LaS
on WikiText-103 with 12 layers.

Here each corpus of ``corpora`` trains every model of ``models`` once per seed with one budget
(:class:`~mixerzoo.studies.lm.common.LMBudget`; the two models differ only in the sequence mixer,
with the same ``position``), and scores them on the same held-out windows of ``block_size``.

Models: ``attention`` (vanilla softmax attention), ``las`` (LaS attention, LaS Eq. 4:
``mixerzoo/mixers/las_attention.py`` with ``decay_max`` B and pooling window ``pool_size`` P),
and the ablations ``l`` (decay only) and ``s`` (pooling only) of LaS Table 4.

Cells (axes ``corpus``, ``model``): ``{"corpus", "model", "loss", "bpc" | "ppl", "seeds",
"se:loss", "sd:loss", "params"}``, losses in nats per token averaged over the seeds, with their
standard error (:func:`~mixerzoo.studies.lm.common.combine_seeds`) and spread over seeds.
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
from pydantic import Field, model_validator

from mixerzoo.analysis.outcome import Outcome
from mixerzoo.corpora import load_corpus
from mixerzoo.evaluation.ar_hits import loss_metrics, window_error
from mixerzoo.studies.lm.common import (
    LMBudget,
    combine_seeds,
    error_cells,
    fmt,
    heldout_tokens,
    heldout_window_losses,
    train_models,
)

STATEMENT = (
    "LaS Sec. 5.5, Table 8: with the same architecture and hyperparameters, LaS attention reaches "
    "a lower bits per byte than vanilla attention on text8 (1.3332 vs 1.3557) and enwik8 (1.2826 vs "
    "1.2885); App. C: slightly worse on WikiText-103 with 12 layers."
)

MODELS = ("attention", "las", "l", "s")
REFERENCE = "attention"


class LMLaSParams(LMBudget):
    corpora: list[str] = Field(
        default_factory=lambda: ["kjv"],
        min_length=1,
        description="registered corpora, one run set each (LaS Table 8: text8, enwik8); replaces corpus",
    )
    models: list[Literal[MODELS]] = Field(  # type: ignore[valid-type]
        default_factory=lambda: ["attention", "las"], min_length=1, description=f"of {', '.join(MODELS)}"
    )
    position: Literal["learned", "rope", "none"] = Field(
        "learned", description="positions of every model (LaS: a BERT-like model, learned positions)"
    )
    decay_max: float = Field(0.001, ge=0, description="LaS B: alpha_c spans [0, B] (LaS Table 9: 0.001)")
    pool_size: int = Field(3, ge=1, description="LaS average-pooling window P")

    @model_validator(mode="after")
    def _corpora_not_corpus(self) -> LMLaSParams:
        if "corpus" in self.model_fields_set:
            raise ValueError(
                f"corpus = {self.corpus!r}: this experiment reads corpora (a list), e.g. [text8, enwik8]"
            )
        return self


PARAMS = LMLaSParams


def model_specs(p: LMLaSParams) -> dict[str, dict]:
    """name -> the run config's model section (without vocab_size)."""
    out = {}
    for name in p.models:
        if name == "attention":
            mixer = {"name": "attention", "num_heads": p.num_heads}
        else:
            mixer = {
                "name": "las_attention",
                "num_heads": p.num_heads,
                "variant": name,
                "decay_max": p.decay_max,
                "pool_size": p.pool_size,
            }
        out[name] = {"mixer": mixer, "position": p.position}
    return out


def run(p: LMLaSParams, log=print) -> Outcome:
    losses: dict[tuple[str, str], list[float]] = {}
    errors: dict[tuple[str, str], list[float | None]] = {}
    units: dict[str, str] = {}
    splits: dict[str, str] = {}
    params: dict[tuple[str, str], int] = {}
    for corpus_name in p.corpora:  # a missing file fails here, before hours of training on another corpus
        load_corpus(corpus_name, data_dir=p.data_dir, **p.corpus_params)
    for corpus_name in p.corpora:
        q = p.model_copy(
            update={
                "corpus": corpus_name,
                "runs_dir": None if p.runs_dir is None else f"{p.runs_dir}/{corpus_name}",
            }
        )

        def score(name, seed, model, corpus, c=corpus_name, q=q):
            split, tokens = heldout_tokens(corpus, q.eval_split)
            units[c] = corpus.unit
            splits[c] = split
            windows = heldout_window_losses(model, tokens, q.block_size, q.eval_tokens)
            losses.setdefault((c, name), []).append(float(windows.mean()))
            errors.setdefault((c, name), []).append(window_error(windows))

        log(f"corpus {corpus_name}:")
        sizes = train_models(q, model_specs(q), score, f"lm-las-{corpus_name}", log)
        params.update({(corpus_name, m): n for m, n in sizes.items()})
    log("scored on " + ", ".join(f"{c}: the {s} split" for c, s in splits.items()))
    return outcome_from(losses, units, params, log, errors=errors)


def plan_cells(params: dict) -> list[dict]:
    """The axis keys (``corpus``, ``model``) of the cells :func:`run` produces for ``params``."""
    p = LMLaSParams.model_validate({k: v for k, v in params.items() if k != "corpus"})  # corpora rules
    return [{"corpus": c, "model": m} for c in p.corpora for m in p.models]


def outcome_from(
    losses: dict[tuple[str, str], list[float]],
    units: dict[str, str],
    params: dict[tuple[str, str], int] | None = None,
    log=print,
    errors: dict[tuple[str, str], list[float | None]] | None = None,
) -> Outcome:
    """Cells and lines from the held-out losses (nats per token, one per seed) of each (corpus, model);
    ``errors``: each loss's standard error from its evaluation windows (one per seed)."""
    out = Outcome(axes=["corpus", "model"], metric="loss")
    mean = {k: float(np.mean(v)) for k, v in losses.items()}
    for (corpus, model), v in losses.items():
        _, se, sd = combine_seeds(v, (errors or {}).get((corpus, model), [None] * len(v)))
        cell = {"corpus": corpus, "model": model, "loss": mean[(corpus, model)]}
        cell.update(loss_metrics(mean[(corpus, model)], units[corpus]))
        cell.update(error_cells("loss", se, sd, len(v)))
        if params and (corpus, model) in params:
            cell["params"] = params[(corpus, model)]
        out.cells.append(cell)
    paper = {"text8": (1.3557, 1.3332), "enwik8": (1.2885, 1.2826)}
    for corpus in dict.fromkeys(c for c, _ in losses):
        unit = units[corpus]
        what = "bpc" if unit in ("char", "byte") else "ppl"

        def shown(v: float | None, unit=unit) -> str:
            if v is None:
                return "-"
            return fmt(v / math.log(2)) if unit in ("char", "byte") else fmt(math.exp(min(v, 700.0)), ".3f")

        row = ", ".join(f"{m} {shown(mean[(c, m)])}" for c, m in mean if c == corpus)
        log(f"{corpus} ({what}, mean over seeds): {row}")
        a, b = mean.get((corpus, REFERENCE)), mean.get((corpus, "las"))
        if a is None or b is None:
            continue
        predicted = (
            f"LaS lower ({paper[corpus][1]} vs {paper[corpus][0]} bpb, LaS Table 8)"
            if corpus in paper
            else "LaS lower on small corpora (LaS Sec. 5.5); slightly higher on WikiText-103 (LaS App. C)"
        )
        out.add_line(
            f"{corpus}: LaS vs vanilla attention, {what}", predicted, f"{shown(b)} vs {shown(a)}", log
        )
    return out
