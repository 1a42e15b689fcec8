"""Zoology's associative-recall gap on real text (Zoology Sec. 3, Table 1, Fig. 1, App. C.1).

Trains small language models on one corpus (by default the bundled King James Bible, character
level: ``kjv``) -- attention (RoPE), the gated convolution BaseConv (Zoology Def. 4.1) and CAT (CAT
Def. 1, no positions) -- with the same backbone, data order and budget, and scores them and the
training split's unigram distribution on the same validation windows, sliced by AR hit
(:mod:`mixerzoo.evaluation.ar_hits`: the bigram ending at a token occurred earlier in the
window and at most ``max_train_count`` times in training).

Cells (for the claims): ``{"model", "slice", "bpc", "loss", "n_tokens"}`` per model and slice
(``all tokens``, ``AR hits``, ``other tokens``), and ``{"gap", "slice", "gap_bpc"}`` for each
model minus attention; its ``all tokens`` cell also holds ``ar_share``, App. C.1's share of the
whole gap due to AR hits. A model's ``all tokens`` cell holds ``unigram_gain``, the unigram
model's bpc minus its own (above 0: it learned more than character frequencies).
Each number carries its standard error (``se:bpc``, ``se:gap_bpc``, ``se:unigram_gain``):
cluster-robust over the evaluation windows, a gap's from the token-by-token difference of the
two models' losses on the same tokens. ``ar_share`` carries none (a ratio of two gaps).
For a corpus of BPE or word tokens the unit is bits per token (the ``bpc`` cells read "bits").

This lives in ``theory/`` (not ``evaluation/``) because it trains models: evaluation sits below
training in the layers (docs/architecture.md), theory above both.
"""

from __future__ import annotations

import math
import tempfile
import time
from pathlib import Path

from pydantic import Field

from mixerzoo.analysis.outcome import Outcome
from mixerzoo.evaluation.ar_hits import PAPER_MAX_TRAIN_COUNT, evaluate_ar_slices, plot_ar_slices
from mixerzoo.evaluation.lm_runs import load_lm_run
from mixerzoo.studies.lm import common as lm_common
from mixerzoo.studies.lm.common import LMTraining
from mixerzoo.training.lm import train_lm
from mixerzoo.training.lm_config import load_lm_config

STATEMENT = (
    "Zoology Sec. 3: the perplexity gap between attention and gated convolutions (BaseConv) "
    "lies mostly on AR hits, tokens completing a bigram seen earlier in the context; and "
    "(a project check, not a paper claim) attention and CAT language models beat a unigram model clearly."
)

REFERENCE = "attention"  # Zoology Table 1: every gap is to attention
SLICES = ("all tokens", "AR hits", "other tokens")


class LMARGapParams(LMTraining):
    """The shared LM budget (:class:`~mixerzoo.studies.lm.common.LMTraining`), one seed, and the
    evaluation windows and AR-hit slicing."""

    cat_conv_width: int = Field(3, ge=1, description="CAT's filter length W (CAT Sec. 6.1: 3)")
    block_size: int = Field(256, ge=8, description="training context = evaluation window length")
    eval_windows: int = Field(400, ge=1, description="validation windows labelled and scored")
    ngram: int = Field(2, ge=2, description="n of the repeated n-gram (Zoology: bigrams)")
    max_train_count: int | None = Field(
        PAPER_MAX_TRAIN_COUNT,
        ge=0,
        description="AR hits: n-grams seen at most this often in training (Zoology: 1,250)",
    )
    seed: int = Field(0, ge=0, description="model init and data order (the same for every model)")


PARAMS = LMARGapParams


def model_specs(p: LMARGapParams) -> dict[str, tuple[dict, str]]:
    """name -> (mixer spec, positions): Zoology App. E.2 gives positions to attention runs only."""
    return {
        "attention": ({"name": "attention", "num_heads": p.num_heads}, "rope"),
        "base_conv": ({"name": "base_conv"}, "none"),
        "cat": ({"name": "cat", "num_heads": p.num_heads, "conv_width": p.cat_conv_width}, "none"),
    }


def run_config(p: LMARGapParams, mixer: dict, position: str) -> dict:
    """The ``lm train`` run config of one model: the shared budget, this mixer and its positions."""
    return lm_common.run_config(
        p, f"lm-ar-gap-{mixer['name']}", {"mixer": mixer, "position": position}, p.seed
    )


def run(p: LMARGapParams, log=print) -> Outcome:
    models, corpus = {}, None
    with tempfile.TemporaryDirectory(prefix="mixerzoo-lm-ar-gap-") as tmp:
        root = Path(p.runs_dir) if p.runs_dir else Path(tmp)
        for name, (mixer, position) in model_specs(p).items():
            cfg, corpus = load_lm_config(run_config(p, mixer, position))
            t0 = time.perf_counter()
            result = train_lm(cfg, corpus, root / name)
            rate = f"{result.tokens_per_s:,.0f} tokens/s" if result.tokens_per_s else ""
            losses = [h["loss"] for h in result.history if "loss" in h]
            log(
                f"{name}: {result.params:,} params, {result.steps} steps, last training loss "
                f"{losses[-1]:.3f} nats, {time.perf_counter() - t0:.0f} s ({rate})"
            )
            models[name] = load_lm_run(root / name, data_dir=p.data_dir).model
        payload = evaluate_ar_slices(
            models, corpus, p.block_size, p.eval_windows, "val", p.ngram, p.max_train_count, unigram=True
        )
    return outcome_from(payload, log)


def outcome_from(payload: dict, log=print) -> Outcome:
    """The cells, predicted-vs-measured lines and figure of one :func:`evaluate_ar_slices` payload."""
    what = "bpc" if payload["unit"] in ("char", "byte") else "bits per token"
    out = Outcome(axes=["model", "slice", "gap"], metric="bpc")
    rows = {r["slice"]: r for r in payload["slices"] if r["group"] in ("all", "ar")}
    bits = {  # bits per character (char / byte corpora) or per token
        (m, s): (rows[s]["models"][m]["loss"] / math.log(2) if rows[s]["n_tokens"] else None)
        for m in payload["models"]
        for s in SLICES
    }
    _model_cells(out, payload, rows, bits, log)
    _gap_cells(out, payload, rows, bits)
    for m in ("attention", "cat"):
        if m in payload["models"]:
            out.add_line(
                f"{m} vs unigram, validation {what}",
                "clearly lower (project check)",
                f"{_fmt(bits[(m, 'all tokens')])} vs {_fmt(bits[('unigram', 'all tokens')])}",
                log,
            )
    for m in ("base_conv", "cat"):
        if m in payload["models"]:
            _gap_lines(out, payload, rows, bits, m, what, log)
    out.plot = _plotter(payload)
    return out


def _model_cells(out: Outcome, payload: dict, rows: dict, bits: dict, log) -> None:
    """Log each slice's bits per model and add a cell per model and slice."""
    unigram = bits.get(("unigram", "all tokens"))
    for s in SLICES:
        log(
            f"{s:<13} {rows[s]['n_tokens']:>8} tokens ({100 * rows[s]['fraction']:.2f}%): "
            + ", ".join(f"{m} {_fmt(bits[(m, s)])}" for m in payload["models"])
        )
        for m in payload["models"]:
            entry = rows[s]["models"][m]
            out.cells.append(
                {
                    "model": m,
                    "slice": s,
                    "bpc": bits[(m, s)],
                    "loss": entry["loss"],
                    "n_tokens": rows[s]["n_tokens"],
                    "seeds": 1,
                }
                | _errors({"loss": entry.get("loss_se"), "bpc": _in_bits(entry.get("loss_se"))})
                | _unigram_gain(m, s, bits[(m, s)], unigram)
                | (_errors({"unigram_gain": _in_bits(entry.get("unigram_gap_se"))}) if _gain(m, s) else {})
            )


def _gap_cells(out: Outcome, payload: dict, rows: dict, bits: dict) -> None:
    """Add a cell per model other than the reference and slice: its bits minus the reference's."""
    for m in payload["models"]:
        if m == REFERENCE:
            continue
        for s in SLICES:
            cell = {"gap": f"{m} - {REFERENCE}", "slice": s, "gap_bpc": _gap(bits, m, s), "seeds": 1}
            cell |= _errors({"gap_bpc": _in_bits(rows[s]["models"][m].get("gap_se"))})
            if s == "all tokens":  # App. C.1: the share of the whole gap due to AR hits
                cell["ar_share"] = payload["ar_gap_fraction"].get(m)
            out.cells.append(cell)


def _gap_lines(out: Outcome, payload: dict, rows: dict, bits: dict, m: str, what: str, log) -> None:
    """The two lines on model ``m``'s gap to attention: where it lies and the share due to AR hits."""
    gaps = {s: _gap(bits, m, s) for s in ("AR hits", "other tokens")}
    out.add_line(
        f"{m} - attention gap, {what}",
        "largest on AR hits (Zoology Sec. 3)",
        f"AR hits {_fmt(gaps['AR hits'], True)}, other tokens {_fmt(gaps['other tokens'], True)}",
        log,
    )
    share = payload["ar_gap_fraction"].get(m)
    out.add_line(
        f"{m}: share of the gap due to AR hits",
        "82% on average over gated convs (Zoology Sec. 3)",
        "-"
        if share is None
        else f"{100 * share:.1f}% (AR hits are {100 * rows['AR hits']['fraction']:.2f}% of tokens)",
        log,
    )


def _plotter(payload: dict):
    """The outcome's figure: bits per slice of BaseConv against attention (none without BaseConv)."""
    slices, unit = payload["slices"], payload["unit"]

    def plot(folder: Path) -> list[Path]:
        if "base_conv" not in payload["models"]:
            return []
        return [plot_ar_slices(slices, REFERENCE, "base_conv", folder / "zoology-lm-ar-gap.png", unit)]

    return plot


def _gain(model: str, s: str) -> bool:
    """Whether the cell of ``model`` on slice ``s`` carries a ``unigram_gain``."""
    return s == "all tokens" and model != "unigram"


def _unigram_gain(model: str, s: str, bpc: float | None, unigram: float | None) -> dict:
    """``{"unigram_gain": unigram bpc - the model's}`` on the ``all tokens`` slice of a model."""
    if not _gain(model, s) or unigram is None:
        return {}
    return {"unigram_gain": None if bpc is None else unigram - bpc}


def plan_cells(params: dict) -> list[dict]:
    """The axis keys (``model`` / ``gap``, ``slice``) of the cells :func:`run` produces."""
    models = [*model_specs(LMARGapParams.model_validate(params)), "unigram"]
    cells = [{"model": m, "slice": s} for s in SLICES for m in models]
    return cells + [
        {"gap": f"{m} - {REFERENCE}", "slice": s} for m in models if m != REFERENCE for s in SLICES
    ]


def _in_bits(nats: float | None) -> float | None:
    return None if nats is None else nats / math.log(2)


def _errors(errors: dict[str, float | None]) -> dict[str, float]:
    """The ``se:`` keys of a cell for the metrics whose standard error is known (the payload's
    cluster-robust errors over evaluation windows, :func:`~mixerzoo.evaluation.ar_hits.clustered_error`)."""
    return {f"se:{k}": v for k, v in errors.items() if v is not None}


def _gap(bits: dict, m: str, s: str) -> float | None:
    a, b = bits[(m, s)], bits[(REFERENCE, s)]
    return None if a is None or b is None else a - b


def _fmt(v: float | None, sign: bool = False) -> str:
    if v is None:
        return "-"
    return f"{v:+.4f}" if sign else f"{v:.4f}"
