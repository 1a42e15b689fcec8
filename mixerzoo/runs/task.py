"""A run: validated config -> trained model + metrics, recorded in the results store.

``execute_run`` is the one place that ties training to the store. It checks everything it
can about the config *before* recording anything (so a config error leaves no row), then
starts an attempt of the run, records every evaluation, the checkpoint and the final metrics,
and ends the attempt ``finished``, ``failed`` (an exception, a NaN loss, a full disk) or
``interrupted`` (Ctrl-C, or SIGTERM under :func:`sigterm_as_interrupt`). While it trains, a
heartbeat thread keeps the attempt's lease fresh (``store/results.py``: ownership).
"""

from __future__ import annotations

import json
import signal
import threading
import time
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

import torch

from mixerzoo import __version__, checkpoint
from mixerzoo.config import RunConfig
from mixerzoo.evaluation.length_generalization import evaluate_lengths
from mixerzoo.params import validate
from mixerzoo.registry import ConfigError
from mixerzoo.store.errors import NO_SPACE, NoSpace, out_of_space
from mixerzoo.store.owners import HEARTBEAT_S
from mixerzoo.store.records import RunRecord
from mixerzoo.store.results import Owner, ResultsStore, StaleAttempt


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


@contextmanager
def keep_alive(store: ResultsStore, run_id: str, attempt: int, every: float = HEARTBEAT_S) -> Iterator[None]:
    """Refresh the attempt's heartbeat every ``every`` seconds while the block runs."""
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(every):
            try:
                if not store.heartbeat(run_id, attempt):
                    return  # reaped or ended: nothing left to keep alive
            except Exception:  # noqa: BLE001 - a busy or full disk only ages the lease
                pass

    thread = threading.Thread(target=beat, daemon=True, name="mixerzoo-heartbeat")
    thread.start()
    try:
        yield
    finally:
        stop.set()


def _error_text(err: BaseException) -> str:
    if isinstance(err, KeyboardInterrupt):
        return f"interrupted: {err}" if str(err) else "interrupted: KeyboardInterrupt (Ctrl-C)"
    if out_of_space(err):  # a checkpoint or store write found the disk full
        return f"{NO_SPACE} ({type(err).__name__}: {(str(err).strip().splitlines() or [''])[0][:300]})"
    message = f"{type(err).__name__}: {err}"
    if not isinstance(err, (ValueError, OSError, ConfigError)):
        message += "\n" + "".join(traceback.format_exception(err)[-3:])
    return message


class _Attempt(NamedTuple):
    """The attempt :func:`execute_run` started: its run, number, checkpoint path and dumped config."""

    run_id: str
    attempt: int
    ckpt: Path
    dumped: dict[str, Any]


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
    from mixerzoo.runs.tracking import open_run

    cfg = validate(RunConfig, config)
    preflight(cfg)
    made = _start_attempt(cfg, store, experiment, parent_pid, overrides)
    t0 = time.perf_counter()
    tracker = open_run(tracking, made.dumped, cfg.label(), made.run_id, made.attempt, experiment)
    try:
        with keep_alive(store, made.run_id, made.attempt):
            metrics = _train_and_record(cfg, store, made, tracker, progress, data, on_step)
        if tracker is not None:
            tracker.finish("finished", metrics)
    except StaleAttempt:
        made.ckpt.unlink(missing_ok=True)  # reaped meanwhile: another attempt owns the run now
        if tracker is not None:
            tracker.finish("interrupted", error="another attempt owns the run now")
        if raise_errors:
            raise
    except BaseException as err:  # KeyboardInterrupt / Terminated too: recorded, then re-raised
        _record_failure(store, made, tracker, err, t0)
        if raise_errors or not isinstance(err, Exception):
            raise
    record = store.get(made.run_id)
    assert record is not None
    record.made_attempt = made.attempt
    return record


def _start_attempt(
    cfg: RunConfig,
    store: ResultsStore,
    experiment: str | None,
    parent_pid: int | None,
    overrides: dict[str, Any] | None,
) -> _Attempt:
    """Record a new attempt of the config's run, owned by this process (or the sweep ``parent_pid``)."""
    from mixerzoo.store.fingerprint import code_fingerprint

    dumped = cfg.model_dump(mode="json")
    run_id = store.start_run(
        dumped,
        cfg.config_hash(),
        cfg.label(),
        experiment,
        __version__,
        owner=Owner.current(parent_pid),
        code=code_fingerprint(dumped),
        overrides=overrides,
    )
    attempt = store.current_attempt(run_id)
    return _Attempt(run_id, attempt, store.checkpoint_path(run_id, attempt), dumped)


def _train_and_record(
    cfg: RunConfig, store: ResultsStore, made: _Attempt, tracker, progress: bool, data, on_step
) -> dict[str, Any]:
    """Train, logging every evaluation; save the checkpoint and end the attempt ``finished``."""
    from mixerzoo.runs.tracking import step_hooks
    from mixerzoo.training import train

    def on_eval(record: dict[str, Any]) -> None:
        metrics = {k: v for k, v in record.items() if k not in ("step", "epoch", "wall_s")}
        store.log_eval(
            made.run_id, record["step"], record["epoch"], record["wall_s"], metrics, attempt=made.attempt
        )
        if tracker is not None:
            tracker.on_eval(record)

    hook = step_hooks(tracker, on_step)
    result = train(cfg, on_eval=on_eval, progress=progress, data=data, on_step=hook)
    metrics = dict(result.metrics)
    if cfg.data.test_seq_lens:
        metrics.update(evaluate_lengths(result.model, cfg))
    save_checkpoint(made.ckpt, result.model, cfg)
    store.finish_run(made.run_id, metrics, result.wall_s, result.params, made.ckpt, attempt=made.attempt)
    return metrics


def _record_failure(store: ResultsStore, made: _Attempt, tracker, err: BaseException, t0: float) -> None:
    """End the attempt ``failed`` (or ``interrupted``) with ``err``'s text, its checkpoint removed.

    Raises :class:`NoSpace` when a full disk kept the store from recording a failure, and the
    store's error when the store itself is unusable; an interrupt the store could not record is
    left to the reaper."""
    made.ckpt.unlink(missing_ok=True)
    interrupted = isinstance(err, KeyboardInterrupt)
    if tracker is not None:
        tracker.finish("interrupted" if interrupted else "failed", error=_error_text(err).splitlines()[0])
    try:
        store.fail_run(
            made.run_id,
            _error_text(err),
            time.perf_counter() - t0,
            outcome="interrupted" if interrupted else "failed",
            attempt=made.attempt,
        )
    except ConfigError as store_err:
        if not interrupted and (out_of_space(err) or isinstance(store_err, NoSpace)):
            message = f"run {made.run_id}: {NO_SPACE}; the results store could not record the attempt"
            raise NoSpace(message) from None  # a failed run (exit 1); reaped once this process ends
        if not interrupted:
            raise  # the store itself is unusable: say that
        # interrupted and the store unwritable: the attempt is reaped once this process ends
