"""What a sweep costs before it starts: the tokens, FLOPs and GPU-hours of every planned run.

Each run is costed as a :class:`TrainedModel` (a model, its training length and tokens), so the
language models and probed models that the other studies train are costed the same way
(``studies/computed/cost.py``).

* **tokens** of a run: the training tokens it reads at most, ``min(epochs x n_train, max_steps x
  batch_size) x seq_len`` (early stopping can only shorten it; evaluation is not counted); for a
  language model ``steps x batch_size x grad_accum x block_size``.
* **FLOPs per token**: ``6 N + 6 n_ctx L d`` (Kaplan et al. 2020, *Scaling Laws for Neural Language
  Models*, Sec. 2.1: the forward pass costs ``2 N + 2 n_layer n_ctx d_attn`` per token and a
  training step three times its forward). ``N`` is the model's parameters without its input
  embeddings (a lookup, not a product), counted on the model built on the ``meta`` device (nothing
  allocated); a head tied to the embedding counts, as the head is a product. The head is counted at
  every position, though token tasks compute it at their supervised positions only. ``n_ctx L d``:
  for each layer whose mixer builds the L x L attention matrix (:data:`QUADRATIC`), sequence length
  times width. Other mixers' length-dependent work (scans, FFTs) is not counted.
* **GPU-hours**: ``FLOPs / (peak x utilisation) / 3600``, ``peak`` the named GPU's dense bfloat16
  tensor-core rate (:data:`GPUS`, from NVIDIA's data sheets; the figures with sparsity are twice
  these). Small models use a GPU far below its peak: the estimate is a floor for them.
"""

from __future__ import annotations

import json
import math
import statistics
import time
from collections.abc import Iterator
from dataclasses import dataclass, fields
from typing import Any

from mixerzoo.config import RunConfig
from mixerzoo.model import ModelConfig
from mixerzoo.registry import ConfigError
from mixerzoo.training.step_times import TIMED_STEPS

#: GPU -> (its name, dense bfloat16 tensor FLOP/s without sparsity), from NVIDIA's data sheets
GPUS: dict[str, tuple[str, float]] = {
    "h100": ("NVIDIA H100 SXM", 989e12),
    "h200": ("NVIDIA H200 SXM", 989e12),
    "a100": ("NVIDIA A100 SXM", 312e12),
    "l4": ("NVIDIA L4", 121e12),
}
DEFAULT_GPU = "h100"
#: share of the peak a run is assumed to reach
DEFAULT_UTILISATION = 0.4
#: mixers whose layer forms the L x L attention matrix (the 6 L d term per token)
QUADRATIC = frozenset({"attention", "cat", "mh_cat", "las_attention"})


@dataclass
class RunCost:
    name: str
    tokens: int
    flops_per_token: float
    flops: float
    gpu_hours: float


@dataclass(frozen=True)
class TrainedModel:
    """One training run to cost: its label, model, training length and training tokens."""

    name: str
    model: ModelConfig
    seq_len: int
    tokens: int


def check_gpu(gpu: str, utilisation: float) -> tuple[str, float]:
    """(GPU name, peak FLOP/s) of ``--gpu``; a GPU not in :data:`GPUS` or a utilisation outside
    (0, 1] is one ConfigError line."""
    if gpu not in GPUS:
        raise ConfigError(f"--gpu {gpu!r}: allowed: {', '.join(GPUS)}")
    if not 0 < utilisation <= 1:
        raise ConfigError(f"--utilisation {utilisation:g}: a fraction of the peak, in (0, 1]")
    return GPUS[gpu]


def train_tokens(cfg: RunConfig) -> int:
    """Training tokens a run reads at most (before any early stop)."""
    tc, seq_len = cfg.train, cfg.data.build_task().seq_len
    examples = tc.epochs * cfg.data.n_train
    if tc.max_steps is not None:
        examples = min(examples, tc.max_steps * tc.batch_size)
    return examples * seq_len


def task_run(cfg: RunConfig) -> TrainedModel:
    """The :class:`TrainedModel` of a task run config (``mixerzoo train``, a sweep's run)."""
    return TrainedModel(cfg.label(), cfg.model, cfg.data.build_task().seq_len, train_tokens(cfg))


def matmul_params(model_cfg: ModelConfig) -> int:
    """Parameters taking part in every token's products: all but the input embeddings (a tied head
    counts), on the model built on the ``meta`` device."""
    import torch

    from mixerzoo.model import build_model

    with torch.device("meta"):
        model = build_model(model_cfg)
    embedded = {id(m.weight) for m in model.modules() if isinstance(m, torch.nn.Embedding)}
    head = getattr(model, "lm_head", None)
    if head is not None:
        embedded.discard(id(head.weight))
    unique = {id(p): p for p in model.parameters()}
    return sum(p.numel() for key, p in unique.items() if key not in embedded)


def model_flops_per_token(model_cfg: ModelConfig, seq_len: int) -> float:
    """Training FLOPs per token: ``6 N + 6 L d`` per attention layer (see the module's text)."""
    attention_layers = sum(spec.name in QUADRATIC for spec in model_cfg.layer_mixers())
    return 6.0 * matmul_params(model_cfg) + 6.0 * attention_layers * seq_len * model_cfg.d_model


def flops_per_token(cfg: RunConfig) -> float:
    """:func:`model_flops_per_token` of a task run config's model at its task's length."""
    return model_flops_per_token(cfg.model, cfg.data.build_task().seq_len)


def planned_flops(cfg: RunConfig) -> float:
    """Training FLOPs a run plans (:func:`train_tokens` x :func:`flops_per_token`): the key a pool
    hands its runs out by, largest first."""
    return train_tokens(cfg) * flops_per_token(cfg)


def run_costs(
    runs: list[TrainedModel], gpu: str = DEFAULT_GPU, utilisation: float = DEFAULT_UTILISATION
) -> list[RunCost]:
    """The :class:`RunCost` of each run (a model is built once per distinct model and length)."""
    _, peak = check_gpu(gpu, utilisation)
    per_token: dict[str, float] = {}
    out = []
    for run in runs:
        key = json.dumps([run.model.model_dump(mode="json"), run.seq_len], sort_keys=True)
        if key not in per_token:
            per_token[key] = model_flops_per_token(run.model, run.seq_len)
        flops = run.tokens * per_token[key]
        out.append(RunCost(run.name, run.tokens, per_token[key], flops, flops / (peak * utilisation) / 3600))
    return out


def sweep_cost(configs: list[RunConfig], gpu: str = DEFAULT_GPU, utilisation: float = DEFAULT_UTILISATION):
    """The :class:`RunCost` of each task run config."""
    check_gpu(gpu, utilisation)  # a bad option is one line before any task is built
    return run_costs([task_run(cfg) for cfg in configs], gpu, utilisation)


def cost_summary(costs: list[RunCost], gpu: str, utilisation: float) -> dict[str, Any]:
    """Totals over ``costs`` and the assumptions they were made under."""
    name, peak = check_gpu(gpu, utilisation)
    return {
        "runs": len(costs),
        "tokens": sum(c.tokens for c in costs),
        "flops": sum(c.flops for c in costs),
        "gpu_hours": sum(c.gpu_hours for c in costs),
        "gpu": name,
        "peak_flops": peak,
        "utilisation": utilisation,
    }


def summary_line(summary: dict[str, Any]) -> str:
    """One line: total tokens, FLOPs and GPU-hours, with the GPU and utilisation assumed."""
    runs = summary["runs"]
    return (
        f"cost: {runs} run{'s' * (runs != 1)}, {summary['tokens']:.3g} tokens, {summary['flops']:.3g} FLOPs, "
        f"{summary['gpu_hours']:.3g} GPU-hours on one {summary['gpu']} at {summary['utilisation']:.0%} of "
        f"its dense bf16 peak ({summary['peak_flops'] / 1e12:g} TFLOP/s); FLOPs/token = 6 N + 6 L d "
        "per attention layer, tokens before early stopping"
    )


#: the model the MAD row of the paper table is planned for: other models scale with their FLOPs per token
MAD_TABLE_MODEL = "attention"
TABLE_HEAD = ("| study | kind | runs | tokens | FLOPs | GPU-hours |", "|---|---|---:|---:|---:|---:|")


def grid_paper_costs(gpu: str, utilisation: float) -> Iterator[tuple[str, str, list[RunCost]]]:
    """(study, kind, costs) of every shipped sweep's ``paper`` preset and MAD's, the latter for
    ``--set model=`` :data:`MAD_TABLE_MODEL`."""
    from mixerzoo.studies import files as study_files
    from mixerzoo.studies.mad.levels import mad_experiment
    from mixerzoo.studies.sweep.config import load_experiment

    for name in study_files.shipped_of_kind("sweep"):
        if "paper" in load_experiment(name).presets:
            yield (
                name,
                "sweep",
                sweep_cost([p.config for p in load_experiment(name, "paper").expand()], gpu, utilisation),
            )
    for name in study_files.shipped_of_kind("mad"):
        exp = mad_experiment(name, "paper", {"model": MAD_TABLE_MODEL})
        yield (
            f"{name} --set model={MAD_TABLE_MODEL}",
            "mad",
            sweep_cost([p.config for p in exp.expand()], gpu, utilisation),
        )


def table_row(study: str, kind: str, costs: list[RunCost] | None, gpu: str, utilisation: float) -> str:
    """One row of the paper table; ``costs`` None: a study that trains nothing."""
    if costs is None:
        return f"| `{study}` | {kind} | no training | - | - | - |"
    total = cost_summary(costs, gpu, utilisation)
    return (
        f"| `{study}` | {kind} | {total['runs']:,} | {total['tokens']:.3g} | {total['flops']:.3g} | "
        f"{total['gpu_hours']:.3g} |"
    )


# -- wall time on this machine ----------------------------------------------------------------
#: seconds a dry run may spend timing models; the models left are scaled from the timed by FLOPs
TIMING_BUDGET_S = 30.0


@dataclass
class WallTime:
    """The expected wall time of runs trained one after another here, and where it came from:
    ``stored`` models timed by finished runs of the store, ``timed`` timed now, ``cached`` timed
    by an earlier dry run, ``scaled`` estimated from those by their FLOPs per step."""

    seconds: float = 0.0
    runs: int = 0
    stored: int = 0
    timed: int = 0
    cached: int = 0
    scaled: int = 0
    busy: int = 0  # models timed while other work kept the CPU busy (their times are too high)
    device: str = "cpu"


def combined(parts: list[WallTime]) -> WallTime:
    """One :class:`WallTime` for several estimates of disjoint runs (e.g. a scorecard's items),
    so that a total is never estimated a second time."""
    out = WallTime(device=parts[0].device if parts else "cpu")
    counts = [f.name for f in fields(WallTime) if f.name != "device"]
    for part in parts:
        for name in counts:
            setattr(out, name, getattr(out, name) + getattr(part, name))
    return out


def timing_group(config: dict[str, Any]) -> str:
    """Runs whose steps take the same time: one model, task, batch size, dtype and device."""
    data, train = config.get("data") or {}, config.get("train") or {}
    what = [config.get("model"), data.get("task"), *(train.get(k) for k in ("batch_size", "dtype", "device"))]
    return json.dumps(what, sort_keys=True, default=str)


def planned_steps(cfg: RunConfig) -> int:
    """The optimizer steps a run takes at most: ``ceil(n_train / batch) x epochs``, capped by
    ``max_steps`` (the training loop's own count)."""
    tc = cfg.train
    total = math.ceil(cfg.data.n_train / tc.batch_size) * tc.epochs
    return total if tc.max_steps is None else min(total, tc.max_steps)


def evaluated_examples(cfg: RunConfig) -> int:
    """Examples a run scores over its training: its evaluations (every ``eval_every`` epochs and
    the last, every ``eval_every_steps`` steps) times its test and validation examples."""
    tc, steps = cfg.train, planned_steps(cfg)
    epochs = math.ceil(steps / math.ceil(cfg.data.n_train / tc.batch_size))
    evaluations = sum(e % tc.eval_every == 0 or e == epochs for e in range(1, epochs + 1))
    if tc.eval_every_steps:
        evaluations += steps // tc.eval_every_steps
    n_valid = cfg.data.n_test if cfg.data.n_valid is None else cfg.data.n_valid
    return evaluations * (cfg.data.n_test + n_valid)


def stored_step_seconds(runs: list) -> dict[str, float]:
    """Timing group -> the median wall seconds per step of the store's finished task runs in it
    (their whole training: making the data and evaluating included)."""
    per_group: dict[str, list[float]] = {}
    for r in runs:
        steps = (r.metrics or {}).get("steps")
        if r.status == "finished" and r.kind == "task" and r.wall_s and isinstance(steps, int) and steps > 0:
            per_group.setdefault(timing_group(r.config), []).append(r.wall_s / steps)
    return {group: statistics.median(values) for group, values in per_group.items()}


def wall_time(
    configs: list[RunConfig], runs: list, budget_s: float = TIMING_BUDGET_S, where=None
) -> WallTime:
    """The :class:`WallTime` of training ``configs`` here, one after another: per step as the
    store's finished ``runs`` of the same timing group took, else as a few steps timed on this
    machine (``training/step_times.py``; ``where``: its cache folder) took, else scaled by FLOPs."""
    return _estimate(configs, stored_step_seconds(runs), budget_s, where)


def _estimate(configs: list[RunConfig], stored: dict[str, float], budget_s: float, where) -> WallTime:
    """:func:`wall_time` with the store's seconds per step by timing group (``stored``) given."""
    from mixerzoo.config import resolve_device

    groups: dict[str, list[RunConfig]] = {}
    for cfg in configs:
        groups.setdefault(timing_group(cfg.model_dump(mode="json")), []).append(cfg)
    device = str(resolve_device(configs[0].train.device)) if configs else "cpu"
    out = WallTime(runs=len(configs), device=device)
    untimed, rate = _timed_groups(groups, stored, out, budget_s, where)
    for cfgs in untimed:
        out.scaled += 1
        out.seconds += sum(planned_steps(c) * _flops_per_step(c) for c in cfgs) * rate
    return out


def pool_wall_time(configs: list[RunConfig], runs: list, workers: int, where=None) -> float:
    """The expected wall time of training ``configs`` in a local pool of ``workers`` processes on
    this CPU: each run's steps as :func:`wall_time` finds them with a worker's share of the cores
    (``threads_per_worker``: timed so, not scaled from an all-core timing), the runs handed out
    longest first, each to the worker that is free first, as the pool does."""
    from mixerzoo.studies.sweep.executors.local import threads_per_worker
    from mixerzoo.training.step_times import torch_threads

    stored = stored_step_seconds(runs)  # read once, not once per run
    with torch_threads(threads_per_worker(workers)):
        seconds = [_estimate([cfg], stored, TIMING_BUDGET_S, where).seconds for cfg in configs]
    free_at = [0.0] * max(1, workers)
    for s in sorted(seconds, reverse=True):
        free_at[free_at.index(min(free_at))] += s
    return max(free_at)


def pool_seconds(configs: list[RunConfig], runs: list, workers: int, sequential: WallTime) -> float:
    """What training ``configs`` in ``workers`` processes takes: on a CPU :func:`pool_wall_time`;
    on a GPU the best case, ``sequential`` (one after another) divided by the workers."""
    if sequential.device != "cpu":
        return sequential.seconds / workers
    return pool_wall_time(configs, runs, workers)


def workers_line(seconds: float, workers: int, device: str = "cpu") -> str:
    """The dry run's line for ``workers`` processes taking ``seconds`` (:func:`pool_seconds`)."""
    from mixerzoo.registry import count
    from mixerzoo.studies.sweep.executors.local import threads_per_worker

    if device != "cpu":
        return (
            f"with {workers} worker processes: at best {duration_text(seconds)}, the runs shared out evenly"
        )
    return (
        f"with {workers} worker processes, each run on {count(threads_per_worker(workers), 'core')} (its "
        f"steps timed so): {duration_text(seconds)}, the runs handed out longest first, every planned "
        "step (early stopping shortens it)"
    )


def _timed_groups(groups, stored, out: WallTime, budget_s: float, where) -> tuple[list, float]:
    """Add the groups the store or a timing covers to ``out``; return the groups left and the
    seconds per FLOP of the timed ones (to scale the rest by)."""
    from mixerzoo.training.step_times import cached_step_time

    start, left, seconds, flops = time.perf_counter(), [], 0.0, 0.0
    for group, cfgs in groups.items():
        if group in stored:
            out.stored += 1
            out.seconds += sum(planned_steps(c) for c in cfgs) * stored[group]
            continue
        if time.perf_counter() - start > budget_s:
            left.append(cfgs)
            continue
        try:
            found, cached = cached_step_time(cfgs[0], where)
        except (ConfigError, RuntimeError, MemoryError, OSError):  # data files absent, out of memory
            left.append(cfgs)
            continue
        out.cached += cached
        out.timed += not cached
        out.busy += found.busy
        out.seconds += sum(
            planned_steps(c) * found.step_s + evaluated_examples(c) * found.eval_s_per_example for c in cfgs
        )
        seconds, flops = seconds + found.step_s, flops + _flops_per_step(cfgs[0])
    return left, seconds / flops if flops else 0.0


def _flops_per_step(cfg: RunConfig) -> float:
    return flops_per_token(cfg) * cfg.data.build_task().seq_len * cfg.train.batch_size


def duration_text(seconds: float) -> str:
    """``~40 s``, ``~14 min``, ``~3.2 h``, ``~5.1 days``."""
    if seconds < 90:
        return f"~{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"~{seconds / 60:.0f} min"
    if seconds < 48 * 3600:
        return f"~{seconds / 3600:.1f} h"
    return f"~{seconds / 86400:.1f} days"


def wall_time_line(configs: list[RunConfig], store=None, est: WallTime | None = None) -> str:
    """The dry run's line: how long training ``configs`` (the runs still to train) takes here,
    one run after another, and what the estimate rests on. ``store``: the results store, or None;
    ``est``: the estimate of ``configs`` where the caller has made it already."""
    if not configs:
        return "expected wall time here: none (no planned run is left to train)"
    if est is None:
        est = wall_time(configs, store.runs(status="finished") if store is not None else [])
    where = "this CPU" if est.device == "cpu" else f"this machine's {est.device}"
    sources = []
    if est.timed or est.cached:
        n = est.timed + est.cached
        timed = f"{TIMED_STEPS} timed steps of each of {n} model{'s' * (n != 1)}"
        sources.append(timed + (f" ({est.cached} timed by an earlier dry run)" if est.cached else ""))
    if est.stored:
        sources.append(f"{est.stored} model{'s' * (est.stored != 1)} as finished runs in the store took")
    if est.scaled:
        sources.append(f"{est.scaled} scaled from those by their FLOPs per step")
    runs = f"{est.runs} run{'s' * (est.runs != 1)}"
    line = (
        f"expected wall time here: at most {duration_text(est.seconds)} for {runs}, one after another "
        f"on {where} (from {'; '.join(sources)}; training and evaluation steps only, every planned "
        "step: early stopping shortens it)"
    )
    if est.busy:
        line += (
            f"; {est.busy} model{'s were' if est.busy != 1 else ' was'} timed while other work kept "
            "the CPU busy, so the estimate is too high: run the dry run again on a quiet machine"
        )
    return line
