"""Length extrapolation of CAT and attention language models (CAT Sec. 6.2, Table 2, Fig. 1 right;
CAT-ws App. D.2).

CAT trains Pythia (attention with RoPE), CAT and MH-CAT with and without RoPE at one context
length (2,048 tokens) and scores them at longer test lengths, the RoPE models with YaRN "which
incorporates position interpolation (PI) ... and temperature scaling". Here the same model
families are trained with one budget (:class:`~mixerzoo.studies.lm.common.LMBudget`) at
``block_size`` = L and each is scored at ``factors`` x L on the held-out split by
:func:`~mixerzoo.evaluation.lm_lengths.evaluate_lengths`: RoPE models with every ``scalings``
entry (``none``: the trained RoPE as is, ``pi``, ``yarn``), models without positions as they are.

Models (``models``; ``-rope``: rotary positions, ``-nope``: none):

  * ``attention-rope`` -- Pythia's attention with RoPE; ``attention-nope`` -- the same without
    positions (CAT Sec. 6.2: it "leads directly to divergence");
  * ``cat-rope``, ``cat-nope`` -- CAT (CAT Def. 1, per-head 1-D convolution on Q/K/V, window
    ``conv_width``; CAT Fig. 1: 21);
  * ``mh_cat-rope``, ``mh_cat-nope`` -- MH-CAT (CAT Table 2: the convolution mixes the heads'
    attention maps; ``mixerzoo/mixers/mh_cat.py``);
  * the baselines of CAT Table 2 (results there from Yang et al. 2023, *Gated Linear Attention
    Transformers with Hardware-Efficient Training*): ``tfpp-rope`` -- TF++ (Transformer++, the
    LLaMA block of Touvron et al. 2023: attention with RoPE, SwiGLU channel mixer, RMSNorm);
    ``mamba-nope`` -- Mamba (``mixerzoo/mixers/mamba.py``) in the shared block, no positions;
    ``gla-nope`` -- gated linear attention (``mixerzoo/mixers/gla.py``) with SwiGLU and RMSNorm, no
    positions. Their blocks beyond the mixer are project readings of those architectures at the
    scale this study runs (Mamba keeps the MLP of the shared block rather than stacking twice as
    many Mamba layers, which costs about four times a CAT step here).

The training split's unigram distribution is scored as the model ``unigram`` (factor 1 only).

Cells: ``{"model", "scaling", "factor", "length", "loss", "bpc" | "ppl", "loss_beyond",
"ppl_ratio"}`` per model, scaling and factor (losses averaged over ``seeds``), where
``ppl_ratio = exp(loss(factor) - loss(1))`` is the perplexity at factor x L over the
perplexity at L of the same model and scaling (1: flat; above 1: worse at the longer length).
At factor 1 a cell also holds ``unigram_gain``, the unigram model's loss minus the model's
(nats; above 0: the model learned more than character frequencies).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import Field, field_validator

from mixerzoo.analysis.outcome import Outcome
from mixerzoo.evaluation.ar_hits import contiguous_windows, loss_metrics, unigram_losses, window_error
from mixerzoo.evaluation.lm_lengths import SCALINGS, evaluate_lengths
from mixerzoo.studies.lm.common import (
    LMBudget,
    bits,
    combine_seeds,
    error_cells,
    fmt,
    heldout_tokens,
    train_models,
)

STATEMENT = (
    "CAT Sec. 6.2, Table 2, Fig. 1 right (CAT-ws App. D.2): CAT language models, with or without "
    "RoPE, keep their perplexity at test lengths beyond the training length, while attention with "
    "RoPE (Pythia, extended by YaRN / PI) declines sharply; with RoPE, CAT also beats attention, "
    "TF++, Mamba and GLA at the training length (Wikitext perplexity 26.776 vs 27.410, 28.390, "
    "28.390, 28.650)."
)

MODELS = (
    "attention-rope",
    "attention-nope",
    "cat-rope",
    "cat-nope",
    "mh_cat-rope",
    "mh_cat-nope",
    "tfpp-rope",
    "mamba-nope",
    "gla-nope",
)
#: CAT Table 2's Wikitext perplexity of the models this study trains
TABLE2_PPL = {
    "attention-rope": 27.410,
    "cat-nope": 29.216,
    "cat-rope": 26.776,
    "mh_cat-nope": 27.417,
    "mh_cat-rope": 25.858,
    "tfpp-rope": 28.390,
    "mamba-nope": 28.390,
    "gla-nope": 28.650,
}
#: the families whose perplexity CAT Fig. 1 right follows beyond the training length
LENGTH_FAMILIES = ("attention", "cat", "mh_cat")
REFERENCE = "attention-rope"  # Pythia
#: the key of the unigram model's cell (scored at factor 1 only)
UNIGRAM = ("unigram", "none", 1)


class LMLengthParams(LMBudget):
    models: list[Literal[MODELS]] = Field(  # type: ignore[valid-type]
        default_factory=lambda: ["attention-rope", "cat-nope", "cat-rope"],
        min_length=1,
        description=f"models to train: {', '.join(MODELS)}",
    )
    conv_width: int = Field(21, ge=1, description="CAT / MH-CAT filter length W (CAT Fig. 1: 21)")
    factors: list[int] = Field(
        default_factory=lambda: [1, 2, 4, 8, 16], min_length=1, description="test lengths, x block_size"
    )
    scalings: list[Literal[SCALINGS]] = Field(  # type: ignore[valid-type]
        default_factory=lambda: list(SCALINGS),
        min_length=1,
        description="RoPE at longer lengths: none (as trained), pi, yarn (CAT uses YaRN)",
    )

    @field_validator("factors")
    @classmethod
    def _factors(cls, v: list[int]) -> list[int]:
        if 1 not in v or any(f < 1 for f in v):
            raise ValueError("need positive integers including 1 (the training length: ppl_ratio's base)")
        return sorted(set(v))


PARAMS = LMLengthParams


#: the block beyond the sequence mixer of CAT Table 2's baselines (LLaMA's: SwiGLU and RMSNorm)
LLAMA_BLOCK = {"state_mixer": {"name": "swiglu"}, "norm": "rmsnorm"}


def model_specs(p: LMLengthParams) -> dict[str, dict]:
    """name -> the run config's model section (without vocab_size)."""
    mixers = {
        "attention": {"name": "attention", "num_heads": p.num_heads},
        "cat": {"name": "cat", "num_heads": p.num_heads, "conv_width": p.conv_width},
        "mh_cat": {"name": "mh_cat", "num_heads": p.num_heads, "conv_width": p.conv_width},
        "tfpp": {"name": "attention", "num_heads": p.num_heads},
        "mamba": {"name": "mamba"},
        "gla": {"name": "gla", "num_heads": p.num_heads},
    }
    blocks = {"tfpp": LLAMA_BLOCK, "gla": LLAMA_BLOCK}
    out = {}
    for name in p.models:
        family, pos = name.rsplit("-", 1)
        position = "rope" if pos == "rope" else "none"
        out[name] = {"mixer": mixers[family], "position": position, **blocks.get(family, {})}
    return out


def run(p: LMLengthParams, log=print) -> Outcome:
    rows: dict[tuple[str, str, int], list[dict]] = {}  # (model, scaling, factor) -> one row per seed
    state: dict = {}

    def score(name, seed, model, corpus):
        split, tokens = heldout_tokens(corpus, p.eval_split)
        state.update(unit=corpus.unit, split=split)
        if "unigram" not in state:
            windows = contiguous_windows(tokens, p.block_size, max(1, p.eval_tokens // p.block_size))
            per_window = unigram_losses(corpus.splits["train"], windows, corpus.vocab_size).mean(axis=1)
            state["unigram"] = float(per_window.mean())
            state["unigram_se"] = window_error(per_window)
        for scaling in p.scalings if name.endswith("-rope") else ["none"]:
            for r in evaluate_lengths(
                model, tokens, p.block_size, p.factors, scaling, corpus.unit, max_tokens=p.eval_tokens
            ):
                rows.setdefault((name, scaling, r["factor"]), []).append(r)

    params = train_models(p, model_specs(p), score, "lm-length", log)
    loss = {key: _mean([r["loss"] for r in rs]) for key, rs in rows.items()}
    beyond = {key: _mean([r["loss_beyond"] for r in rs]) for key, rs in rows.items()}
    errors = {key: _errors(rs) for key, rs in rows.items()}
    errors[UNIGRAM] = (state["unigram_se"], None, 1)
    return outcome_from(
        loss, beyond, state["unigram"], state["unit"], p.block_size, params, log, errors=errors
    )


def _errors(rows: list[dict]) -> tuple[float | None, float | None, int]:
    """``(standard error, sd over seeds, seeds)`` of one cell's loss from its rows (one per seed)."""
    scored = [r for r in rows if r["loss"] is not None]
    if not scored:
        return None, None, len(rows)
    _, se, sd = combine_seeds([r["loss"] for r in scored], [r.get("loss_se") for r in scored])
    return se, sd, len(scored)


def outcome_from(
    loss: dict[tuple[str, str, int], float | None],
    beyond: dict[tuple[str, str, int], float | None],
    unigram: float,
    unit: str,
    train_len: int,
    params: dict[str, int] | None = None,
    log=print,
    errors: dict[tuple[str, str, int], tuple[float | None, float | None, int]] | None = None,
) -> Outcome:
    """Cells and lines from mean losses (nats) per (model, scaling, factor); ``beyond``: over the
    positions past the training length (None at factor 1); ``errors``: per key (and
    :data:`UNIGRAM`), the loss's standard error, its sd over seeds and the number of seeds.

    A cell carries ``se:loss``, and, by the delta method with the two losses' errors added in
    quadrature, ``se:ppl_ratio`` (``ratio x sqrt(se_f^2 + se_1^2)``) and ``se:unigram_gain``:
    conservative, since the windows at two lengths, and the unigram's, share their text."""
    out = Outcome(axes=["model", "scaling", "factor"], metric="loss")
    what = "bpc" if unit in ("char", "byte") else "ppl"
    out.cells = _cells(loss, beyond, unigram, unit, train_len, params or {}, errors or {})
    factors = sorted({f for _, _, f in loss})
    series = sorted({(m, s) for m, s, _ in loss})
    log(f"{what} at factor x L (L = {train_len}): " + ", ".join(f"{f}L" for f in factors))
    for m, s in series:
        vals = [loss.get((m, s, f)) for f in factors]
        shown = [
            fmt(bits(v) if what == "bpc" else (None if v is None else math.exp(min(v, 700.0)))) for v in vals
        ]
        log(f"  {m:<15} {s:<5} " + "  ".join(shown))
    log(f"  unigram         {fmt(bits(unigram) if what == 'bpc' else math.exp(unigram))}")
    _length_lines(out, loss, series, max(factors), log)
    _table2_line(out, loss, unit, log)

    def plot(folder: Path) -> list[Path]:
        return [_plot(loss, unit, train_len, folder / "cat-lm-length-extrapolation.png")]

    out.plot = plot
    return out


def _length_lines(out: Outcome, loss, series, top: int, log) -> None:
    """Per model of Fig. 1 right: its perplexity at the longest length over that at L (RoPE models
    with YaRN, as the paper extends them)."""
    for m, s in series:
        family, pos = m.rsplit("-", 1)
        skipped = family not in LENGTH_FAMILIES or m == "attention-nope" or (pos == "rope" and s != "yarn")
        if skipped or top == 1:
            continue
        base, far = loss.get((m, s, 1)), loss.get((m, s, top))
        ratio = None if base is None or far is None else math.exp(min(far - base, 700.0))
        predicted = "sharp decline (CAT Sec. 6.2)" if m == REFERENCE else "flat (CAT Fig. 1 right)"
        out.add_line(
            f"{m} ({'YaRN' if s == 'yarn' else 'no positions' if s == 'none' else s}): perplexity "
            f"at {top}L / at L",
            predicted,
            fmt(ratio, ".3f"),
            log,
        )


def _table2_line(out: Outcome, loss, unit: str, log) -> None:
    """The models' order at the training length against CAT Table 2's Wikitext perplexity."""
    at_l = {m: v for (m, s, f), v in loss.items() if f == 1 and s == "none" and v is not None}
    ranked = sorted((m for m in at_l if m in TABLE2_PPL), key=lambda m: at_l[m])
    if len(ranked) < 2:
        return
    paper = sorted(ranked, key=lambda m: TABLE2_PPL[m])
    what = "bpc" if unit in ("char", "byte") else "ppl"
    out.add_line(
        f"order at L ({what}, lowest first)",
        " < ".join(f"{m} {TABLE2_PPL[m]}" for m in paper) + " (CAT Table 2, Wikitext ppl)",
        " < ".join(
            f"{m} {fmt(bits(at_l[m]) if what == 'bpc' else math.exp(min(at_l[m], 700.0)))}" for m in ranked
        ),
        log,
    )


def _cells(loss, beyond, unigram: float, unit: str, train_len: int, params: dict, errors: dict) -> list[dict]:
    """One cell per (model, scaling, factor) and one for the unigram model (see :func:`outcome_from`)."""

    def se(key) -> float | None:
        return errors.get(key, (None, None, 0))[0]

    cells = []
    for key, v in sorted(loss.items()):
        model, scaling, factor = key
        base = loss.get((model, scaling, 1))
        ratio = None if v is None or base is None else math.exp(min(v - base, 700.0))
        cell = {"model": model, "scaling": scaling, "factor": factor, "length": factor * train_len, "loss": v}
        cell.update(loss_metrics(v, unit))
        cell["loss_beyond"] = beyond.get(key)
        cell["ppl_ratio"] = ratio
        if factor == 1:
            cell["unigram_gain"] = None if v is None else unigram - v
        if model in params:
            cell["params"] = params[model]
        if key in errors:
            e, sd, seeds = errors[key]
            cell.update(error_cells("loss", e, sd, seeds))
            both = [se(key), se((model, scaling, 1))]
            if ratio is not None and factor != 1 and None not in both:
                cell["se:ppl_ratio"] = ratio * math.hypot(*both)
            if factor == 1 and v is not None and None not in (e, se(UNIGRAM)):
                cell["se:unigram_gain"] = math.hypot(e, se(UNIGRAM))
        cells.append(cell)
    unigram_cell = {"model": "unigram", "scaling": "none", "factor": 1, "length": train_len, "loss": unigram}
    unigram_cell |= loss_metrics(unigram, unit)
    return cells + [unigram_cell | (error_cells("loss", *errors[UNIGRAM]) if UNIGRAM in errors else {})]


def plan_cells(params: dict) -> list[dict]:
    """The axis keys (``model``, ``scaling``, ``factor``) of the cells :func:`run` produces."""
    p = LMLengthParams.model_validate(params)
    keys = sorted(
        (name, scaling, factor)
        for name in p.models
        for scaling in (p.scalings if name.endswith("-rope") else ["none"])
        for factor in p.factors
    )
    cells = [{"model": m, "scaling": s, "factor": f} for m, s, f in keys]
    return cells + [{"model": "unigram", "scaling": "none", "factor": 1}]


def _plot(loss, unit: str, train_len: int, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for m, s in sorted({(m, s) for m, s, _ in loss}):
        pts = sorted(
            (f * train_len, v) for (mm, ss, f), v in loss.items() if (mm, ss) == (m, s) and v is not None
        )
        if not pts:
            continue
        ys = [v / math.log(2) if unit in ("char", "byte") else math.exp(min(v, 700.0)) for _, v in pts]
        label = m if m.endswith("-nope") else f"{m} ({s})"
        ax.plot(
            [x for x, _ in pts], ys, marker="o", label=label, linestyle="-" if s in ("none", "yarn") else ":"
        )
    ax.axvline(train_len, color="red", linestyle="--", linewidth=1)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("test length (tokens)")
    ax.set_ylabel("bpc" if unit in ("char", "byte") else "perplexity")
    ax.set_title("CAT Fig. 1 right: trained at L (dashed)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def _mean(values: list[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    if len(vals) != len(values) or not vals:
        return None
    return float(np.mean(vals))
