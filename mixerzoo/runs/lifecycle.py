"""The one lifecycle of every run in the results store: task runs, language-model runs, computed results.

    with Recording(store, "lm", cfg.model_dump(mode="json"), cfg.config_hash(), "kjv") as rec:
        result = train_lm(cfg, corpus, out_dir, on_start=rec.start)
        rec.metrics, rec.params, rec.checkpoint = result.metrics, result.params, out_dir / CHECKPOINT

:class:`Recording` makes one attempt of the run (config hash, study) around the block, with the
fingerprint of the code it runs: :meth:`~Recording.start` records the attempt, opens its live
tracker (``runs/tracking.py``) and starts a heartbeat thread that keeps the attempt's lease fresh
(``store/results.py``: ownership); leaving the block ends the attempt ``finished`` with what the
block set, ``failed`` with the error of an exception (a NaN loss, a full disk), or ``interrupted``
on Ctrl-C or SIGTERM (``runs.task.Terminated``); the error propagates. Running the same config
again (a task run trained again, a resumed language model, a theory check run again) adds an
attempt to the same run.
"""

from __future__ import annotations

import threading
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from mixerzoo import __version__
from mixerzoo.registry import ConfigError
from mixerzoo.store.errors import NO_SPACE, NoSpace, StaleAttempt, out_of_space
from mixerzoo.store.owners import HEARTBEAT_S, Owner
from mixerzoo.store.results import ResultsStore

#: what a stale attempt's tracker is told: the reaper ended it, and another attempt owns the run
STALE = "another attempt owns the run now"


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


def error_text(err: BaseException) -> str:
    """What the store records of a failed or interrupted attempt (a traceback tail for a bug)."""
    if isinstance(err, KeyboardInterrupt):
        return f"interrupted: {err}" if str(err) else "interrupted: KeyboardInterrupt (Ctrl-C)"
    if out_of_space(err):  # a checkpoint or store write found the disk full
        return f"{NO_SPACE} ({type(err).__name__}: {(str(err).strip().splitlines() or [''])[0][:300]})"
    message = f"{type(err).__name__}: {err}"
    if not isinstance(err, (ValueError, OSError, ConfigError)):
        message += "\n" + "".join(traceback.format_exception(err)[-3:])
    return message


class Recording:
    """One attempt of the run (``config_hash``, ``study``) of ``kind``, around a ``with`` block.

    :meth:`start` begins the attempt (``start=True`` does it on entering the block); the block
    sets ``metrics``, ``params``, ``checkpoint``, ``output``, ``wall_s`` (default: the time since
    :meth:`start`) and ``evals`` (rows with a ``step``, recorded as the attempt's history when it
    finishes), or records each evaluation as it comes (:meth:`log_eval`). ``partial`` names a file
    of the attempt that is removed unless the attempt finishes. An error before :meth:`start` (a
    user mistake found while setting up) records nothing; ``store`` may be a function that opens
    the store when the attempt starts, so that such a mistake does not even create it.

    ``parent_pid``: the process (a sweep) whose death ends the attempt's owner too; ``overrides``:
    the ``--set`` overrides the config was made with; ``tracking`` (a ``tracking.TrackSpec``):
    stream the attempt live, grouped under ``group`` (default: the study).
    """

    def __init__(
        self,
        store: ResultsStore | Callable[[], ResultsStore],
        kind: str,
        config: dict[str, Any],
        config_hash: str,
        name: str | None,
        study: str | None = None,
        start: bool = False,
        *,
        parent_pid: int | None = None,
        overrides: dict[str, Any] | None = None,
        tracking=None,
        group: str | None = None,
    ) -> None:
        self.store, self.kind, self.config, self.config_hash = store, kind, config, config_hash
        self.name, self.study, self._start_now = name, study, start
        self.parent_pid, self.overrides = parent_pid, overrides
        self.tracking, self.group = tracking, study if group is None else group
        self.run_id: str | None = None
        self.attempt: int | None = None
        self.tracker = None
        self.metrics: dict[str, Any] = {}
        self.params: int | None = None
        self.checkpoint: str | Path | None = None
        self.output: str | Path | None = None
        self.wall_s: float | None = None
        self.evals: list[dict[str, Any]] = []
        self.partial: Path | None = None
        #: how leaving the block was recorded: finished, failed, interrupted (None: not recorded)
        self.outcome: str | None = None
        self._stack = ExitStack()
        self._t0 = 0.0

    def start(self, *_: Any) -> None:
        """Begin the attempt (the run is created if new), open its tracker, keep its heartbeat fresh."""
        from mixerzoo.runs.tracking import open_run
        from mixerzoo.store.fingerprint import code_fingerprint

        if not isinstance(self.store, ResultsStore):
            self.store = self.store()
        self.run_id = self.store.start_run(
            self.config,
            self.config_hash,
            self.name,
            self.study,
            __version__,
            owner=Owner.current(self.parent_pid),
            kind=self.kind,
            code=code_fingerprint(self.config),
            overrides=self.overrides,
        )
        self.attempt = self.store.current_attempt(self.run_id)
        self._t0 = time.perf_counter()
        name = self.name or self.kind
        self.tracker = open_run(self.tracking, self.config, name, self.run_id, self.attempt, self.group)
        self._stack.enter_context(keep_alive(self.store, self.run_id, self.attempt))

    def track_step(self, step: int, loss: float, lr: float, total: int) -> None:
        """Stream one training step to the attempt's tracker (if it has one)."""
        if self.tracker is not None:
            self.tracker.on_step(step, loss, lr, total)

    def track_eval(self, row: dict[str, Any]) -> None:
        """Stream one evaluation to the attempt's tracker (if it has one)."""
        if self.tracker is not None:
            self.tracker.on_eval(row)

    def log_eval(self, row: dict[str, Any]) -> None:
        """Record one evaluation now (``step``, ``epoch``, ``wall_s`` and its metrics) and stream it."""
        metrics = {k: v for k, v in row.items() if k not in ("step", "epoch", "wall_s")}
        wall_s = row.get("wall_s", time.perf_counter() - self._t0)
        self.store.log_eval(self.run_id, row["step"], row.get("epoch"), wall_s, metrics, attempt=self.attempt)
        self.track_eval(row)

    def __enter__(self) -> Recording:
        if self._start_now:
            self.start()
        return self

    def __exit__(self, exc_type, err, tb) -> bool:
        self._stack.close()
        if self.run_id is None:
            return False
        if err is None:
            try:
                self._finish()
            except BaseException as late:  # the store's last write failed: so did the attempt
                self._fail(late)
                raise
            return False
        self._fail(err)
        return False

    def _finish(self) -> None:
        store, run_id, attempt = self.store, self.run_id, self.attempt
        wall_s = self.wall_s if self.wall_s is not None else time.perf_counter() - self._t0
        for row in self.evals:
            metrics = {k: v for k, v in row.items() if k != "step"}
            store.log_eval(run_id, int(row["step"]), None, wall_s, metrics, attempt=attempt)
        store.finish_run(
            run_id, self.metrics, wall_s, self.params, self.checkpoint, attempt=attempt, output=self.output
        )
        self.outcome = "finished"
        if self.tracker is not None:
            self.tracker.finish("finished", self.metrics)

    def _fail(self, err: BaseException) -> None:
        """End the attempt ``failed`` (or ``interrupted``) with ``err``'s text, ``partial`` removed.

        A stale attempt (reaped meanwhile) is left as the reaper ended it. Raises :class:`NoSpace`
        when a full disk kept the store from recording a failure, and the store's error when the
        store itself is unusable; an interrupt the store could not record is left to the reaper."""
        if self.partial is not None:
            Path(self.partial).unlink(missing_ok=True)
        if isinstance(err, StaleAttempt):
            if self.tracker is not None:
                self.tracker.finish("interrupted", error=STALE)
            return
        interrupted = isinstance(err, KeyboardInterrupt)
        outcome = "interrupted" if interrupted else "failed"
        if self.tracker is not None:
            self.tracker.finish(outcome, error=error_text(err).splitlines()[0])
        try:
            wall_s = time.perf_counter() - self._t0
            self.store.fail_run(self.run_id, error_text(err), wall_s, outcome=outcome, attempt=self.attempt)
            self.outcome = outcome
        except ConfigError as store_err:
            if not interrupted and (out_of_space(err) or isinstance(store_err, NoSpace)):
                message = f"run {self.run_id}: {NO_SPACE}; the results store could not record the attempt"
                raise NoSpace(message) from None  # a failed run (exit 1); reaped once this process ends
            if not interrupted:
                raise  # the store itself is unusable: say that
            # interrupted and the store unwritable: the attempt is reaped once this process ends
