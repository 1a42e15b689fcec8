"""BaseConv with a few attention layers against attention and BaseConv as language models (Zoology
Sec. 5, Table 2, App. C.2).

Zoology pretrains, on 10B Pile tokens, attention (Table 7: 24 layers, width 1024, FFN width 4,
rotary positions), BaseConv (Table 9: 48 layers, width 1080, FFN width 2, no positions) and hybrids
"composed primarily of BASECONV layers and three attention layers", where "the hybridized (non
gated convolution) layers are inserted as replacements of the gated convolution layer" and the two
kinds are evenly interspersed (App. C.2). At 360M parameters the full-attention hybrid reaches
perplexity 8.59 against attention's 9.44 at 5.10 against 6.23 TFLOPs.

Models (``models``): ``attention`` (``n_layers`` x ``d_model``, MLP of width ``attention_ffn``, RoPE),
``base_conv`` (``conv_layers`` x ``conv_d_model``, MLP of width ``conv_ffn``, implicit filter of
``filter_order`` hidden units, no positions) and ``hybrid`` (``base_conv`` with
``hybrid_attention_layers`` of its layers attention, at :func:`attention_layers`; RoPE in those
layers only). All are trained with one budget and scored with the unigram model on the same held-out
windows (:mod:`~mixerzoo.studies.lm.heldout`). Beside the heldout cells' keys, each model's cell holds
``flops`` (training FLOPs per sequence of ``block_size`` tokens, by Zoology's accounting:
:mod:`~mixerzoo.studies.lm.zoology_flops`) and, when attention was trained, ``flops_reduction``
(1 - its FLOPs / attention's) and ``ppl_ratio`` (its perplexity over attention's,
``exp(loss - loss_attention)``, with ``se:ppl_ratio`` by the delta method).
"""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import Field, model_validator

from mixerzoo.analysis.outcome import Outcome
from mixerzoo.studies.lm.common import LMBudget
from mixerzoo.studies.lm.heldout import UNIGRAM, HeldoutScores, mean_losses, model_cells, score_heldout, shown
from mixerzoo.studies.lm.zoology_flops import Layer, training_flops

STATEMENT = (
    "Zoology Sec. 5, Table 2: at 360M parameters, BaseConv with three attention layers reaches a lower "
    "Pile perplexity than attention (8.59 vs 9.44) with 18% fewer training FLOPs (5.10 vs 6.23 TFLOPs)."
)

MODELS = ("attention", "base_conv", "hybrid")
REFERENCE = "attention"
#: Zoology Table 2, 360M rows: (perplexity, TFLOPs)
PAPER = {"attention": (9.44, 6.23), "base_conv": (11.01, 4.81), "hybrid": (8.59, 5.10)}


class LMHybridParams(LMBudget):
    """The shared budget; ``d_model``, ``n_layers`` and ``num_heads`` are attention's."""

    models: list[Literal[MODELS]] = Field(  # type: ignore[valid-type]
        default_factory=lambda: list(MODELS), min_length=1, description=f"of {', '.join(MODELS)}"
    )
    attention_ffn: float = Field(
        4.0, gt=0, description="attention's MLP width / d_model (Zoology Table 7: 4)"
    )
    conv_layers: int = Field(48, ge=1, description="BaseConv and hybrid blocks (Zoology Table 9: 48 at 354M)")
    conv_d_model: int | None = Field(
        None, ge=8, description="BaseConv and hybrid width (Zoology Table 9: 1080); None: d_model"
    )
    conv_ffn: float = Field(2.0, gt=0, description="BaseConv's MLP width / width (Zoology Table 9: 2)")
    filter_order: int = Field(64, ge=1, description="hidden units of the implicit filter MLP (Table 9: 64)")
    hybrid_attention_layers: int = Field(3, ge=1, description="attention layers of the hybrid (Sec. 5: 3)")
    hybrid_num_heads: int | None = Field(None, ge=1, description="heads of those layers; None: num_heads")

    @model_validator(mode="after")
    def _fits(self) -> LMHybridParams:
        if self.hybrid_attention_layers > self.conv_layers:
            raise ValueError(
                f"hybrid_attention_layers = {self.hybrid_attention_layers}: at most conv_layers "
                f"({self.conv_layers})"
            )
        width, heads = self.conv_width, self.hybrid_heads
        if "hybrid" in self.models and (width % heads or (width // heads) % 2):
            raise ValueError(
                f"hybrid_num_heads = {heads}: the hybrid's width {width} must split into heads of an "
                "even width (RoPE)"
            )
        return self

    @property
    def conv_width(self) -> int:
        return self.conv_d_model or self.d_model

    @property
    def hybrid_heads(self) -> int:
        return self.hybrid_num_heads or self.num_heads


PARAMS = LMHybridParams


def attention_layers(n_layers: int, count: int) -> list[int]:
    """Where the hybrid's attention layers sit: evenly interspersed (Zoology App. C.2), the middle
    of each of ``count`` equal spans (48 layers, 3: 8, 24, 40)."""
    return [(2 * k + 1) * n_layers // (2 * count) for k in range(count)]


def _conv_mixer(p: LMHybridParams) -> dict[str, Any]:
    return {"name": "base_conv", "filter": "implicit", "d_hidden": p.filter_order}


def model_specs(p: LMHybridParams) -> dict[str, dict[str, Any]]:
    """name -> the run config's model section (without vocab_size)."""
    conv = {"d_model": p.conv_width, "n_layers": p.conv_layers}
    conv_mlp = {"name": "mlp", "hidden_mult": p.conv_ffn}
    attention = {"name": "attention", "num_heads": p.hybrid_heads}
    placed = set(attention_layers(p.conv_layers, p.hybrid_attention_layers))
    hybrid = [attention if i in placed else _conv_mixer(p) for i in range(p.conv_layers)]
    every = {
        "attention": {
            "mixer": {"name": "attention", "num_heads": p.num_heads},
            "state_mixer": {"name": "mlp", "hidden_mult": p.attention_ffn},
            "position": "rope",
        },
        "base_conv": {**conv, "mixer": _conv_mixer(p), "state_mixer": conv_mlp, "position": "none"},
        "hybrid": {**conv, "mixer": hybrid, "state_mixer": conv_mlp, "position": "rope"},
    }
    return {name: every[name] for name in p.models}


def model_flops(p: LMHybridParams, vocab: int) -> dict[str, float]:
    """name -> training FLOPs per sequence of ``block_size`` tokens (Zoology's accounting)."""
    n = p.block_size
    attention = [Layer("attention", p.attention_ffn, p.num_heads)] * p.n_layers
    conv = Layer("base_conv", p.conv_ffn, filter_order=p.filter_order)
    placed = set(attention_layers(p.conv_layers, p.hybrid_attention_layers))
    mixed = Layer("attention", p.conv_ffn, p.hybrid_heads)
    hybrid = [mixed if i in placed else conv for i in range(p.conv_layers)]
    every = {
        "attention": training_flops(attention, p.d_model, n, vocab),
        "base_conv": training_flops([conv] * p.conv_layers, p.conv_width, n, vocab),
        "hybrid": training_flops(hybrid, p.conv_width, n, vocab),
    }
    return {name: every[name] for name in p.models}


#: the models' shapes in Table 2's 360M rows (Zoology Tables 7 and 9; 3 attention layers of 12
#: heads in the hybrid, Sec. 5), which fix the FLOPs shares
PAPER_SHAPES = {
    "d_model": 1024,
    "n_layers": 24,
    "num_heads": 16,
    "attention_ffn": 4.0,
    "conv_layers": 48,
    "conv_d_model": 1080,
    "conv_ffn": 2.0,
    "filter_order": 64,
    "hybrid_attention_layers": 3,
    "hybrid_num_heads": 12,
    "block_size": 2048,
}


def has_paper_shapes(p: LMHybridParams) -> bool:
    """Whether the models are Table 2's 360M shapes: a FLOPs share such as the hybrid's 18% is a
    property of those shapes, not of the architecture at any size."""
    return all(getattr(p, f) == v for f, v in PAPER_SHAPES.items())


def run(p: LMHybridParams, log=print) -> Outcome:
    scores = score_heldout(p, model_specs(p), "lm-hybrids", log)
    return outcome_from(scores, model_flops(p, scores.vocab_size), log, paper_shapes=has_paper_shapes(p))


def outcome_from(
    scores: HeldoutScores, flops: dict[str, float], log=print, paper_shapes: bool = True
) -> Outcome:
    """The held-out cells with each model's FLOPs and, against attention, its FLOPs reduction and
    perplexity ratio; one line per model against Table 2's 360M row. ``paper_shapes`` (a cell
    metric, 1 or 0): whether the models have Table 2's 360M shapes."""
    cells = model_cells(scores)
    by_model = {c["model"]: c for c in cells}
    ref = by_model.get(REFERENCE)
    for name, cell in by_model.items():
        if name == UNIGRAM:
            continue
        cell["flops"] = flops.get(name)
        cell["paper_shapes"] = float(paper_shapes)
        if ref is not None and name != REFERENCE:
            _against_attention(cell, ref, flops)
    out = Outcome(axes=["model"], metric="loss", cells=cells)
    mean = mean_losses(scores)
    for name, loss in mean.items():
        ppl, tflops = PAPER[name]
        out.add_line(
            f"{name}, held-out {scores.split or 'split'}",
            f"perplexity {ppl}, {tflops} TFLOPs at 360M on the Pile (Zoology Table 2)",
            f"{shown(loss, scores.unit)}, {flops.get(name, math.nan) / 1e12:.4g} TFLOPs",
            log,
        )
    log(f"unigram model: {shown(scores.unigram, scores.unit)}")
    return out


def _against_attention(cell: dict[str, Any], ref: dict[str, Any], flops: dict[str, float]) -> None:
    """Add ``flops_reduction`` and ``ppl_ratio`` (with its error) of ``cell`` against attention's."""
    if REFERENCE in flops and cell["model"] in flops:
        cell["flops_reduction"] = 1.0 - flops[cell["model"]] / flops[REFERENCE]
    ratio = math.exp(min(cell["loss"] - ref["loss"], 700.0))
    cell["ppl_ratio"] = ratio
    if "se:loss" in cell and "se:loss" in ref:
        cell["se:ppl_ratio"] = ratio * math.hypot(cell["se:loss"], ref["se:loss"])


def plan_cells(params: dict) -> list[dict]:
    """The axis keys (``model``) of the cells :func:`run` produces for ``params``."""
    p = LMHybridParams.model_validate(params)
    return [{"model": m} for m in p.models] + [{"model": UNIGRAM}]
