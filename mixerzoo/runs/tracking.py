"""Live tracking in TensorBoard or Weights & Biases, and the step progress of a sweep's runs.

Off by default: metrics always live in the local results store. With ``--track`` each run streams,
while it trains, its loss and learning rate at every step (``train/loss``, ``train/lr``) and every
evaluation (``eval/<metric>``), then its final metrics (``final/<metric>``), from the process that
trains it (a sweep's worker, a Ray task), so the backend must be installed where runs train. Both
are extras that mixerzoo does not install; enabling one that is missing is a one-line ConfigError.

    mixerzoo study run cat-mqar --track tensorboard --track-dir runs/tb   # tensorboard --logdir runs/tb
    mixerzoo study run cat-mqar --track wandb --track-project my-project  # offline without WANDB_API_KEY

W&B runs offline (``wandb sync <track-dir>/wandb/wandb/offline-run-*`` uploads them later) unless
``--track-mode online`` or ``WANDB_API_KEY`` is set. A run is named after its study and cell. Reading a
step's loss waits for the device, so a tracked run syncs once per step (``training/progress.py``).

What a reader sees while a run trains: TensorBoard's event file is flushed at every evaluation and at
least every 5 s; W&B's offline run file is written by W&B's own process, every 15 s by default
(its ``WANDB__TRANSACTION_LOG_FLUSH_INTERVAL`` setting, in seconds), and online runs stream to the
server as they log.
"""

from __future__ import annotations

import json
import os
import queue
import re
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mixerzoo.registry import ConfigError
from mixerzoo.training.progress import format_progress

TRACKERS = ("tensorboard", "wandb")
MODES = ("online", "offline")


@dataclass(frozen=True)
class TrackSpec:
    """What to stream and where; picklable, so worker processes and Ray tasks open their own runs.

    ``mode`` (W&B): online or offline; None means online when ``WANDB_API_KEY`` is set.
    """

    backends: tuple[str, ...]
    log_dir: str
    project: str = "mixerzoo"
    entity: str | None = None
    mode: str | None = None

    def __post_init__(self) -> None:
        for name in self.backends:
            if name not in TRACKERS:
                raise ConfigError(f"--track {name!r}: allowed: {', '.join(TRACKERS)}")
        if self.mode is not None and self.mode not in MODES:
            raise ConfigError(f"--track-mode {self.mode!r}: allowed: {', '.join(MODES)}")

    def wandb_mode(self) -> str:
        return self.mode or ("online" if os.environ.get("WANDB_API_KEY") else "offline")

    def check(self) -> TrackSpec:
        """Import each backend now, so a missing package is one line before any run starts."""
        for name in self.backends:
            _backend_module(name)
        return self


def _backend_module(name: str):
    try:
        if name == "wandb":
            import wandb

            return wandb
        return summary_writer_class()
    except ImportError:
        raise ConfigError(f"--track {name} needs the {name} package: pip install {name}") from None


def summary_writer_class():
    """TensorBoard's event-file writer (``torch.utils.tensorboard``, which needs ``tensorboard``)."""
    from torch.utils.tensorboard import SummaryWriter

    return SummaryWriter


def _numeric(d: dict[str, Any]) -> dict[str, float]:
    return {k: float(v) for k, v in d.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}


def safe_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.=@-]+", "_", name).strip("_") or "run"


class TensorBoardSink:
    """One event-file folder per attempt: ``<log_dir>/tensorboard/<study>/<name>-<run_id>[-<attempt>]``."""

    def __init__(self, spec: TrackSpec, run: dict[str, Any]) -> None:
        folder = f"{safe_name(run['name'])}-{run['run_id']}" + (
            f"-{run['attempt']}" if run["attempt"] > 1 else ""
        )
        path = Path(spec.log_dir) / "tensorboard" / safe_name(run["group"] or "runs") / folder
        self.writer = summary_writer_class()(log_dir=str(path), flush_secs=5)
        self.writer.add_text("config", f"```\n{json.dumps(run['config'], indent=2, default=str)}\n```")

    def log(self, values: dict[str, float], step: int) -> None:
        for key, value in values.items():
            self.writer.add_scalar(key, value, global_step=step)

    def flush(self) -> None:
        self.writer.flush()

    def finish(self, status: str, error: str | None) -> None:
        self.writer.add_text("status", status + (f": {error}" if error else ""))
        self.writer.close()


class WandbSink:
    """One W&B run per attempt, in the project, entity and mode of the spec, grouped by study."""

    def __init__(self, spec: TrackSpec, run: dict[str, Any]) -> None:
        import wandb

        folder = Path(spec.log_dir) / "wandb"
        folder.mkdir(parents=True, exist_ok=True)
        self.run = wandb.init(
            project=spec.project,
            entity=spec.entity,
            group=run["group"],
            name=run["name"],
            config=run["config"],
            tags=[run["run_id"]],
            dir=str(folder),
            mode=spec.wandb_mode(),
            reinit="finish_previous",  # a sweep's in-process runs follow each other in one process
        )

    def log(self, values: dict[str, float], step: int) -> None:
        self.run.log(values, step=step)

    def flush(self) -> None:
        """Nothing to do here: W&B's own process writes the run's file on its own interval."""

    def finish(self, status: str, error: str | None) -> None:
        self.run.summary.update({"status": status, **({"error": error} if error else {})})
        self.run.finish(exit_code=0 if status == "finished" else 1)


SINKS = {"tensorboard": TensorBoardSink, "wandb": WandbSink}


class RunTracker:
    """One run's live stream into every backend of a spec: :meth:`on_step`, :meth:`on_eval`,
    :meth:`finish`. A backend that fails while the run trains is dropped with one warning line;
    the run itself goes on (its metrics are in the results store either way)."""

    def __init__(self, spec: TrackSpec, run: dict[str, Any], warn=None) -> None:
        self.warn = warn or (lambda msg: print(msg, file=sys.stderr, flush=True))
        self.sinks = []
        for name in spec.backends:
            try:
                self.sinks.append(SINKS[name](spec, run))
            except Exception as err:  # noqa: BLE001 - e.g. W&B online without a login: train untracked
                self.warn(
                    f"tracking: {name} could not start ({type(err).__name__}: {err}); not tracked there"
                )
        self.last_step = 0

    def _each(self, call) -> None:
        for sink in list(self.sinks):
            try:
                call(sink)
            except Exception as err:  # noqa: BLE001 - tracking must never end a run
                self.sinks.remove(sink)
                self.warn(f"tracking: {type(sink).__name__} stopped ({type(err).__name__}: {err})")

    def _send(self, values: dict[str, float], step: int) -> None:
        self._each(lambda sink: sink.log(values, step))

    def on_step(self, step: int, loss: float, lr: float, total: int = 0) -> None:
        self.last_step = step
        self._send({"train/loss": loss, "train/lr": lr}, step)

    def on_eval(self, record: dict[str, Any]) -> None:
        skip = ("step", "epoch")
        values = {f"eval/{k}": v for k, v in _numeric(record).items() if k not in skip}
        self._send(values, int(record.get("step", self.last_step)))
        self._each(lambda sink: sink.flush())  # a reader sees every step up to this evaluation

    def finish(self, status: str, metrics: dict[str, Any] | None = None, error: str | None = None) -> None:
        if metrics:
            self._send({f"final/{k}": v for k, v in _numeric(metrics).items()}, self.last_step)
        for sink in self.sinks:
            try:
                sink.finish(status, error)
            except Exception as err:  # noqa: BLE001
                self.warn(f"tracking: {type(sink).__name__} did not close ({type(err).__name__}: {err})")


def open_run(
    spec: TrackSpec | None, config: dict[str, Any], name: str, run_id: str, attempt: int, group: str | None
) -> RunTracker | None:
    """The tracker of one attempt (None without a spec); named ``<study>: <cell>`` in W&B."""
    if spec is None or not spec.backends:
        return None
    label = f"{group}: {name}" if group else name
    run = {"config": config, "name": label, "run_id": run_id, "attempt": attempt, "group": group}
    return RunTracker(spec, run)


def step_hooks(tracker: RunTracker | None, *hooks):
    """One ``on_step`` calling the tracker's and each given hook (None when there is none)."""
    calls = [h for h in (tracker.on_step if tracker is not None else None, *hooks) if h is not None]
    if not calls:
        return None
    if len(calls) == 1:
        return calls[0]

    def on_step(step: int, loss: float, lr: float, total: int) -> None:
        for call in calls:
            call(step, loss, lr, total)

    on_step.reads_loss = any(getattr(call, "reads_loss", True) for call in calls)
    return on_step


# -- a sweep's progress: each active run's step beside the bar over runs ------------------------
class ProgressSender:
    """In the process that trains: sends ``(name, step, total)`` to ``sink`` (anything with ``put``)
    at most every ``every_s`` seconds, and ``(name, None, None)`` when the run ends. It needs no
    loss, so it costs the training loop no device sync."""

    reads_loss = False

    def __init__(self, sink, name: str, every_s: float = 0.5) -> None:
        self.sink, self.name, self.every_s = sink, name, every_s
        self._sent_at: float | None = None

    def __call__(self, step: int, loss: float, lr: float, total: int) -> None:
        now = time.monotonic()
        if self._sent_at is None or now - self._sent_at >= self.every_s or step == total:
            self._sent_at = now
            self.sink.put((self.name, step, total))

    def done(self) -> None:
        self.sink.put((self.name, None, None))


class ProgressBoard:
    """In the sweep: the active runs' progress, shown as the postfix of the bar over runs.

    ``put`` takes what :class:`ProgressSender` sends (in-process runs call it directly);
    :meth:`drain` reads the multiprocessing queue of worker processes on a daemon thread.
    """

    def __init__(self, bar) -> None:
        self.bar = bar
        self.active: dict[str, tuple[int, int]] = {}
        self._lock = threading.Lock()

    def put(self, item: tuple[str, int | None, int | None]) -> None:
        name, step, total = item
        with self._lock:
            if step is None:
                self.active.pop(name, None)
            else:
                self.active[name] = (step, total or 0)
            text = format_progress(self.active)
        self.bar.set_postfix_str(text, refresh=True)

    def drain(self, q):
        """Read ``q`` on a daemon thread; returns the function that stops the reading, after
        taking what is left in ``q`` (call it once the workers have exited)."""
        stop = threading.Event()

        def loop() -> None:
            while not stop.is_set():
                try:
                    self.put(q.get(timeout=0.2))
                except queue.Empty:
                    continue
                except (EOFError, OSError, ValueError):  # the queue was closed: the sweep is ending
                    return

        thread = threading.Thread(target=loop, daemon=True, name="mixerzoo-sweep-progress")
        thread.start()

        def finish() -> None:
            stop.set()
            thread.join()
            try:
                while True:
                    self.put(q.get(timeout=0.05))
            except (queue.Empty, EOFError, OSError, ValueError):
                return

        return finish
