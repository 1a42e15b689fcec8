"""Vanilla attention, LaS attention and its L- and S-attention ablations as language models on one
corpus (LaS App. C, Fig. 3; Sec. 5.5).

LaS App. C trains "a BERT-like model architecture featuring 12 layers and a model width of 768"
on WikiText-103 under the settings of Sec. 5.5 with four attention variants, "averaging the results
over two seeds", and reports the perplexity at the end of training: vanilla 20.20, L-attention
20.34, S-attention 21.69, LaS 21.87.

Here every variant is trained once per seed with one budget
(:class:`~mixerzoo.studies.lm.common.LMBudget`; the variants differ only in the sequence mixer, as
built by :func:`mixerzoo.studies.lm.las.model_specs`: ``attention``, ``las`` = LaS Eq. 4, ``l`` =
decay only, ``s`` = pooling only) and scored with the unigram model on the same held-out windows
(:mod:`~mixerzoo.studies.lm.heldout`, whose cells this result returns, axis ``model``).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from mixerzoo.analysis.outcome import Outcome
from mixerzoo.studies.lm import las
from mixerzoo.studies.lm.common import LMBudget
from mixerzoo.studies.lm.heldout import UNIGRAM, HeldoutScores, mean_losses, model_cells, score_heldout, shown

STATEMENT = (
    "LaS App. C, Fig. 3: with 12 layers on WikiText-103, L-attention (decay only) closely matches "
    "vanilla attention (perplexity 20.34 vs 20.20), while the variants with pooling fall behind "
    "(S-attention 21.69, LaS 21.87)."
)

#: LaS App. C's perplexities at the end of training
PAPER_PPL = {"attention": 20.20, "l": 20.34, "s": 21.69, "las": 21.87}


class LMLaSVariantsParams(LMBudget):
    models: list[Literal[las.MODELS]] = Field(  # type: ignore[valid-type]
        default_factory=lambda: ["attention", "las", "l", "s"],
        min_length=1,
        description=f"of {', '.join(las.MODELS)} (LaS App. C: all four)",
    )
    position: Literal["learned", "rope", "none"] = Field(
        "learned", description="positions of every model (LaS: a BERT-like model, learned positions)"
    )
    decay_max: float = Field(0.001, ge=0, description="LaS B: alpha_c spans [0, B] (LaS Table 9: 0.001)")
    pool_size: int = Field(3, ge=1, description="LaS average-pooling window P")


PARAMS = LMLaSVariantsParams


def model_specs(p: LMLaSVariantsParams) -> dict[str, dict]:
    """name -> the run config's model section (without vocab_size): LaS's own variants."""
    return las.model_specs(p)


def run(p: LMLaSVariantsParams, log=print) -> Outcome:
    return outcome_from(score_heldout(p, model_specs(p), "lm-las-variants", log), log)


def outcome_from(scores: HeldoutScores, log=print) -> Outcome:
    """Cells (:func:`~mixerzoo.studies.lm.heldout.model_cells`) and one line per model against
    the paper's perplexity."""
    out = Outcome(axes=["model"], metric="loss", cells=model_cells(scores))
    mean = mean_losses(scores)
    for model, loss in mean.items():
        out.add_line(
            f"{model}, held-out {scores.split or 'split'}",
            f"perplexity {PAPER_PPL[model]} on WikiText-103 (LaS App. C)",
            shown(loss, scores.unit),
            log,
        )
    log(f"unigram model: {shown(scores.unigram, scores.unit)}")
    return out


def plan_cells(params: dict) -> list[dict]:
    """The axis keys (``model``) of the cells :func:`run` produces for ``params``."""
    p = LMLaSVariantsParams.model_validate(params)
    return [{"model": m} for m in p.models] + [{"model": UNIGRAM}]
