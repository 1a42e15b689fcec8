"""Fig. 3 of ICLL as a checked experiment: n-gram heads in a Transformer trained on RegBench (Sec. 5.1).

    mixerzoo study run icll-fig3            # quick preset: a 4-layer Transformer, short strings
    mixerzoo study run icll-fig3 --preset paper
    mixerzoo study report icll-fig3 --json

ICLL Sec. 5.1 visualizes the attention of an 8-layer, 1-head Transformer trained on RegBench with
N = 2,500 instances: the layer 2 and 3 heads attend to the previous token, and the layer 5 head
"attends to tokens *following* 2-grams matching the most recent 2-gram in the input", selectively
by the 2-gram prefix "rather than the 1-gram prefix or the PFA state". :func:`run` trains every
model of ``models`` in-process on one RegBench training set (the helpers of
:mod:`mixerzoo.analysis.icll_probes`), reads every layer's attention weights
(:func:`~mixerzoo.analysis.model_internals.attention_maps`) on the first ``map_instances``
held-out test instances (new languages) and measures, on query rows sampled from them, where each
head's weight goes.

**Symbols.** Tokens ``1 .. |V|`` are symbols; the separator between strings (``|V| + 1``) and the
padding (0) are not. A query position ``i`` is read when ``i >= min_query``, ``t[i - 1]`` and
``t[i]`` are both symbols (its most recent 2-gram lies inside one string), and each of the bigram,
unigram and state key sets below holds at least one key (so every row has a defined selectivity
on every set and all sets are read on the same rows). ``queries`` of those positions are sampled
per instance (the same positions for every model).

**Key sets** of a query row ``i`` (keys ``j < i`` whose own token ``t[j]`` is a symbol, except
``previous``):

* ``previous``: ``j = i - 1``;
* ``bigram``: ``(t[j - 2], t[j - 1]) = (t[i - 1], t[i])``: the tokens *following* an earlier
  occurrence of the most recent 2-gram (Eq. 10's n-gram head with n = 2);
* ``unigram``: ``t[j - 1] = t[i]`` but ``(t[j - 2], t[j - 1]) != (t[i - 1], t[i])``: tokens
  following the current token only (the 1-gram prefix without the 2-gram);
* ``state``: tokens generated from the PFA state the next token ``t[i + 1]`` is generated from:
  ``g[j] = s[i]``, where ``s[t]`` is the DFA state after reading ``t[..t]`` (RegBench's
  ``state``) and ``g[j] = s[j - 1]`` the state token ``j`` was emitted from (the start state 0
  for ``j = 0``; after a separator the state is the start state). A head that had inferred the
  data-generating process would attend to these keys: their tokens follow the true next-token
  distribution.

**Measures** of a row and key set ``S``: ``mass`` = the row's attention weight on ``S``;
``share`` = ``|S| / (i + 1)``, the mass uniform attention over the ``i + 1`` causal keys would put
there; ``selectivity`` = ``mass / share`` (uniform attention: 1.0; a head that spreads evenly over
``S`` alone: ``1 / share``). For ``previous`` the mass is the weight on position ``i - 1``.

Cells (the claims' input), axes ``variant`` (the model's label), ``layer`` (1 .. n_layers),
``head`` and ``keys`` (``previous``, ``bigram``, ``unigram``, ``state``): ``mass`` and
``selectivity``, each the mean over instances of the instance's mean over its sampled rows, with
``se:`` the standard error of the instances' means (rows of one instance share its context, so
the error is clustered by instance); ``chance:selectivity`` = 1.0 and ``chance:mass`` = the mean
share (uniform attention); ``rows`` and ``instances``. Two summary layers per model, ``head:
best``, with ``best_layer`` / ``best_head``: ``early``, the head of the first half of the layers
(1 .. n_layers // 2) with the largest previous-token mass (Fig. 3 a, b), and ``ngram``, the head
with the largest bigram selectivity among the layers after the first layer holding a
previous-token head (mass >= :data:`PREVIOUS_TOKEN`; layers 2 .. n_layers when there is none),
which also holds ``previous_token_before``: the largest previous-token mass of a head in an
earlier layer (with its ``se:``). Every cell carries the model's RegBench accuracy and TVD and
``model_tvd_gain``: the in-context unigram's TVD on the same test instances minus the model's.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
from pydantic import Field, model_validator

from mixerzoo.analysis.icll_probes import (
    RegBenchModels,
    Trainer,
    _gain,
    family,
    head,
    in_context_unigram_tvd,
    regbench_data,
    run_config,
    train_model,
)
from mixerzoo.analysis.outcome import Outcome
from mixerzoo.tasks.base import TaskData

STATEMENT = (
    "ICLL Sec. 5.1 / Fig. 3: in a Transformer trained on RegBench, heads in early layers attend to "
    "the previous token, and a later head attends to the tokens that follow earlier occurrences of "
    "the most recent 2-gram, selectively by the 2-gram prefix rather than the 1-gram prefix or the "
    "PFA state."
)

KEY_SETS = ("previous", "bigram", "unigram", "state")
MEASURES = ("mass", "selectivity")
SUMMARIES = ("early", "ngram")
#: a previous-token head puts at least this mean weight on position i - 1 (the project's threshold)
PREVIOUS_TOKEN = 0.5
#: test instances per forward pass when the maps are read
MAP_BATCH = 8


class NgramHeadParams(RegBenchModels):
    map_instances: int = Field(200, ge=1, description="held-out test instances whose attention maps are read")
    queries: int = Field(16, ge=1, description="query rows sampled per instance (the same for every model)")
    min_query: int = Field(16, ge=2, description="the earliest query position read (a minimum prefix)")
    figure: str = Field("icll-fig3", pattern=r"^[A-Za-z0-9_.-]+$", description="figure file stem")

    @model_validator(mode="after")
    def _transformers(self) -> NgramHeadParams:
        for label, section in self.models.items():
            if family(section) != "transformer" or isinstance(section.get("mixer"), list):
                raise ValueError(
                    f"models.{label}: one softmax attention mixer in every layer (a Transformer) is read"
                )
            if run_config(self, label).model.n_layers < 2:
                raise ValueError(f"models.{label}: n_layers >= 2 (a 2-gram head needs a layer before it)")
        seq_len = self.task.get("seq_len", 1024)
        if isinstance(seq_len, int) and self.min_query >= seq_len:
            raise ValueError(f"min_query = {self.min_query}: below the task's seq_len = {seq_len}")
        return self


PARAMS = NgramHeadParams


# -- key sets and measures of one instance's rows ----------------------------------------------
def generating_states(states: np.ndarray) -> np.ndarray:
    """The PFA state each token was emitted from: the state after the token before it (0 first)."""
    states = np.asarray(states)
    out = np.zeros_like(states)
    out[..., 1:] = states[..., :-1]
    return out


def key_sets(tokens: np.ndarray, states: np.ndarray, symbol: np.ndarray, queries: np.ndarray) -> dict:
    """``{set: [q, l] bool}``: the keys of each query row in each set (see the module docstring).

    ``tokens``, ``states`` (after each token) and ``symbol`` (whether each token is a symbol): ``[l]``.
    """
    t = np.asarray(tokens)
    sym = np.asarray(symbol, dtype=bool)
    i = np.asarray(queries)[:, None]
    l = t.shape[0]
    j = np.arange(l)[None, :]
    earlier = (j < i) & sym[None, :]
    t1 = np.concatenate([[-1], t[:-1]])  # t[j - 1] (-1: no token)
    t2 = np.concatenate([[-1, -1], t[:-2]])[:l]  # t[j - 2]
    qi = t[i]
    qprev = t[np.maximum(i - 1, 0)]
    follows = earlier & (t1[None, :] == qi) & (j >= 1)
    bigram = follows & (t2[None, :] == qprev) & (j >= 2)
    state = earlier & (generating_states(states)[None, :] == np.asarray(states)[i])
    return {"previous": j == i - 1, "bigram": bigram, "unigram": follows & ~bigram, "state": state}


def eligible_queries(
    tokens: np.ndarray, states: np.ndarray, symbol: np.ndarray, min_query: int
) -> np.ndarray:
    """The positions a query row is read at: ``i >= min_query`` with ``t[i - 1]``, ``t[i]`` symbols and
    non-empty bigram, unigram and state key sets."""
    sym = np.asarray(symbol, dtype=bool)
    pos = np.arange(max(min_query, 1), sym.shape[0])
    pos = pos[sym[pos] & sym[pos - 1]]
    if pos.size == 0:
        return pos
    sets = key_sets(tokens, states, sym, pos)
    full = sets["bigram"].any(axis=1) & sets["unigram"].any(axis=1) & sets["state"].any(axis=1)
    return pos[full]


def row_measures(maps: np.ndarray, queries: np.ndarray, sets: dict) -> dict:
    """``{set: (mass [..., q], share [q])}`` of the query rows of ``maps`` ``[..., l, l]`` (each row
    divided by its sum)."""
    rows = np.asarray(maps, dtype=np.float64)[..., np.asarray(queries), :]
    total = rows.sum(axis=-1, keepdims=True)
    rows = rows / np.where(total > 0, total, 1.0)
    out = {}
    for name, mask in sets.items():
        mass = (rows * mask).sum(axis=-1)
        out[name] = (mass, mask.sum(axis=-1) / (np.asarray(queries) + 1.0))
    return out


def instance_summary(measured: dict) -> dict:
    """``{set: {mass, selectivity, share}}``: one instance's means over its rows (``[...]`` each)."""
    out = {}
    for name, (mass, share) in measured.items():
        out[name] = {
            "mass": mass.mean(axis=-1),
            "selectivity": (mass / share).mean(axis=-1),
            "share": float(share.mean()),
        }
    return out


def combine_instances(per_instance: list[dict]) -> dict:
    """``{set: {measure: (mean [...], se [...])}, share: mean}`` over instances (the error of
    their means, clustered by instance; None for one instance)."""
    out = {}
    for name in per_instance[0]:
        entry: dict = {"share": float(np.mean([p[name]["share"] for p in per_instance]))}
        for measure in MEASURES:
            v = np.stack([p[name][measure] for p in per_instance])  # [instances, ...]
            mean = v.mean(axis=0)
            se = v.std(axis=0, ddof=1) / np.sqrt(v.shape[0]) if v.shape[0] > 1 else None
            entry[measure] = (mean, se)
        out[name] = entry
    return out


# -- the run ------------------------------------------------------------------------------
def symbol_mask(data: TaskData) -> np.ndarray:
    """``[n, l]``: tokens ``1 .. |V|`` (not padding 0, not the separator ``|V| + 1``)."""
    a = int(data.extras["transitions"].shape[2])
    return (data.inputs >= 1) & (data.inputs <= a)


def sample_queries(data: TaskData, p: NgramHeadParams) -> list[np.ndarray]:
    """Up to ``queries`` sorted eligible query positions per instance (drawn once for every model)."""
    rng = np.random.default_rng(p.seed)
    symbol = symbol_mask(data)
    out = []
    for k in range(len(data)):
        pos = eligible_queries(data.inputs[k], data.extras["state"][k], symbol[k], p.min_query)
        if pos.size > p.queries:
            pos = np.sort(rng.choice(pos, size=p.queries, replace=False))
        out.append(pos)
    return out


def model_maps(model, data: TaskData, k: int, count: int):
    """``[count instances]`` of ``[layers, h, l_i, l_i]`` maps from instance ``k`` on (each cut to
    its own length; the model is causal, so cutting the padding changes no row)."""
    import torch

    from mixerzoo.analysis.model_internals import attention_maps

    lengths = data.extras["length"][k : k + count].astype(int)
    ids = torch.as_tensor(data.inputs[k : k + count, : max(int(lengths.max()), 1)], dtype=torch.long)
    maps = attention_maps(model, ids)
    stacked = torch.stack([maps[b] for b in sorted(maps)], dim=1).float().numpy()  # [b, layers, h, l, l]
    return [stacked[r, :, :, : lengths[r], : lengths[r]] for r in range(len(lengths))]


def read_model(model, data: TaskData, queries: list[np.ndarray]) -> tuple[dict | None, tuple | None]:
    """The combined measures of every layer and head over the instances with rows, and the maps
    of the first such instance (drawn in the figure)."""
    symbol = symbol_mask(data)
    per_instance, drawn = [], None
    for k in range(0, len(data), MAP_BATCH):
        batch = list(range(k, min(k + MAP_BATCH, len(data))))
        if not any(queries[r].size for r in batch):
            continue
        for r, maps in zip(batch, model_maps(model, data, k, len(batch))):
            q = queries[r]
            if not q.size:
                continue
            sets = key_sets(
                data.inputs[r, : maps.shape[-1]],
                data.extras["state"][r, : maps.shape[-1]],
                symbol[r, : maps.shape[-1]],
                q,
            )
            per_instance.append(instance_summary(row_measures(maps, q, sets)))
            if drawn is None:
                drawn = (r, maps)
    if not per_instance:
        return None, None
    return combine_instances(per_instance) | {"instances": len(per_instance)}, drawn


def run(p: NgramHeadParams, log=print, trainer: Trainer | None = None) -> Outcome:
    """Train every model, read its attention maps on the test instances and collect the cells."""
    out = Outcome(axes=["variant", "layer", "head", "keys"], metric="selectivity")
    train_data, test_data = regbench_data(p)
    maps_data = head(test_data, p.map_instances)
    queries = sample_queries(maps_data, p)
    rows = int(sum(q.size for q in queries))
    unigram_tvd = in_context_unigram_tvd(test_data)
    log(
        f"in-context unigram: RegBench TVD {unigram_tvd:.3f} on the test instances; maps read at {rows:,} "
        f"query rows of {sum(q.size > 0 for q in queries)} of {len(maps_data)} test instances"
    )
    drawn: dict[str, tuple] = {}
    for label in p.models:
        model, metrics = train_model(p, label, (train_data, test_data), log, trainer=trainer)
        readings, picture = read_model(model, maps_data, queries)
        del model
        base = {
            "variant": label,
            "model_regbench_accuracy": metrics.get("regbench_accuracy"),
            "model_regbench_tvd": metrics.get("regbench_tvd"),
            "unigram_regbench_tvd": unigram_tvd,
            "model_tvd_gain": _gain(unigram_tvd, metrics.get("regbench_tvd")),
        }
        cells = model_cells(p, label, base, readings, rows)
        out.cells.extend(cells)
        _add_lines(out, label, base, cells, log)
        if picture is not None:
            drawn[label] = picture
    out.plot = lambda folder: plot_ngram_heads(out.cells, p, drawn, maps_data, Path(folder))
    return out


def model_cells(p: NgramHeadParams, label: str, base: dict, readings: dict | None, rows: int) -> list[dict]:
    """One model's cells: every (layer, head, key set), then the ``early`` and ``ngram`` heads."""
    n_layers, heads = layer_shape(p, label)
    cells = []
    for layer in range(1, n_layers + 1):
        for h in range(heads):
            for keys in KEY_SETS:
                cell = {**base, "layer": layer, "head": h, "keys": keys, "rows": rows}
                if readings is not None:
                    cell.update(_measured(readings, keys, layer - 1, h))
                cells.append(cell)
    per = {(c["layer"], c["head"], c["keys"]): c for c in cells}
    for summary in SUMMARIES:
        chosen, extra = _choose(summary, per, n_layers, heads) if readings is not None else (None, {})
        for keys in KEY_SETS:
            cell = {**base, "layer": summary, "head": "best", "keys": keys, "rows": rows}
            if chosen is not None:
                src = per[(*chosen, keys)]
                cell.update({k: v for k, v in src.items() if k not in ("layer", "head", "keys")})
                cell.update({"best_layer": chosen[0], "best_head": chosen[1], **extra})
            cells.append(cell)
    return cells


def _measured(readings: dict, keys: str, layer: int, h: int) -> dict:
    r = readings[keys]
    cell = {"instances": readings["instances"], "share": r["share"], "chance:mass": r["share"]}
    for measure in MEASURES:
        mean, se = r[measure]
        cell[measure] = float(mean[layer, h])
        if se is not None:
            cell[f"se:{measure}"] = float(se[layer, h])
    cell["chance:selectivity"] = 1.0
    return cell


def _choose(summary: str, per: dict, n_layers: int, heads: int) -> tuple[tuple[int, int] | None, dict]:
    """The (layer, head) of a summary layer and the fields it adds (see the module docstring)."""
    prev = {
        (layer, h): per[(layer, h, "previous")]["mass"]
        for layer in range(1, n_layers + 1)
        for h in range(heads)
    }
    if summary == "early":
        lower = [(layer, h) for (layer, h) in prev if layer <= max(1, n_layers // 2)]
        return max(lower, key=lambda lh: prev[lh]), {}
    first = min((layer for (layer, _), v in prev.items() if v >= PREVIOUS_TOKEN), default=None)
    start = first + 1 if first is not None and first < n_layers else 2
    later = [(layer, h) for layer in range(start, n_layers + 1) for h in range(heads)]
    chosen = max(later, key=lambda lh: per[(*lh, "bigram")]["selectivity"])
    before = max((lh for lh in prev if lh[0] < chosen[0]), key=lambda lh: prev[lh])
    src = per[(*before, "previous")]
    extra = {"previous_token_before": src["mass"], "previous_token_layer": before[0]}
    if "se:mass" in src:
        extra["se:previous_token_before"] = src["se:mass"]
    return chosen, extra


def layer_shape(p: NgramHeadParams, label: str) -> tuple[int, int]:
    """(layers, heads per layer) of model ``label``."""
    model = run_config(p, label).model
    return model.n_layers, int(model.mixer.params.get("num_heads", 1))


def _add_lines(out: Outcome, label: str, base: dict, cells: list[dict], log) -> None:
    def at(layer: str, keys: str) -> dict:
        return next(c for c in cells if c["layer"] == layer and c["keys"] == keys)

    def shown(c: dict, measure: str) -> str:
        if c.get(measure) is None:
            return "not measured"
        se = c.get(f"se:{measure}")
        return f"{c[measure]:.3f}" + (f" +/- {se:.3f}" if se is not None else "")

    gain, tvd = base["model_tvd_gain"], base["model_regbench_tvd"]
    out.add_line(
        f"{label}: RegBench TVD vs the in-context unigram's",
        "below it (the model learned in context)",
        (
            f"{tvd:.3f} vs {base['unigram_regbench_tvd']:.3f} (gain {gain:+.3f})"
            if gain is not None
            else "no TVD"
        ),
        log,
    )
    early = at("early", "previous")
    out.add_line(
        f"{label}: previous-token head in the first half of the layers",
        f"weight on position i - 1 >= {PREVIOUS_TOKEN} (Fig. 3 a, b)",
        f"layer {early.get('best_layer')} head {early.get('best_head')}: {shown(early, 'mass')}",
        log,
    )
    bigram = at("ngram", "bigram")
    parts = ", ".join(
        f"{keys} {shown(at('ngram', keys), 'selectivity')}" for keys in ("bigram", "unigram", "state")
    )
    out.add_line(
        f"{label}: n-gram head (the largest bigram selectivity after a previous-token layer)",
        "bigram selectivity above 1, above the unigram and the state selectivity (Fig. 3 c)",
        f"layer {bigram.get('best_layer')} head {bigram.get('best_head')}: selectivity {parts}",
        log,
    )


def plan_cells(params: dict) -> list[dict]:
    """The axis keys (``variant``, ``layer``, ``head``, ``keys``) of the cells :func:`run` produces."""
    p = NgramHeadParams.model_validate(params)
    cells = []
    for label in p.models:
        n_layers, heads = layer_shape(p, label)
        points = [(layer, h) for layer in range(1, n_layers + 1) for h in range(heads)]
        points += [(summary, "best") for summary in SUMMARIES]
        cells += [
            {"variant": label, "layer": layer, "head": h, "keys": k} for layer, h in points for k in KEY_SETS
        ]
    return cells


# -- the figure ---------------------------------------------------------------------------
def token_labels(data: TaskData, r: int, length: int) -> list[str]:
    """``a:2``: each token's symbol (``|`` the separator) and the DFA state after it."""
    from mixerzoo.tasks.regbench import symbol_name

    a = int(data.extras["transitions"].shape[2])
    out = []
    for t, s in zip(data.inputs[r, :length], data.extras["state"][r, :length]):
        name = "|" if t == a + 1 else symbol_name(int(t) - 1)
        out.append(f"{name}:{int(s)}")
    return out


def plot_ngram_heads(
    cells: list[dict], p: NgramHeadParams, drawn: dict, data: TaskData, folder: Path
) -> list[Path]:
    """Fig. 3's layout (one test instance, ending at its last query row) for each model's
    previous-token and n-gram heads, and per-layer selectivity bars of every model."""
    from mixerzoo.analysis.model_internals import plot_attention_map

    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for label, (r, maps) in drawn.items():
        end = (
            int(
                eligible_queries(
                    data.inputs[r], data.extras["state"][r], symbol_mask(data)[r], p.min_query
                ).max()
            )
            + 1
        )
        labels = token_labels(data, r, end)
        slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", label)
        for summary, what in (("early", "previous-token head"), ("ngram", "n-gram head")):
            c = next(c for c in cells if c["variant"] == label and c["layer"] == summary)
            layer = c.get("best_layer")
            if layer is None:
                continue
            title = f"{label} layer {layer}, {what} (symbol:state after it)"
            path = folder / f"{p.figure}-{slug}-{summary}-layer{layer}.png"
            paths.append(plot_attention_map(maps[layer - 1, :, :end, :end], labels, path, title=title))
    paths.append(_plot_bars(cells, p, folder))
    return paths


def _plot_bars(cells: list[dict], p: NgramHeadParams, folder: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    models = list(p.models)
    fig, axes = plt.subplots(1, len(models), figsize=(6.0 * len(models), 3.6), squeeze=False)
    width = 0.2
    for ax, label in zip(axes[0], models):
        mine = [c for c in cells if c["variant"] == label and isinstance(c["layer"], int)]
        points = list(dict.fromkeys((c["layer"], c["head"]) for c in mine))
        x = np.arange(len(points))
        for k, keys in enumerate(KEY_SETS):
            by = {(c["layer"], c["head"]): c for c in mine if c["keys"] == keys}
            v = [by[pt].get("selectivity") or np.nan for pt in points]
            e = [by[pt].get("se:selectivity") or 0.0 for pt in points]
            ax.bar(x + (k - 1.5) * width, v, width, yerr=e, label=keys, capsize=2)
        ax.axhline(1.0, color="grey", lw=0.8, ls="--")
        ngram = next((c for c in cells if c["variant"] == label and c["layer"] == "ngram"), {})
        names = [
            f"{layer}" if len(points) == len({pt[0] for pt in points}) else f"{layer}.{h}"
            for layer, h in points
        ]
        ax.set_xticks(x, names)
        shown = [c["selectivity"] for c in mine if c.get("selectivity")]
        if shown and max(shown) / min(shown) > 10:  # a head at 1 and one at 1 / share, both legible
            ax.set_yscale("log")
        ax.set_xlabel("layer" + (f" (n-gram head: {ngram['best_layer']})" if ngram.get("best_layer") else ""))
        ax.set_ylabel("selectivity (uniform attention = 1)")
        ax.set_title(label, fontsize=9)
        ax.legend(fontsize=7)
    fig.suptitle(
        f"ICLL Fig. 3: attention mass / uniform share per key set, N_train = {p.n_train:,}", fontsize=10
    )
    fig.tight_layout()
    path = folder / f"{p.figure}-selectivity.png"
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
