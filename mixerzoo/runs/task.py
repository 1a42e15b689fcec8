"""A task run: validated config -> trained model + metrics, recorded in the results store.

``execute_run`` is the one place that ties task training to the store. It checks everything it
can about the config *before* recording anything (so a config error leaves no row), then trains
inside the lifecycle every run goes through (``runs/lifecycle.py``: an attempt of the run, its
heartbeat and tracker), records every evaluation, the checkpoint and the final metrics, and ends
the attempt ``finished``, ``failed`` (an exception, a NaN loss, a full disk) or ``interrupted``
(Ctrl-C, or SIGTERM under :func:`sigterm_as_interrupt`).
"""

from __future__ import annotations

import json
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch

from mixerzoo import checkpoint
from mixerzoo.config import RunConfig
from mixerzoo.evaluation.length_generalization import evaluate_lengths
from mixerzoo.params import validate
from mixerzoo.registry import ConfigError
from mixerzoo.runs.lifecycle import Recording
from mixerzoo.store.errors import StaleAttempt
from mixerzoo.store.records import RunRecord
from mixerzoo.store.results import ResultsStore


class Terminated(KeyboardInterrupt):
    """SIGTERM turned into an exception in the main thread, so it unwinds like Ctrl-C: the run is
    recorded as interrupted instead of being left ``running`` by a process that just vanished."""


@contextmanager
def signal_handlers(handler: Any, *signums: int) -> Iterator[None]:
    """Within the block, ``handler`` handles ``signums``; the previous handlers come back after it.

    Main thread only (Python installs handlers there); elsewhere a no-op.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, handler) for sig in signums}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Within the block, SIGTERM raises :class:`Terminated` (main thread only; a no-op elsewhere)."""

    def handler(signum, frame):
        raise Terminated(f"terminated by signal {signum} (SIGTERM)")

    with signal_handlers(handler, signal.SIGTERM):
        yield


def save_checkpoint(path: Path, model: torch.nn.Module, cfg: RunConfig) -> None:
    """Write the run's config and weights atomically (``mixerzoo/checkpoint.py``'s format)."""
    state = {"config": json.loads(cfg.model_dump_json()), "model": model.state_dict()}
    checkpoint.save_checkpoint(path, "task", state)


def load_checkpoint(path: str | Path) -> tuple[torch.nn.Module, RunConfig]:
    """A task run's model (eval mode, CPU) and config; any problem with the file is one ConfigError line."""
    ckpt = checkpoint.load_checkpoint(path)
    if ckpt.kind != "task":
        raise ckpt.fail(
            "it is a language-model checkpoint (mixerzoo lm train); this command reads task-run checkpoints"
        )
    cfg = checkpoint.task_config(ckpt)
    return checkpoint.model_from_checkpoint(ckpt, cfg.model), cfg


def preflight(cfg: RunConfig) -> None:
    """What ``train`` would refuse before its first step, checked before the store records a run."""
    from mixerzoo.tasks import TASKS
    from mixerzoo.training.train import HEAD_FOR_OUTPUT

    kind = TASKS.get(cfg.data.task.name).output
    if cfg.model.head != HEAD_FOR_OUTPUT[kind]:
        raise ConfigError(
            f"model.head = {cfg.model.head!r}: task {cfg.data.task.name!r} is scored on {kind}, "
            f"which needs head = {HEAD_FOR_OUTPUT[kind]!r}"
        )
    from mixerzoo.training.train import check_fits, resolve_device

    device = resolve_device(cfg.train.device)  # absent here (CUDA, MPS, cuda:N): one line, up front
    check_fits(cfg, cfg.data.build_task(), device)  # sizes that cannot fit, up front


def execute_run(
    config: RunConfig | dict[str, Any],
    store: ResultsStore,
    experiment: str | None = None,
    progress: bool = True,
    data=None,
    raise_errors: bool = True,
    parent_pid: int | None = None,
    overrides: dict[str, Any] | None = None,
    tracking=None,
    on_step=None,
) -> RunRecord:
    """Train one run as a new attempt of its record (config hash + experiment) and record it.

    On failure the attempt ends ``failed`` with its error (re-raised when ``raise_errors``); on
    Ctrl-C / SIGTERM it ends ``interrupted`` and the interrupt is always re-raised. No
    checkpoint or temp file of a failed attempt is left behind. ``parent_pid`` names the sweep
    that spawned this worker process: the attempt's owner dies with it. The returned record is
    the run's (a re-trained finished run stays ``finished``); ``record.last_attempt`` is the
    attempt this call made. The attempt records the fingerprint of the code it runs
    (``fingerprint.py``) and ``overrides``, the ``--set`` overrides its config was made with.
    ``tracking`` (a ``tracking.TrackSpec``) streams the attempt live to TensorBoard / W&B;
    ``on_step(step, loss, lr, total)`` is called after every step (``training/progress.py``).
    """
    cfg = validate(RunConfig, config)
    preflight(cfg)
    dumped = cfg.model_dump(mode="json")
    made = Recording(
        store,
        "task",
        dumped,
        cfg.config_hash(),
        cfg.label(),
        experiment,
        start=True,
        parent_pid=parent_pid,
        overrides=overrides,
        tracking=tracking,
    )
    try:
        with made:
            _train_and_record(cfg, made, progress, data, on_step)
    except StaleAttempt:  # reaped meanwhile: another attempt owns the run now
        if raise_errors:
            raise
    except BaseException as err:  # KeyboardInterrupt / Terminated too: recorded, then re-raised
        if raise_errors or not isinstance(err, Exception) or made.outcome is None:
            raise  # an error the store could not record is raised whatever raise_errors says
    record = store.get(made.run_id)
    assert record is not None
    record.made_attempt = made.attempt
    return record


def _train_and_record(cfg: RunConfig, made: Recording, progress: bool, data, on_step) -> None:
    """Train, recording every evaluation as it comes; save the checkpoint and hand the attempt
    its metrics (the lifecycle ends it ``finished``)."""
    from mixerzoo.runs.tracking import step_hooks
    from mixerzoo.training import train

    ckpt = made.store.checkpoint_path(made.run_id, made.attempt)
    made.partial = ckpt  # removed unless the attempt finishes
    hook = step_hooks(made.tracker, on_step)
    result = train(cfg, on_eval=made.log_eval, progress=progress, data=data, on_step=hook)
    metrics = dict(result.metrics)
    if cfg.data.test_seq_lens:
        metrics.update(evaluate_lengths(result.model, cfg))
    save_checkpoint(ckpt, result.model, cfg)
    made.metrics, made.wall_s, made.params, made.checkpoint = metrics, result.wall_s, result.params, ckpt
