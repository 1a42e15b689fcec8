"""Language models with and without n-gram heads (ICLL Sec. 6 "Language Modeling", Table 2, App. F).

ICLL trains equal-sized (340M) RetNet, GLA and Transformer (Llama) language models with and
without n-gram heads and reports test perplexity (Table 2). "For each base model, we insert two
n-gram head sequences: one replacing the second layer (NGH_1^(1,2,3)), and one replacing the
second-to-last (NGH_-2^(1,2,3))"; one NGH layer plus its MLP is 4 d^2 weights, a bundle of three
12 d^2, "matching the number of parameters of a standard Transformer layer".

Here a base model has ``n_layers`` blocks; its ``+ngh`` variant keeps ``n_layers - 2`` of them
and puts the two bundles where the second and the second-to-last layers were
(``model.ngram_heads``: ``after_layer`` 1 and -1 of the kept layers, ``mlp: true``; the bundle
blocks are :mod:`mixerzoo.mixers.ngram_block`). Every model is trained with one budget
(:class:`~mixerzoo.studies.lm.common.LMBudget`) and scored on the same held-out windows.

Models (``models``): ``BASE`` or ``BASE+nghORDERS`` with BASE one of ``transformer`` (attention
with RoPE, as Llama), ``gla``, ``retnet`` and ORDERS the n of each head of a bundle, e.g.
``transformer+ngh123`` (NGH^(1,2,3), Table 2's main rows) or ``gla+ngh111`` (NGH^(1,1,1)).

Cells (axes ``base``, ``ngh``): ``{"base", "ngh", "model", "loss", "ppl", "bpc" (char / byte
corpora), "params", "ppl_decrease"}``; ``ppl`` is the per-token perplexity exp(loss) and
``ppl_decrease`` = 1 - ppl / ppl(base without heads) (Table 2's "+4.2%"). For a base with both
NGH^(1,2,3) and NGH^(1,1,1): ``{"base", "ngh": "1,2,3 vs 1,1,1", "gain_ratio"}``, the first
decrease over the second; None (not computed) when the second is not an improvement (a decrease
of 0.01% or less): a ratio over a worsening would turn a contradiction into a large number.
"""

from __future__ import annotations

import math
import re

from pydantic import Field, field_validator, model_validator

from mixerzoo.analysis.outcome import Outcome
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
    "ICLL Sec. 6, Table 2: inserting n-gram head bundles NGH_1^(1,2,3) + NGH_-2^(1,2,3) in place "
    "of two layers of an equal-sized RetNet, GLA or Transformer language model lowers its test "
    "perplexity, the most for the Transformer; higher-order heads matter (GLA: perplexity 2.6% lower with "
    "NGH^(1,2,3), 0.7% with NGH^(1,1,1))."
)

BASES = ("transformer", "gla", "retnet")
NONE = "none"
RATIO_CELL = "1,2,3 vs 1,1,1"
MIN_DECREASE = 1e-4  # gain_ratio needs a 1-gram decrease above this (0.01%), else it is None
_NAME = re.compile(r"^(?P<base>[a-z_]+)(\+ngh(?P<orders>[1-9]+))?$")


def parse_model(name: str) -> tuple[str, tuple[int, ...]]:
    """``"gla+ngh123"`` -> ``("gla", (1, 2, 3))``; ``"gla"`` -> ``("gla", ())``."""
    m = _NAME.match(name)
    if m is None or m.group("base") not in BASES:
        raise ValueError(f"{name!r}: expected BASE or BASE+nghORDERS, BASE one of {', '.join(BASES)}")
    return m.group("base"), tuple(int(c) for c in m.group("orders") or "")


def ngh_label(orders: tuple[int, ...]) -> str:
    return ",".join(map(str, orders)) if orders else NONE


class LMNgramHeadsParams(LMBudget):
    n_layers: int = Field(4, ge=4, description="blocks of a base model (the +ngh variant keeps n_layers - 2)")
    models: list[str] = Field(
        default_factory=lambda: ["transformer", "transformer+ngh123"],
        min_length=1,
        description="BASE or BASE+nghORDERS (BASE: transformer, gla, retnet), e.g. gla+ngh111",
    )

    @field_validator("models")
    @classmethod
    def _models(cls, v: list[str]) -> list[str]:
        for name in v:
            parse_model(name)
        if len(set(v)) != len(v):
            raise ValueError("a model is listed twice")
        return v

    @model_validator(mode="after")
    def _bases_present(self) -> LMNgramHeadsParams:
        bases = {parse_model(m)[0] for m in self.models if not parse_model(m)[1]}
        missing = sorted({parse_model(m)[0] for m in self.models} - bases)
        if missing:
            raise ValueError(
                f"models: add the base model {missing[0]!r} that its n-gram variants are compared with"
            )
        return self


PARAMS = LMNgramHeadsParams


def model_specs(p: LMNgramHeadsParams) -> dict[str, dict]:
    """name -> the run config's model section (without vocab_size)."""
    mixers = {
        "transformer": ({"name": "attention", "num_heads": p.num_heads}, "rope"),
        "gla": ({"name": "gla", "num_heads": p.num_heads}, "none"),
        "retnet": ({"name": "retnet", "num_heads": p.num_heads}, "none"),
    }
    out = {}
    for name in p.models:
        base, orders = parse_model(name)
        mixer, position = mixers[base]
        spec = {"mixer": mixer, "position": position}
        if orders:  # Sec. 6: the bundles replace the second and the second-to-last layers
            bundle = {"orders": list(orders), "mlp": True}
            spec["n_layers"] = p.n_layers - 2
            spec["ngram_heads"] = [{"after_layer": 1, **bundle}, {"after_layer": -1, **bundle}]
        out[name] = spec
    return out


def run(p: LMNgramHeadsParams, log=print) -> Outcome:
    losses: dict[str, list[float]] = {}
    window_errors: dict[str, list[float | None]] = {}
    state: dict = {}

    def score(name, seed, model, corpus):
        split, tokens = heldout_tokens(corpus, p.eval_split)
        state.update(unit=corpus.unit, split=split)
        windows = heldout_window_losses(model, tokens, p.block_size, p.eval_tokens)
        losses.setdefault(name, []).append(float(windows.mean()))
        window_errors.setdefault(name, []).append(window_error(windows))

    params = train_models(p, model_specs(p), score, "lm-ngram-heads", log)
    combined = {m: combine_seeds(v, window_errors[m]) for m, v in losses.items()}
    mean = {m: c[0] for m, c in combined.items()}
    errors = {m: (c[1], c[2], len(losses[m])) for m, c in combined.items()}
    log(f"scored on the {state['split']} split, windows of {p.block_size} tokens")
    return outcome_from(mean, state["unit"], params, log, errors=errors)


def outcome_from(
    loss: dict[str, float],
    unit: str,
    params: dict[str, int] | None = None,
    log=print,
    errors: dict[str, tuple[float | None, float | None, int]] | None = None,
) -> Outcome:
    """Cells and lines from each model's mean held-out loss (nats per token); ``errors``: per
    model, the loss's standard error, its sd over seeds and the number of seeds
    (:func:`~mixerzoo.studies.lm.common.combine_seeds`). A cell then carries ``se:loss`` and, by the
    delta method, ``se:ppl_decrease`` (``ppl / ppl_base x sqrt(se^2 + se_base^2)``)."""
    out = Outcome(axes=["base", "ngh"], metric="loss")
    ppl = {m: math.exp(min(v, 700.0)) for m, v in loss.items()}
    decrease: dict[tuple[str, tuple[int, ...]], float] = {}
    for name, v in loss.items():
        base, orders = parse_model(name)
        cell = {"base": base, "ngh": ngh_label(orders), "model": name, "loss": v, "ppl": ppl[name]}
        if unit in ("char", "byte"):
            cell.update(loss_metrics(v, unit))
        if params and name in params:
            cell["params"] = params[name]
        if orders and base in ppl:
            decrease[(base, orders)] = cell["ppl_decrease"] = 1.0 - ppl[name] / ppl[base]
        if errors and name in errors:
            se, sd, seeds = errors[name]
            cell.update(error_cells("loss", se, sd, seeds))
            base_se = errors.get(base, (None,))[0]
            if "ppl_decrease" in cell and se is not None and base_se is not None:
                cell["se:ppl_decrease"] = ppl[name] / ppl[base] * math.hypot(se, base_se)
        out.cells.append(cell)
    what = "bpc" if unit in ("char", "byte") else "ppl"
    for name, v in loss.items():
        base, orders = parse_model(name)
        shown = fmt(v / math.log(2)) if what == "bpc" else fmt(ppl[name], ".3f")
        size = f", {params[name]:,} params" if params and name in params else ""
        change = f" ({100 * decrease[(base, orders)]:+.2f}% perplexity decrease)" if orders else ""
        log(f"{name:<22} {what} {shown}, per-token perplexity {ppl[name]:.4f}{size}{change}")
    for (base, orders), dec in decrease.items():
        out.add_line(
            f"{base} + NGH^({ngh_label(orders)}): perplexity decrease vs {base}",
            "positive (ICLL Table 2: 0.7% to 6.7%)",
            f"{100 * dec:+.2f}%",
            log,
        )
    for base in BASES:
        hi, lo = decrease.get((base, (1, 2, 3))), decrease.get((base, (1, 1, 1)))
        if hi is None or lo is None:
            continue
        ratio = gain_ratio(hi, lo)
        out.cells.append({"base": base, "ngh": RATIO_CELL, "gain_ratio": ratio})
        shown = "not computed: NGH^(1,1,1) did not improve" if ratio is None else f"{ratio:.2f}"
        out.add_line(
            f"{base}: decrease with NGH^(1,2,3) / with NGH^(1,1,1)",
            "about 4x (ICLL Sec. 6; Table 2, GLA: 2.6% / 0.7%)",
            f"{100 * hi:+.2f}% / {100 * lo:+.2f}% = {shown}",
            log,
        )
    return out


def gain_ratio(hi: float, lo: float) -> float | None:
    """``hi / lo``, two perplexity decreases; None when ``lo`` is not an improvement (<= 0.01%)."""
    return hi / lo if lo > MIN_DECREASE else None


def plan_cells(params: dict) -> list[dict]:
    """The axis keys (``base``, ``ngh``) of the cells :func:`run` produces for ``params``."""
    p = LMNgramHeadsParams.model_validate(params)
    parsed = [parse_model(m) for m in p.models]
    cells = [{"base": base, "ngh": ngh_label(orders)} for base, orders in parsed]
    for base in BASES:
        if (base, (1, 2, 3)) in parsed and (base, (1, 1, 1)) in parsed:
            cells.append({"base": base, "ngh": RATIO_CELL})
    return cells
