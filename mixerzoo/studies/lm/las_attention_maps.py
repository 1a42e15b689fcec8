"""Attention maps of LaS and vanilla attention language models (LaS App. D, Fig. 4).

LaS App. D draws the attention maps of "both the LaS and vanilla attention models across
different layers, with both models based on a BERT-like 12-layer causal model with context length
of 512, trained on Wikitext-103 for next-token prediction with the same training procedure", on
test examples, min-max normalised, and reads them by eye: LaS's maps reach further, "especially
in the upper layers", the vanilla maps stay short-range, and LaS's are smoother.

Here the two models are trained exactly as ``las-lm-text8-enwik8`` trains them (the same run
configs: :func:`mixerzoo.studies.lm.las.model_specs` and :class:`~mixerzoo.studies.lm.common.LMBudget`),
so ``runs_dir`` pointed at the run folders that study kept for the corpus (its ``runs_dir/CORPUS``)
reuses its trained models: a finished run of the same config is resumed at its last step, not
trained again. Each model is then read on ``map_windows`` held-out windows of ``block_size``
tokens: every layer's attention map (:func:`~mixerzoo.analysis.model_internals.attention_maps`),
at ``queries`` query positions per window drawn from ``min_query .. block_size - 1`` (the same
positions for both models), measured by :mod:`mixerzoo.analysis.attention_map_measures`:
``roughness`` (mean |difference| of neighbouring keys' weights; lower is smoother),
``attention_distance`` (mean distance ``i - j`` under the row) and ``far_share`` (mass more than
``far`` positions back).

Cells (axes ``model``, ``layer``): per model and layer group (``all``; ``lower`` and ``upper``: the
first and the second half of the layers), the three measures averaged over the sampled rows
(layers x heads x windows x query positions), each with ``se:<metric>`` (clustered by window: the
rows of one window share its text, so the error is that of the windows' means, sd / sqrt(windows)
of one seed, combined over seeds by :func:`~mixerzoo.studies.lm.common.combine_seeds`) and the
number of rows in ``rows``. The ``all`` cells also hold the held-out ``loss`` (nats per token), ``bpc`` or
``ppl``, and ``unigram_gain``: the training split's unigram loss minus the model's on the same
windows (above 0: the model learned more than symbol frequencies). The cells of model
``las vs attention`` hold ``distance_gain`` and ``far_share_gain``, LaS's number minus vanilla's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np
import torch
from pydantic import Field, model_validator

from mixerzoo.analysis.attention_map_measures import (
    far_share,
    mean_distance,
    plot_map_pair,
    roughness,
    window_mean_and_error,
)
from mixerzoo.analysis.model_internals import attention_maps
from mixerzoo.analysis.outcome import Outcome
from mixerzoo.evaluation.ar_hits import (
    contiguous_windows,
    loss_metrics,
    token_losses,
    unigram_losses,
    window_error,
)
from mixerzoo.studies.lm import las
from mixerzoo.studies.lm.common import LMBudget, combine_seeds, error_cells, heldout_tokens, train_models

STATEMENT = (
    "LaS App. D, Fig. 4: the attention maps of a LaS language model reach further than those of "
    "vanilla attention trained the same way, especially in the upper layers (vanilla attention "
    "focuses on short-range dependencies), and they are smoother."
)

MEASURES = ("roughness", "attention_distance", "far_share")
GROUPS = ("all", "lower", "upper")
GAIN = "las vs attention"
#: gain cell metric -> the measure it subtracts (LaS minus vanilla)
GAINS = {"distance_gain": "attention_distance", "far_share_gain": "far_share"}


class LMAttentionMapsParams(LMBudget):
    models: list[Literal[las.MODELS]] = Field(  # type: ignore[valid-type]
        default_factory=lambda: ["attention", "las"],
        min_length=2,
        description=f"of {', '.join(las.MODELS)}; attention and las are compared",
    )
    position: Literal["learned", "rope", "none"] = Field(
        "learned", description="positions of every model (LaS: a BERT-like model, learned positions)"
    )
    decay_max: float = Field(0.001, ge=0, description="LaS B: alpha_c spans [0, B] (LaS Table 9: 0.001)")
    pool_size: int = Field(3, ge=1, description="LaS average-pooling window P")
    n_layers: int = Field(2, ge=2, description="blocks (two or more: lower and upper layers are compared)")
    map_windows: int = Field(16, ge=1, description="held-out windows of block_size whose maps are read")
    queries: int = Field(32, ge=1, description="query positions sampled per window (all heads and layers)")
    min_query: int = Field(16, ge=1, description="the earliest query position sampled")
    far: int = Field(16, ge=0, description="far_share: the mass on keys more than this far back")
    figure_layer: int = Field(-1, description="the layer drawn (Python index: -1 is the top layer)")
    figure_head: int = Field(-1, description="the head drawn (LaS: the last head decays fastest)")
    figure: str = Field("las-fig4-attention-maps", pattern=r"^[A-Za-z0-9_.-]+$", description="figure stem")

    @model_validator(mode="after")
    def _consistent(self) -> LMAttentionMapsParams:
        if not {"attention", "las"} <= set(self.models):
            raise ValueError(f"models = {self.models}: list attention and las (the maps compared)")
        if self.min_query >= self.block_size or self.far >= self.block_size:
            raise ValueError(
                f"min_query = {self.min_query}, far = {self.far}: each below block_size = {self.block_size}"
            )
        if not -self.n_layers <= self.figure_layer < self.n_layers:
            raise ValueError(f"figure_layer = {self.figure_layer}: a layer of n_layers = {self.n_layers}")
        if not -self.num_heads <= self.figure_head < self.num_heads:
            raise ValueError(f"figure_head = {self.figure_head}: a head of num_heads = {self.num_heads}")
        return self


PARAMS = LMAttentionMapsParams


@dataclass
class MapReadings:
    """What scoring each trained model gathers, per model and seed."""

    unit: str = "char"
    #: (model, group, measure) -> one (mean, se) per seed
    measures: dict[tuple[str, str, str], list[tuple[float, float | None]]] = field(default_factory=dict)
    rows: dict[tuple[str, str], int] = field(default_factory=dict)
    #: model -> one (mean, se) per seed, of the held-out loss and of the unigram gain
    losses: dict[str, list[tuple[float, float | None]]] = field(default_factory=dict)
    gains: dict[str, list[tuple[float, float | None]]] = field(default_factory=dict)
    #: model -> the map drawn (first seed, first window, figure_layer, figure_head), [l, l]
    drawn: dict[str, np.ndarray] = field(default_factory=dict)


def model_specs(p: LMAttentionMapsParams) -> dict[str, dict]:
    """name -> the run config's model section: las-lm-text8-enwik8's, so its run folders are reused."""
    return las.model_specs(p)


def run(p: LMAttentionMapsParams, log=print) -> Outcome:
    readings = MapReadings()

    def score(name, seed, model, corpus):
        score_model(p, readings, name, model, corpus)

    params = train_models(p, model_specs(p), score, f"lm-las-{p.corpus}", log)
    log(f"maps read on {p.map_windows} held-out windows x {p.queries} query positions")
    return outcome_from(readings, p, params, log)


def score_model(p: LMAttentionMapsParams, readings: MapReadings, name: str, model, corpus) -> None:
    """Add one trained model's held-out loss, unigram gain and map measures to ``readings``."""
    _, tokens = heldout_tokens(corpus, p.eval_split)
    readings.unit = corpus.unit
    windows = contiguous_windows(tokens, p.block_size, max(1, p.eval_tokens // p.block_size))
    loss = token_losses(model, windows, max(1, (1 << 13) // p.block_size)).mean(axis=1)
    unigram = unigram_losses(corpus.splits["train"], windows, corpus.vocab_size).mean(axis=1)
    readings.losses.setdefault(name, []).append((float(loss.mean()), window_error(loss)))
    readings.gains.setdefault(name, []).append((float((unigram - loss).mean()), window_error(unigram - loss)))
    samples, drawn = map_samples(p, model, tokens)
    readings.drawn.setdefault(name, drawn)
    n = samples["roughness"].shape[0]
    for group in GROUPS:
        layers = layer_group(n, group)
        for measure, values in samples.items():
            picked = values[layers]
            readings.measures.setdefault((name, group, measure), []).append(window_mean_and_error(picked))
            readings.rows[(name, group)] = picked.size


def layer_group(n_layers: int, group: str) -> slice:
    """The layers of a group: ``all``, ``lower`` (the first half) or ``upper`` (the rest)."""
    if group == "lower":
        return slice(0, n_layers // 2)
    return slice(n_layers // 2, None) if group == "upper" else slice(0, n_layers)


@torch.no_grad()
def map_samples(
    p: LMAttentionMapsParams, model, tokens: np.ndarray
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Each measure on the sampled rows, ``[layers, windows, heads, queries]``, and the drawn map."""
    ids = contiguous_windows(tokens, p.block_size, p.map_windows)[:, : p.block_size]
    rng = np.random.default_rng(0)  # the same query positions for every model and seed
    device = next(model.parameters()).device
    per: dict[str, list[np.ndarray]] = {m: [] for m in MEASURES}
    drawn = None
    for row in ids:
        k = min(p.queries, p.block_size - p.min_query)
        queries = np.sort(rng.choice(np.arange(p.min_query, p.block_size), size=k, replace=False))
        maps = attention_maps(model, torch.from_numpy(row[None]).to(device))
        stacked = np.stack([maps[i][0].float().cpu().numpy() for i in sorted(maps)])  # [layers, h, l, l]
        per["roughness"].append(roughness(stacked, queries))
        per["attention_distance"].append(mean_distance(stacked, queries))
        per["far_share"].append(far_share(stacked, queries, p.far))
        if drawn is None:
            drawn = stacked[p.figure_layer, p.figure_head]
    return {m: np.stack(v, axis=1) for m, v in per.items()}, drawn


def _combined(per_seed: list[tuple[float, float | None]]) -> tuple[float, float | None, float | None]:
    return combine_seeds([m for m, _ in per_seed], [e for _, e in per_seed])


def model_cell(readings: MapReadings, name: str, group: str) -> dict:
    """One model's cell for one layer group (see the module docstring)."""
    cell: dict = {"model": name, "layer": group}
    for measure in MEASURES:
        per_seed = readings.measures[(name, group, measure)]
        mean, se, sd = _combined(per_seed)
        cell[measure] = mean
        cell.update(error_cells(measure, se, sd, len(per_seed)))
    cell["rows"] = readings.rows[(name, group)]
    if group == "all" and name in readings.losses:
        for metric, per_seed in (("loss", readings.losses[name]), ("unigram_gain", readings.gains[name])):
            mean, se, sd = _combined(per_seed)
            cell.update({metric: mean, **error_cells(metric, se, sd, len(per_seed))})
        cell.update(loss_metrics(cell["loss"], readings.unit))
    return cell


def gain_cell(cells: dict[tuple[str, str], dict], group: str) -> dict:
    """LaS's reach minus vanilla's in one layer group, errors added in quadrature."""
    a, b = cells[("las", group)], cells[("attention", group)]
    out: dict = {"model": GAIN, "layer": group, "seeds": min(a["seeds"], b["seeds"])}
    for metric, measure in GAINS.items():
        out[metric] = a[measure] - b[measure]
        sa, sb = a.get(f"se:{measure}"), b.get(f"se:{measure}")
        if sa is not None and sb is not None:
            out[f"se:{metric}"] = math.hypot(sa, sb)
    return out


def outcome_from(readings: MapReadings, p: LMAttentionMapsParams, params: dict | None = None, log=print):
    """Cells, predicted-vs-measured lines and the figure from the readings of every model."""
    out = Outcome(axes=["model", "layer"], metric="attention_distance")
    cells = {(m, g): model_cell(readings, m, g) for m in p.models for g in GROUPS}
    for (m, g), cell in cells.items():
        if params and m in params and g == "all":
            cell["params"] = params[m]
        out.cells.append(cell)
    out.cells.extend(gain_cell(cells, g) for g in GROUPS)
    for (m, g), c in cells.items():
        log(
            f"{m:<9} {g:<5} roughness {c['roughness']:.5f}, distance {c['attention_distance']:.2f}, "
            f"share beyond {p.far} {c['far_share']:.3f} ({c['rows']:,} rows)"
        )
    predicted = {
        "roughness": "LaS lower: smoother (LaS App. D)",
        "attention_distance": "LaS higher: longer range (LaS App. D)",
        "far_share": "LaS higher: longer range (LaS App. D)",
    }
    for g in GROUPS:
        a, b = cells[("las", g)], cells[("attention", g)]
        for measure, words in predicted.items():
            shown = f"{a[measure]:.4f} vs {b[measure]:.4f}"
            out.add_line(f"{g} layers: {measure}, LaS vs vanilla", words, shown, log)
    out.plot = lambda folder: [_draw(readings, p, Path(folder))]
    return out


def _draw(readings: MapReadings, p: LMAttentionMapsParams, folder: Path) -> Path:
    layer = p.figure_layer % p.n_layers
    head = p.figure_head % p.num_heads
    names = {"attention": "vanilla attention", "las": "LaS attention"}
    maps = {f"{names.get(m, m)}, layer {layer}, head {head}": readings.drawn[m] for m in ("attention", "las")}
    title = f"attention maps on a held-out window of {p.block_size} tokens, min-max normalised (LaS Fig. 4)"
    return plot_map_pair(maps, folder / f"{p.figure}.png", title=title)


def plan_cells(params: dict) -> list[dict]:
    """The axis keys (``model``, ``layer``) of the cells :func:`run` produces for ``params``."""
    p = LMAttentionMapsParams.model_validate(params)
    return [{"model": m, "layer": g} for m in [*p.models, GAIN] for g in GROUPS]
