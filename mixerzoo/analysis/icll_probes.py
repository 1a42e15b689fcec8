"""Figs. 4 and 6 of ICLL as a checked experiment: probing trained ICLL models (Sec. 5.2, App. E).

    mixerzoo study run icll-fig4            # quick preset: small models, short RegBench strings
    mixerzoo study run icll-fig6            # the same probes, more training instances (Fig. 6)
    mixerzoo study report icll-fig4 --json

:func:`run` trains every model of the figure in-process on RegBench with the project's training
loop (one data set for all models: ``n_train`` training instances, as Fig. 4's N_train = 2,500
and Fig. 6's 40,000), reads each model's residual stream after every layer (layer 0: the
embeddings) on its own training instances and on held-out test instances, and fits one probe per
(model, layer, task) with :mod:`mixerzoo.analysis.probes` (App. E: the probe is trained on hidden
states of the training set and scored on the test set). Tasks: n-gram ``count`` / ``frequency``
(relative error, lower is better) and ``existence`` (accuracy) for each order in ``orders``, and
DFA ``state`` equivalence (accuracy).

Cells (the claims' input), axes ``variant`` (the model's label), ``task`` (``frequency-2``,
``state``, ...) and ``layer`` (an int, or ``"best"``: Sec. 5.2, "In Figure 4, we display the result
for each task and model at the best layer"); the metric is ``relative_error`` or ``accuracy``.
Each cell also carries ``family`` (``transformer`` when every layer's mixer is attention, else
``other``), which claims select on without pairing by it, the probed model's own RegBench scores
and ``model_tvd_gain``: the in-context unigram's RegBench TVD on the same test instances minus
the model's (above 0: the model predicts better than the symbol frequencies of its context).

Hidden states of at most ``probe_instances`` instances per split are kept (``[n, l, d]`` per
layer; the paper's 2,500 x 1,024 x 256 floats per layer would not fit in memory), and probe
samples are drawn from those instances.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import Field, field_validator, model_validator

from mixerzoo.analysis.outcome import Outcome
from mixerzoo.params import Params
from mixerzoo.registry import count
from mixerzoo.tasks.base import TaskData

STATEMENT = (
    "ICLL Sec. 5.2 / Figs. 4, 6: frequency probes on Transformers substantially outperform probes "
    "trained on other models; not so for unnormalized counts; n-gram existence and DFA-state "
    "equivalence decode more accurately from Transformers (best layer per model and task)."
)

ProbeTarget = Literal["count", "frequency", "existence", "state"]

#: the training section every model shares unless ``train`` overrides a key (ICLL App. B Table 3)
DEFAULT_TRAIN: dict[str, Any] = {
    "epochs": 200,
    "batch_size": 32,
    "lr": 2.5e-4,
    "weight_decay": 0.1,
    "betas": [0.9, 0.99],
    "schedule": "cosine",
    "min_lr_frac": 0.1,
    "warmup_frac": 0.05,
    "device": "cpu",
}


class RegBenchModels(Params):
    """The trained models shared by Figs. 4-6: RegBench data, model sections, training section."""

    task: dict[str, Any] = Field(
        default_factory=lambda: {"name": "regbench", "preset": "paper"},
        description="the RegBench task section (data.task of a run config)",
    )
    n_train: int = Field(2500, ge=1, description="N_train (Figs. 4-5: 2,500; Fig. 6: 40,000)")
    n_test: int = Field(500, ge=1, description="held-out instances (new languages) for probes / TVD")
    d_model: int = Field(256, ge=1, description="model width of every model without its own d_model")
    models: dict[str, dict[str, Any]] = Field(
        min_length=1, description="label -> model section (mixer, n_layers, position, ...) of a run config"
    )
    train: dict[str, Any] = Field(default_factory=dict, description="overrides of DEFAULT_TRAIN")
    seed: int = Field(0, ge=0, description="data, initialization and probe seed")

    @field_validator("task")
    @classmethod
    def _regbench(cls, task: dict[str, Any]) -> dict[str, Any]:
        if task.get("name") != "regbench":
            raise ValueError(
                f"task.name = {task.get('name')!r}: these analyses read RegBench (name: regbench)"
            )
        return task

    @model_validator(mode="after")
    def _configs_valid(self):
        from mixerzoo.registry import ConfigError

        for label in self.models:
            try:  # a bad model / train key: one line, before any training
                run_config(self, label)
            except ConfigError as err:
                raise ValueError(f"models.{label}: {err}") from None
        return self


def run_config(p: RegBenchModels, label: str, seed: int | None = None):
    """The validated RunConfig of model ``label`` (``seed``: its init / batch-order seed)."""
    from mixerzoo.config import load_run_config

    model = {"d_model": p.d_model, "state_mixer": "mlp", **p.models[label]}
    train = {**DEFAULT_TRAIN, **p.train, "seed": p.seed if seed is None else seed}
    return load_run_config(
        {
            "name": f"icll {label}",
            "data": {"task": p.task, "n_train": p.n_train, "n_test": p.n_test, "seed": p.seed},
            "model": model,
            "train": train,
        }
    )


def family(model_section: dict[str, Any]) -> str:
    """``transformer`` when every layer's mixer is softmax attention, else ``other``."""
    mixers = model_section.get("mixer", "attention")
    mixers = mixers if isinstance(mixers, list) else [mixers]
    names = [m if isinstance(m, str) else m.get("name") for m in mixers]
    return "transformer" if all(n == "attention" for n in names) else "other"


def regbench_data(p: RegBenchModels) -> tuple[TaskData, TaskData]:
    """(train, test) RegBench data, generated once and shared by every model."""
    cfg = run_config(p, next(iter(p.models)))
    task = cfg.data.build_task()
    return task.make(p.n_train, p.seed, "train"), task.make(p.n_test, p.seed, "test")


#: ``trainer(cfg, data) -> (model, metrics, how)``: trains a run config on ``data`` or finds it
#: trained (a study passes one that keeps every model as a run of its results folder, so a model
#: another study trained with the same config is read back, not trained again); ``how`` is the
#: log line's verb ("trained", "reused run ...")
Trainer = Callable[[Any, tuple[TaskData, TaskData]], tuple[Any, dict[str, Any], str]]


def train_here(cfg, data: tuple[TaskData, TaskData]) -> tuple[Any, dict[str, Any], str]:
    """The default :data:`Trainer`: train in this process with :func:`mixerzoo.training.train.train`."""
    from mixerzoo.training.train import train

    result = train(cfg, progress=False, data=data)
    how = f"trained ({result.params:,} parameters, {result.steps} steps, {result.wall_s:.0f} s)"
    return result.model.cpu().eval(), result.metrics, how


def train_model(
    p: RegBenchModels,
    label: str,
    data: tuple[TaskData, TaskData],
    log,
    seed: int | None = None,
    trainer: Trainer | None = None,
):
    """Model ``label`` trained on ``data`` by ``trainer`` (default: :func:`train_here`); (model, metrics)."""
    cfg = run_config(p, label, seed)
    model, m, how = (trainer or train_here)(cfg, data)
    log(
        f"{label} ({count(cfg.model.n_layers, 'layer')}) {how}: RegBench accuracy "
        f"{m.get('regbench_accuracy', float('nan')):.3f}, TVD {m.get('regbench_tvd', float('nan')):.3f}"
    )
    return model, m


def head(data: TaskData, k: int) -> TaskData:
    """The first ``k`` instances (every per-instance extra cut alike)."""
    if k >= len(data):
        return data
    return TaskData(data.inputs[:k], data.labels[:k], {key: v[:k] for key, v in data.extras.items()})


# -- probe samples, drawn once per task and shared by every model and layer ---------------
class CountTable:
    """In-context n-gram counts ``[n, l, v]`` of every instance, computed once (batched).

    :func:`mixerzoo.analysis.probes.sample_ngram_queries` recounts each sampled instance's prefix
    at every rejection round; drawing the same random numbers against this table gives the same
    samples (``tests/analysis/test_icll_experiments.py``) at a fraction of the cost.
    """

    def __init__(self, data: TaskData, n: int) -> None:
        from mixerzoo.baselines.counts import ngram_counts

        a = int(data.extras["transitions"].shape[2])
        self.n = n
        self.counts = ngram_counts(data.inputs, n, a + 2, a + 1, string_padding=False).numpy()

    def sample(self, data: TaskData, target: str, num: int, rng: np.random.Generator):
        """``NGramSamples`` exactly as ``sample_ngram_queries(data, n, target, num, rng)`` draws them."""
        from mixerzoo.analysis.probes import sample_ngram_queries

        def counts_at(rows: np.ndarray, pos: np.ndarray) -> np.ndarray:
            return self.counts[rows, pos].astype(np.float64)

        return sample_ngram_queries(data, self.n, target, num, rng, counts_at=counts_at)


def fit_ngram_probe(
    h_train, train_samples, h_test, test_samples, target, probe, steps, seed, vocab, n, valid=None
):
    """``(metric, value, evidence)``: :func:`mixerzoo.analysis.probes.ngram_probe`'s fit and score on
    given samples; ``evidence`` is the cell's noise (``n_test``: the test instances the samples come
    from; ``se:<metric>``: the error of the mean over the samples with the instances as the units,
    since one language's positions are not independent draws) and, with
    ``valid`` (hidden states, samples of validation instances), the probe's score there
    (``valid_<metric>``: what picks a model's best layer)."""
    import torch

    from mixerzoo.analysis.probes import LinearNGramProbe, MLPNGramProbe, _train

    tr = train_samples
    torch.manual_seed(seed)
    model = (LinearNGramProbe if probe == "linear" else MLPNGramProbe)(h_train.shape[-1], vocab, n)
    h_tr = torch.as_tensor(h_train[tr.row, tr.pos]).float()
    y_tr = torch.as_tensor(tr.target).float()
    q_tr = torch.as_tensor(tr.query)
    if probe == "linear":  # existence: least squares on 0/1, "exists" where the read-out passes 1/2
        model = model.fit(h_tr, q_tr, y_tr - (0.5 if target == "existence" else 0.0))
    else:
        model = _train(model, (h_tr, q_tr), y_tr, "bce" if target == "existence" else "mse", steps, seed)
    metric, value, evidence = _probe_score(model, h_test, test_samples, target)
    if valid is not None:
        evidence[f"valid_{metric}"] = _probe_score(model, valid[0], valid[1], target)[1]
    return metric, value, evidence


def _probe_score(model, hidden, samples, target: str) -> tuple[str, float, dict[str, Any]]:
    """A fitted n-gram probe's metric on ``samples`` of ``hidden`` and its noise (an accuracy's
    chance level too: the share of the commonest answer among the test samples)."""
    import torch

    from mixerzoo.analysis.probes import instance_noise, majority_share

    with torch.no_grad():
        h = torch.as_tensor(hidden[samples.row, samples.pos]).float()
        pred = model(h, torch.as_tensor(samples.query)).double().numpy()
    if target == "existence":
        hits = ((pred > 0) == (samples.target > 0.5)).astype(np.float64)
        evidence = noise_evidence(*instance_noise(hits, samples.row), "accuracy")
        return "accuracy", float(hits.mean()), {**evidence, "chance:accuracy": majority_share(samples.target)}
    errors = np.abs(pred - samples.target) / samples.target  # Sec. 5.2 metric
    noise = noise_evidence(*instance_noise(errors, samples.row), "relative_error")
    return "relative_error", float(errors.mean()), noise


def noise_evidence(n_test: int, se: float | None, metric: str) -> dict[str, Any]:
    """A probe cell's evidence size (:func:`mixerzoo.analysis.probes.instance_noise`): ``n_test``
    and, when there is one, ``se:<metric>``."""
    return {"n_test": n_test, **({f"se:{metric}": se} if se is not None else {})}


# -- Figs. 4 / 6 ---------------------------------------------------------------------------
class ProbeParams(RegBenchModels):
    targets: list[ProbeTarget] = Field(
        ["count", "frequency", "existence", "state"], min_length=1, description="probe tasks (Fig. 4 a-c)"
    )
    orders: list[int] = Field([1, 2, 3], min_length=1, description="n of the n-gram probes")
    probe: Literal["mlp", "linear"] = Field("mlp", description="App. E's MLP, or a closed-form linear probe")
    probe_steps: int = Field(
        40000, ge=1, description="MLP probe steps of batch 64 (App. E: 1,000 epochs of N_train samples)"
    )
    probe_train: int = Field(4000, ge=10, description="probe training samples (from training instances)")
    probe_test: int = Field(1000, ge=10, description="probe test samples (from test instances)")
    probe_instances: int = Field(
        500, ge=1, description="instances per split whose hidden states are kept (memory)"
    )
    figure: str = Field("icll-probes", pattern=r"^[A-Za-z0-9_.-]+$", description="figure file stem")

    @field_validator("orders")
    @classmethod
    def _orders(cls, orders: list[int]) -> list[int]:
        if min(orders) < 1:
            raise ValueError("n-gram orders start at 1")
        return orders


PARAMS = ProbeParams


def probe_tasks(p: ProbeParams) -> list[tuple[str, int | None]]:
    return [(t, n) for t in p.targets if t != "state" for n in p.orders] + [("state", None)] * (
        "state" in p.targets
    )


def run(p: ProbeParams, log=print, trainer: Trainer | None = None) -> Outcome:
    """Train every model (by ``trainer``), probe each of its layers on every task and collect the cells."""
    from mixerzoo.analysis.probes import model_hidden_states

    out = Outcome(axes=["variant", "task", "layer"], metric="relative_error")
    train_data, test_data = regbench_data(p)
    tr, te = head(train_data, p.probe_instances), head(test_data, p.probe_instances)
    va = valid_instances(p, p.probe_instances)
    samples = _ngram_samples(p, tr, te, va)
    unigram_tvd = in_context_unigram_tvd(test_data)
    log(f"in-context unigram: RegBench TVD {unigram_tvd:.3f} on the test instances")
    for label, section in p.models.items():
        model, metrics = train_model(p, label, (train_data, test_data), log, trainer=trainer)
        h_tr, h_te = model_hidden_states(model, tr), model_hidden_states(model, te)
        h_va = model_hidden_states(model, va)
        del model
        per_task = _probe_layers(p, (h_tr, tr), (h_te, te), (h_va, va), samples)
        base = {
            "variant": label,
            "family": family(section),
            "n_layers": len(h_tr) - 1,
            "model_regbench_accuracy": metrics.get("regbench_accuracy"),
            "model_regbench_tvd": metrics.get("regbench_tvd"),
            "model_tvd_gain": _gain(unigram_tvd, metrics.get("regbench_tvd")),
        }
        del h_tr, h_te, h_va
        _add_task_cells(out, p, base, per_task, log)
    out.plot = lambda folder: plot_probes(out.cells, p, folder)
    return out


def valid_instances(p: RegBenchModels, k: int) -> TaskData:
    """``k`` validation instances (languages of neither the training nor the test split): where a
    probe's best layer is chosen, so that the test instances only report it."""
    return run_config(p, next(iter(p.models))).data.build_task().make(k, p.seed, "valid")


def _ngram_samples(p: ProbeParams, tr: TaskData, te: TaskData, va: TaskData) -> dict:
    """(target, n) -> (train, test, validation samples) of every n-gram task, shared by all models and
    layers; the validation samples come from a generator of their own (the others are unchanged by them)."""
    from mixerzoo.analysis.probes import validation_rng

    samples = {}
    for target, n in probe_tasks(p):
        if target != "state":
            rng = np.random.default_rng(p.seed)
            tables = (CountTable(tr, n), CountTable(te, n))
            samples[target, n] = (
                tables[0].sample(tr, target, p.probe_train, rng),
                tables[1].sample(te, target, p.probe_test, rng),
                CountTable(va, n).sample(va, target, p.probe_test, validation_rng(p.seed)),
            )
    return samples


def _probe_layers(
    p: ProbeParams, train: tuple, test: tuple, valid: tuple, samples: dict
) -> dict[str, list[tuple]]:
    """task -> [(layer, metric, value, evidence)]: a probe per layer and task on ``(hidden states,
    data)`` pairs; ``evidence``: the cell's noise and the probe's validation score
    (:func:`fit_ngram_probe`)."""
    from mixerzoo.analysis.probes import state_probe

    (h_tr, tr), (h_te, te), (h_va, va) = train, test, valid
    vocab = int(tr.extras["transitions"].shape[2]) + 2
    per_task: dict[str, list[tuple[int, str, float]]] = {}
    for k in range(len(h_tr)):
        for target, n in probe_tasks(p):
            if target == "state":
                r = state_probe(
                    h_tr[k],
                    tr,
                    h_te[k],
                    te,
                    p.probe,
                    p.probe_train,
                    p.probe_test,
                    p.probe_steps,
                    p.seed,
                    k,
                    valid=(h_va[k], va),
                )
                evidence = {**noise_evidence(r.n_test, r.se, r.metric), f"valid_{r.metric}": r.valid_value}
                evidence["chance:accuracy"] = r.chance  # App. E's balanced pairs: about 0.5
                per_task.setdefault(r.task, []).append((k, r.metric, r.value, evidence))
                continue
            s_tr, s_te, s_va = samples[target, n]
            metric, value, evidence = fit_ngram_probe(
                h_tr[k],
                s_tr,
                h_te[k],
                s_te,
                target,
                p.probe,
                p.probe_steps,
                p.seed,
                vocab,
                n,
                valid=(h_va[k], s_va),
            )
            per_task.setdefault(f"{target}-{n}", []).append((k, metric, value, evidence))
    return per_task


def _add_task_cells(out: Outcome, p: ProbeParams, base: dict, per_task: dict, log) -> None:
    """One model's cells (every layer, and the best: the layer best on the validation instances, its
    test score reported) and a line per task."""
    for task, values in per_task.items():
        metric = values[0][1]
        pick = min if metric == "relative_error" else max
        best_layer, _, best, best_evidence = pick(values, key=lambda v: v[3][f"valid_{metric}"])
        for k, _, v, evidence in values:
            out.cells.append({**base, "task": task, "layer": k, metric: v, **evidence})
        best_cell = {"layer": "best", metric: best, "best_layer": best_layer, **best_evidence}
        out.cells.append({**base, "task": task, **best_cell})
        out.add_line(
            f"{base['variant']} {task} ({p.probe} probe)",
            "lower for Transformers" if metric == "relative_error" else "higher for Transformers",
            f"best layer on validation {best_layer}: {metric} {best:.4f} (test); per layer "
            + ", ".join(f"{v:.3f}" for _, _, v, _ in values),
            log,
        )


def in_context_unigram_tvd(test: TaskData) -> float:
    """RegBench TVD (Eq. 9) of the in-context unigram (the 1-gram baseline of App. C.1) on ``test``."""
    from mixerzoo.baselines import build_baseline
    from mixerzoo.evaluation.regbench_metrics import score_distributions

    return score_distributions(build_baseline("ngram", n=1).distributions(test), test)["tvd"]


def _gain(unigram_tvd: float, model_tvd: float | None) -> float | None:
    return None if model_tvd is None else unigram_tvd - model_tvd


def plan_cells(params: dict) -> list[dict]:
    """The axis keys (``variant``, ``task``, ``layer``) of the cells :func:`run` produces."""
    p = ProbeParams.model_validate(params)
    tasks = [f"{t}-{n}" if n is not None else t for t, n in probe_tasks(p)]
    cells = []
    for label in p.models:
        layers = [*range(run_config(p, label).model.n_layers + 1), "best"]  # layer 0: the embeddings
        cells += [{"variant": label, "task": task, "layer": k} for task in tasks for k in layers]
    return cells


def plot_probes(cells: list[dict], p: ProbeParams, folder: Path) -> list[Path]:
    """Per-layer probe curves, one panel per task, one line per model (best layer: a larger marker)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    tasks = list(dict.fromkeys(c["task"] for c in cells))
    models = list(p.models)
    cols = min(4, len(tasks))
    rows = -(-len(tasks) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.6 * cols, 3.0 * rows), squeeze=False)
    for ax, task in zip(axes.flat, tasks):
        for label in models:
            pts = sorted(
                (c["layer"], c.get("relative_error", c.get("accuracy")))
                for c in cells
                if c["task"] == task and c["variant"] == label and c["layer"] != "best"
            )
            best = [c for c in cells if c["task"] == task and c["variant"] == label and c["layer"] == "best"]
            if not pts:
                continue
            (line,) = ax.plot(*zip(*pts), "-o", ms=3, label=label)
            if best:
                b = best[0]
                ax.plot(
                    b["best_layer"],
                    b.get("relative_error", b.get("accuracy")),
                    "*",
                    ms=10,
                    color=line.get_color(),
                )
        metric = "accuracy" if task.startswith(("existence", "state")) else "relative error"
        ax.set_title(task, fontsize=9)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("layer (0 = embeddings)")
        ax.set_ylabel(f"{metric} ({'higher' if metric == 'accuracy' else 'lower'} is better)", fontsize=8)
    for ax in list(axes.flat)[len(tasks) :]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=7)
    fig.suptitle(f"ICLL probes ({p.probe}), N_train = {p.n_train:,}; * = best layer", fontsize=10)
    fig.tight_layout()
    folder.mkdir(parents=True, exist_ok=True)
    paths = [folder / f"{p.figure}.png"]
    for path in paths:
        fig.savefig(path, dpi=120)
    plt.close(fig)
    return paths
