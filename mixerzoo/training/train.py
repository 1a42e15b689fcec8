"""The training loop: AdamW, warmup + decay, epochs over seeded data, periodic evaluation.

Read top to bottom: build data and model, then for each epoch shuffle, step, evaluate,
report through ``on_eval`` (the results store listens there), stop early if asked.

Each evaluation scores the test split and the validation split (``data.n_valid``, a seed stream of
its own); the validation metrics carry the prefix ``valid_`` (``valid_accuracy_per_query``,
``valid_regbench_tvd``). Early stopping reads the validation primary metric only, never the test
split, and a study picks its best run on the ``valid_`` numbers (``studies/sweep/cells.py``).
The last evaluation (the one whose numbers are the run's metrics) also scores the final model on a
fixed subset of the training split as large as the test split (``evaluation/train_subset.py``);
those metrics carry the prefix ``train_`` (``train_regbench_accuracy``), all but the loss: the
training split's loss is the loop's own, ``train_loss`` (the mean over the epoch's batches).

The loss and metrics follow the task's output kind (``Task.output``): next-token
cross-entropy at supervised positions ("tokens"), MSE at masked positions ("regression",
metric R^2) or one cross-entropy per sequence ("classification", metric accuracy).

``train.dtype`` and ``train.compile`` are those of language-model training (``precision.py``: autocast,
loss scaling for float16, ``torch.compile`` of :class:`TaskLoss` with an eager fallback); evaluation
runs eagerly in float32. The training data is moved to the device once when it fits
(:class:`DeviceData`), and a step waits for the device only at evaluations.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
from tqdm.auto import tqdm

from mixerzoo.config import RunConfig, resolve_device
from mixerzoo.evaluation.evaluate import PRIMARY_METRIC, evaluate, regression_outputs
from mixerzoo.evaluation.task_metrics import task_metrics
from mixerzoo.evaluation.train_subset import training_subset
from mixerzoo.model import build_model, count_parameters
from mixerzoo.ops.cross_entropy import linear_cross_entropy
from mixerzoo.registry import ConfigError
from mixerzoo.tasks.base import IGNORE
from mixerzoo.training import precision
from mixerzoo.training.allocator import keep_freed_memory
from mixerzoo.training.memory_bound import check_fits
from mixerzoo.training.progress import StepHook, StepReport
from mixerzoo.training.schedule import lr_factor


class TrainingDiverged(RuntimeError):
    """The loss became NaN or infinite."""


@dataclass
class TrainResult:
    model: torch.nn.Module
    metrics: dict[str, float]
    history: list[dict[str, Any]] = field(default_factory=list)
    wall_s: float = 0.0
    params: int = 0
    steps: int = 0


#: wall-clock measurements among the metrics: the only entries a seeded rerun may change
EVAL_TIME_METRIC = "eval_ms_per_sequence"
TIMING_KEYS = ("wall_s", EVAL_TIME_METRIC)
#: prefix of the metrics measured on the validation split (``valid_accuracy_per_query``, ...)
VALID_PREFIX = "valid_"
#: prefix of the metrics measured on the training subset at the last evaluation (``train_accuracy``)
TRAIN_PREFIX = "train_"
#: a metric of the training subset not recorded: ``train_loss`` is the training loop's mean loss
TRAIN_SPLIT_SKIPPED = ("loss",)


def make_optimizer(model: torch.nn.Module, lr: float, weight_decay: float, betas) -> torch.optim.AdamW:
    """AdamW; weight decay on matrices only (not biases, norms' gains or filters' 1-D params)."""
    params = list({id(p): p for p in model.parameters() if p.requires_grad}.values())
    decay = [p for p in params if p.ndim >= 2]
    no_decay = [p for p in params if p.ndim < 2]
    groups = [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=lr, betas=betas)


def supervised_loss(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy over positions with a label.

    The LM head runs only on the supervised rows of the hidden states: the loss is the same
    as masking full (b, l, V) logits, but the head costs (#supervised x d x V) instead of
    (b x l x d x V), which is most of the step for MQAR with V = 8192. The head and the
    loss are fused (``ops/cross_entropy.py``); the head has no bias, so its weight is all.
    For the same reason the last block computes its outputs only at those rows
    (``LanguageModel.features(x, rows=...)``).
    """
    sel = y != IGNORE
    return linear_cross_entropy(model.features(x, rows=sel), model.lm_head.weight, y[sel])


def regression_loss(
    model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, mask: torch.Tensor
) -> torch.Tensor:
    """Mean squared error over the scored positions (``mask``) of real-valued targets."""
    return torch.nn.functional.mse_loss(regression_outputs(model, x, y)[mask], y[mask])


def classification_loss(
    model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, mask: torch.Tensor | None
) -> torch.Tensor:
    """Mean cross-entropy of one class per sequence (features pooled over ``mask``)."""
    return torch.nn.functional.cross_entropy(model(x, mask=mask), y)


def auxiliary_loss(modules: list[torch.nn.Module]) -> torch.Tensor | None:
    """Sum of the ``aux_loss`` the mixers set in their last forward (e.g. sparse attention's
    selection-sparsity loss l_f, Zoology Sec. 5); None when no mixer set one."""
    terms = [m.aux_loss for m in modules if m.aux_loss is not None]
    return torch.stack(terms).sum() if terms else None


class TaskLoss(nn.Module):
    """(x, y, mask) -> the training loss of the task's output kind plus the mixers' weighted
    auxiliary losses; one module, so that ``train.compile`` compiles the whole forward."""

    def __init__(self, model: nn.Module, kind: str, aux_weight: float = 1.0) -> None:
        super().__init__()
        self.model, self.kind, self.aux_weight = model, kind, aux_weight
        self.aux_modules = [m for m in model.modules() if hasattr(m, "aux_loss")]

    def forward(self, x: torch.Tensor, y: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        if self.kind == "tokens":
            loss = supervised_loss(self.model, x, y)
        elif self.kind == "regression":
            loss = regression_loss(self.model, x, y, mask)
        else:
            loss = classification_loss(self.model, x, y, mask)
        aux = auxiliary_loss(self.aux_modules)
        return loss if aux is None else loss + self.aux_weight * aux


#: share of a GPU's free memory the training arrays may take to be kept there for the whole run
RESIDENT_FRACTION = 0.25


def fits_on(device: torch.device, nbytes: int) -> bool:
    """Whether ``nbytes`` of training data may live on ``device`` for the run: on CUDA, at most
    :data:`RESIDENT_FRACTION` of its free memory; elsewhere (CPU, MPS: unified memory) always."""
    if device.type != "cuda":
        return True
    free, _ = torch.cuda.mem_get_info(device)
    return nbytes <= RESIDENT_FRACTION * free


class DeviceData:
    """A split's tensors, moved to the training device once when they fit (:func:`fits_on`), else
    kept on the host: :meth:`take` then gathers on the device with no copy, or copies the batch."""

    def __init__(self, tensors: list[torch.Tensor | None], device: torch.device, fits: bool | None = None):
        nbytes = sum(t.nbytes for t in tensors if t is not None)
        self.device = device
        self.where = device if (fits_on(device, nbytes) if fits is None else fits) else torch.device("cpu")
        self.tensors = [None if t is None else t.to(self.where) for t in tensors]

    def take(self, idx: torch.Tensor) -> list[torch.Tensor | None]:
        """The rows ``idx`` (a tensor on :attr:`where`) of every tensor, on the training device."""
        rows = [None if t is None else t[idx] for t in self.tensors]
        if self.where == self.device:
            return rows
        return [None if t is None else t.to(self.device, non_blocking=True) for t in rows]


def train_step(
    loss_fn: nn.Module,
    batch: list[torch.Tensor | None],
    opt: torch.optim.Optimizer,
    scaler: torch.amp.GradScaler,
    params: list[nn.Parameter],
    grad_clip: float | None,
    amp: torch.dtype | None,
) -> torch.Tensor:
    """One optimizer step on ``batch`` (x, y, mask) under ``amp`` autocast; the loss, detached (no
    host sync: the caller reads it at its logging interval)."""
    with precision.autocast(batch[0].device, amp):
        loss = loss_fn(*batch)
    opt.zero_grad(set_to_none=True)
    scaler.scale(loss).backward()
    precision.optimizer_step(opt, scaler, params, grad_clip)
    return loss.detach()


def _warn(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


#: the model head each task output kind needs
HEAD_FOR_OUTPUT = {"tokens": "lm", "regression": "regression", "classification": "classification"}


def _check_head(cfg: RunConfig, kind: str) -> None:
    """Refuse (ConfigError) a model head that does not fit the task's output kind."""
    if cfg.model.head != HEAD_FOR_OUTPUT[kind]:
        raise ConfigError(
            f"model.head = {cfg.model.head!r}: task {cfg.data.task.name!r} is scored on {kind}, "
            f"which needs head = {HEAD_FOR_OUTPUT[kind]!r}"
        )


#: how the tasks read from files expose a split's rows (``tasks/sequential_images.py``:
#: ``split_rows``; ``lra_text.py``: ``split_docs``; ``lra_retrieval.py``: ``load``), each returning
#: a tuple whose last element holds the split's labels; a generated task has none of them
SPLIT_READERS = ("split_rows", "split_docs", "load")


def rows_held(task: Any, split: str) -> int | None:
    """How many examples ``split`` of a task read from files holds; None for a generated task,
    which draws as many as it is asked for."""
    for name in SPLIT_READERS:
        reader = getattr(task, name, None)
        if callable(reader):
            return len(reader(split)[-1])
    return None


def validation_size(cfg: RunConfig, task: Any) -> int:
    """Examples of the validation split: ``data.n_valid``; left out, as many as the test split
    (``data.n_test``), or all the validation split holds where a task read from files holds fewer
    (8x8 digits: 180 validation images beside 359 test images)."""
    if cfg.data.n_valid is not None:
        return cfg.data.n_valid
    held = rows_held(task, "valid")
    return cfg.data.n_test if held is None else min(cfg.data.n_test, held)


def _make_split(cfg: RunConfig, task: Any, split: str) -> Any:
    """The ``split`` ("train", "test" or "valid") :class:`TaskData` of the data section, from its
    seed; None for a validation split of no examples (``data.n_valid = 0``)."""
    sizes = {"train": cfg.data.n_train, "test": cfg.data.n_test}
    n = sizes[split] if split in sizes else validation_size(cfg, task)
    return task.make(n, cfg.data.seed, split) if n > 0 else None


def _as_tensors(split: Any) -> list[torch.Tensor | None]:
    """A :class:`TaskData`'s (inputs, labels, mask) as tensors on its arrays (mask None if it has none)."""
    mask = None if split.mask is None else torch.from_numpy(split.mask)
    return [torch.from_numpy(split.inputs), torch.from_numpy(split.labels), mask]


@dataclass
class _Trainer:
    """The model, its loss (compiled or eager), optimizer and lr schedule of one :func:`train` call."""

    model: nn.Module
    params: list[nn.Parameter]
    eager_fn: TaskLoss
    step_fn: nn.Module
    compiling: bool
    amp: torch.dtype | None
    scaler: torch.amp.GradScaler
    opt: torch.optim.Optimizer
    sched: torch.optim.lr_scheduler.LambdaLR
    total: int
    n: int
    kind: str
    device: torch.device


def _build_trainer(cfg: RunConfig, kind: str, device: torch.device, n: int) -> _Trainer:
    """Seed and build the model, its loss, optimizer and the lr schedule over the run's steps."""
    tc = cfg.train
    torch.manual_seed(tc.seed)
    model = build_model(cfg.model).to(device)
    params = list(model.parameters())
    eager_fn = TaskLoss(model, kind, tc.aux_loss_weight)
    step_fn = precision.compile_module(eager_fn) if tc.compile else eager_fn
    amp = precision.amp_dtype(tc.dtype, device)
    scaler = precision.grad_scaler(device, amp)
    opt = make_optimizer(model, tc.lr, tc.weight_decay, tc.betas)
    total = math.ceil(n / tc.batch_size) * tc.epochs
    if tc.max_steps is not None:
        total = min(total, tc.max_steps)
    warmup = int(tc.warmup_frac * total)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: lr_factor(s, total, warmup, tc.schedule, tc.min_lr_frac)
    )
    return _Trainer(
        model=model,
        params=params,
        eager_fn=eager_fn,
        step_fn=step_fn,
        compiling=tc.compile,
        amp=amp,
        scaler=scaler,
        opt=opt,
        sched=sched,
        total=total,
        n=n,
        kind=kind,
        device=device,
    )


def _step(
    tr: _Trainer, batch: list[torch.Tensor | None], grad_clip: float | None
) -> tuple[torch.Tensor, float]:
    """One optimizer step and one of the schedule -> (the loss, detached; the lr the step used)."""
    if tr.compiling:  # the first step compiles, or falls back to eager with one warning line
        loss, tr.step_fn = precision.first_step_or_eager(
            lambda f: train_step(f, batch, tr.opt, tr.scaler, tr.params, grad_clip, tr.amp),
            tr.step_fn,
            tr.eager_fn,
            tr.opt,
            _warn,
        )
        tr.compiling = False
    else:
        loss = train_step(tr.step_fn, batch, tr.opt, tr.scaler, tr.params, grad_clip, tr.amp)
    lr = tr.opt.param_groups[0]["lr"]
    tr.sched.step()
    return loss, lr


@dataclass
class _Scored:
    """A split the model is scored on at each evaluation: its :class:`TaskData` and its tensors."""

    data: Any
    tensors: list[torch.Tensor | None]

    @classmethod
    def of(cls, data: Any) -> _Scored | None:
        return None if data is None else cls(data, _as_tensors(data))


@dataclass
class _Run:
    """One :func:`train` call's loop: its trainer, data, reporting and what it has recorded so far."""

    cfg: RunConfig
    task: Any
    trainer: _Trainer
    resident: DeviceData
    test: _Scored
    valid: _Scored | None
    train_subset: _Scored
    report: StepReport
    on_eval: Callable[[dict[str, Any]], None] | None
    t0: float
    step: int = 0
    history: list[dict[str, Any]] = field(default_factory=list)
    metrics: dict[str, Any] = field(default_factory=dict)


def _score(run: _Run, split: _Scored, timed: bool = False) -> dict[str, float]:
    """The metrics of the output kind and the task's own (e.g. RegBench Eq. 8-9) on ``split``;
    ``timed``: with the inference cost per sequence (CAT Sec. 5: Landmark CAT vs CAT)."""
    tc, tr = run.cfg.train, run.trainer
    x, y, mask = split.tensors
    t_eval = time.perf_counter()
    metrics = evaluate(tr.model, tr.kind, x, y, mask, tc.eval_batch_size, tr.device)
    if timed:
        metrics[EVAL_TIME_METRIC] = 1000 * (time.perf_counter() - t_eval) / x.shape[0]
    metrics.update(task_metrics(run.task, tr.model, split.data))
    return metrics


def _train_split_metrics(run: _Run) -> dict[str, float]:
    """The model's metrics on the fixed training subset, ``train_``-prefixed (its loss left out)."""
    scored = _score(run, run.train_subset)
    return {TRAIN_PREFIX + k: v for k, v in scored.items() if k not in TRAIN_SPLIT_SKIPPED}


def _evaluate_now(run: _Run, epoch: int, train_loss: float, last: bool = False) -> bool:
    """Evaluate on the test and validation splits, record, report; True when the early-stop
    target is reached on the validation split (the test split never stops a run). The run's last
    evaluation (``last``, or the one that stops it) also scores the training subset."""
    tc, tr = run.cfg.train, run.trainer
    primary = PRIMARY_METRIC[tr.kind]
    metrics = _score(run, run.test, timed=True)
    if run.valid is not None:
        metrics.update({VALID_PREFIX + k: v for k, v in _score(run, run.valid).items()})
    # early_stop_accuracy applies to the kind's primary metric (R^2 for regression), on validation
    target = tc.early_stop_accuracy
    stop = target is not None and metrics[VALID_PREFIX + primary] >= target
    if last or stop:
        metrics.update(_train_split_metrics(run))
    run.metrics = {"train_loss": train_loss, **metrics}
    record = {"epoch": epoch, "step": run.step, "wall_s": time.perf_counter() - run.t0, **run.metrics}
    run.history.append(record)
    shown = {
        name: f"{run.metrics[name]:.3f}" for name in (primary, VALID_PREFIX + primary) if name in run.metrics
    }
    run.report.show(loss=f"{train_loss:.3f}", **shown)
    if run.on_eval is not None:
        run.on_eval(record)
    return stop


def _run_epoch(run: _Run, epoch: int, order_gen: torch.Generator) -> tuple[float, bool]:
    """One epoch's steps, with the evaluations due inside it -> (its mean train loss, early stop reached)."""
    tc, tr = run.cfg.train, run.trainer
    perm = torch.randperm(tr.n, generator=order_gen).to(run.resident.where)  # one copy per epoch
    loss_sum = torch.zeros((), device=tr.device)
    n_batches = 0
    stop = False
    for start in range(0, tr.n, tc.batch_size):
        if run.step >= tr.total:
            break
        loss, lr = _step(tr, run.resident.take(perm[start : start + tc.batch_size]), tc.grad_clip)
        loss_sum += loss
        n_batches += 1
        run.step += 1
        run.report.bar.update(1)
        run.report(run.step, loss, loss_sum / n_batches, lr)
        end_of_epoch = start + tc.batch_size >= tr.n or run.step >= tr.total
        if tc.eval_every_steps and run.step % tc.eval_every_steps == 0 and not end_of_epoch:
            if _evaluate_now(run, epoch, (loss_sum / n_batches).item()):
                stop = True
                break
    return (loss_sum / max(n_batches, 1)).item(), stop


def _splits(cfg: RunConfig, task: Any, data: tuple[Any, ...] | None) -> tuple[Any, _Scored, _Scored | None]:
    """(train data, the test split, the validation split or None): ``data``'s, the rest generated.

    The train and test splits come from their own seed streams, exactly as before a validation
    split existed. Early stopping needs a validation split (ConfigError without one)."""
    if data is None:
        data = (_make_split(cfg, task, "train"), _make_split(cfg, task, "test"))
    if len(data) == 2:
        data = (*data, _make_split(cfg, task, "valid"))
    train_data, test_data, valid_data = data
    if cfg.train.early_stop_accuracy is not None and valid_data is None:
        raise ConfigError(
            f"train.early_stop_accuracy reads the validation split, and task {cfg.data.task.name!r} "
            "holds no validation examples here (data.n_valid, or the task's valid_fraction, is 0); "
            "give it some or drop early_stop_accuracy"
        )
    return train_data, _Scored(test_data, _as_tensors(test_data)), _Scored.of(valid_data)


def train(
    cfg: RunConfig,
    on_eval: Callable[[dict[str, Any]], None] | None = None,
    progress: bool = True,
    data: tuple[Any, ...] | None = None,
    on_step: StepHook | None = None,
) -> TrainResult:
    """Train ``cfg`` and return the model with its final test metrics (and the validation and
    ``train_`` metrics of that last evaluation).

    ``data`` may pass pre-built (train, test) or (train, test, valid) :class:`TaskData` to skip
    generation (a missing validation split is made from the config: :func:`validation_size`).
    ``on_step(step, loss, lr, total)`` is called after every optimizer step (``progress.py``).
    """
    tc = cfg.train
    t0 = time.perf_counter()
    keep_freed_memory()
    device = resolve_device(tc.device)
    task = cfg.data.build_task()
    check_fits(cfg, task, device)
    train_data, test, valid = _splits(cfg, task, data)
    subset = training_subset(train_data, len(test.data), cfg.data.seed)  # the train_ metrics' examples
    on_train = _Scored(subset, _as_tensors(subset))
    kind = task.output
    _check_head(cfg, kind)
    train_tensors = _as_tensors(train_data)
    resident = DeviceData(train_tensors, device)
    tr = _build_trainer(cfg, kind, device, train_tensors[0].shape[0])
    order_gen = torch.Generator().manual_seed(tc.seed)
    bar = tqdm(total=tr.total, desc=cfg.label(), disable=not progress, leave=False, unit="step")
    report = StepReport(bar, on_step, tr.total)
    run = _Run(cfg, task, tr, resident, test, valid, on_train, report, on_eval, t0)
    tr.model.train()
    for epoch in range(1, tc.epochs + 1):
        train_loss, stop = _run_epoch(run, epoch, order_gen)
        if not math.isfinite(train_loss):
            bar.close()
            raise TrainingDiverged(f"loss became {train_loss} in epoch {epoch} (step {run.step})")
        if stop:
            break
        last = epoch == tc.epochs or run.step >= tr.total
        on_step_grid = bool(tc.eval_every_steps) and run.step % tc.eval_every_steps == 0
        due = epoch % tc.eval_every == 0 or last or on_step_grid
        if due and _evaluate_now(run, epoch, train_loss, last):
            break
        if run.step >= tr.total:
            break
    bar.close()
    return TrainResult(
        model=tr.model,
        metrics={**run.metrics, "epochs": epoch, "steps": run.step},
        history=run.history,
        wall_s=time.perf_counter() - t0,
        params=count_parameters(tr.model),
        steps=run.step,
    )
