"""Runs that are not task runs, in the results store: language-model runs and computed results.

    with Recording(store, "lm", cfg.model_dump(mode="json"), cfg.config_hash(), "kjv") as rec:
        result = train_lm(cfg, corpus, out_dir, on_start=rec.start)
        rec.metrics, rec.params, rec.checkpoint = result.metrics, result.params, out_dir / CHECKPOINT

:class:`Recording` makes one attempt of the run (config hash, study) around the block, as
``execute_run`` does for a task run, with the fingerprint of the code it runs: ``finished`` with
what the block set, ``failed`` with the error of an exception, ``interrupted`` on Ctrl-C (both
re-raised); a heartbeat keeps the attempt's lease fresh meanwhile. Running the same config
again (a resumed language model, a theory check run again) adds an attempt to the same run.

:func:`lm_folder_records` reads language-model run folders (``lm train --out DIR``) as records
without writing anything, so that folders made before the store recorded them can be listed.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from mixerzoo import __version__
from mixerzoo.checkpoint import LM_CHECKPOINT
from mixerzoo.registry import ConfigError
from mixerzoo.runs.task import _error_text, keep_alive
from mixerzoo.store.records import RunRecord
from mixerzoo.store.results import ResultsStore


class Recording:
    """One attempt of the run (``config_hash``, ``study``) of ``kind``, around a ``with`` block.

    :meth:`start` begins the attempt (``start=True`` does it on entering the block); the block
    sets ``metrics``, ``params``, ``checkpoint``, ``output`` and ``evals`` (rows with a ``step``,
    recorded as the attempt's history). Leaving the block ends the attempt ``finished``, or
    ``failed`` / ``interrupted`` with the error, which propagates. An error before :meth:`start`
    (a user mistake found while setting up) records nothing; ``store`` may be a function that
    opens the store when the attempt starts, so that such a mistake does not even create it.
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
    ) -> None:
        self.store, self.kind, self.config, self.config_hash = store, kind, config, config_hash
        self.name, self.study, self._start_now = name, study, start
        self.run_id: str | None = None
        self.attempt: int | None = None
        self.metrics: dict[str, Any] = {}
        self.params: int | None = None
        self.checkpoint: str | Path | None = None
        self.output: str | Path | None = None
        self.evals: list[dict[str, Any]] = []
        self._stack = ExitStack()
        self._t0 = 0.0

    def start(self, *_: Any) -> None:
        """Begin the attempt (the run is created if new) and keep its heartbeat fresh."""
        if not isinstance(self.store, ResultsStore):
            self.store = self.store()
        from mixerzoo.store.fingerprint import code_fingerprint

        self.run_id = self.store.start_run(
            self.config,
            self.config_hash,
            self.name,
            self.study,
            __version__,
            kind=self.kind,
            code=code_fingerprint(self.config),
        )
        self.attempt = self.store.current_attempt(self.run_id)
        self._t0 = time.perf_counter()
        self._stack.enter_context(keep_alive(self.store, self.run_id, self.attempt))

    def __enter__(self) -> Recording:
        if self._start_now:
            self.start()
        return self

    def __exit__(self, exc_type, err, tb) -> bool:
        self._stack.close()
        if self.run_id is None:
            return False
        wall_s = time.perf_counter() - self._t0
        if err is not None:
            outcome = "interrupted" if isinstance(err, KeyboardInterrupt) else "failed"
            try:
                self.store.fail_run(self.run_id, _error_text(err), wall_s, outcome, self.attempt)
            except ConfigError:
                pass  # the store cannot be written now: the attempt is reaped once this process ends
            return False
        self._finish(wall_s)
        return False

    def _finish(self, wall_s: float) -> None:
        store, run_id, attempt = self.store, self.run_id, self.attempt
        for row in self.evals:
            metrics = {k: v for k, v in row.items() if k != "step"}
            store.log_eval(run_id, int(row["step"]), None, wall_s, metrics, attempt=attempt)
        store.finish_run(
            run_id, self.metrics, wall_s, self.params, self.checkpoint, attempt=attempt, output=self.output
        )


# -- language-model run folders, read as they are ------------------------------------------
def lm_folders(path: str | os.PathLike) -> list[Path]:
    """``path`` itself when it is a run folder (``config.json`` or the checkpoint in it), else its
    sub-folders that are; a path that is neither is one ConfigError line."""
    root = Path(path)
    if not root.is_dir():
        raise ConfigError(f"--lm-runs {str(root)!r}: not a folder")
    if _is_lm_folder(root):
        return [root]
    found = sorted(p for p in root.iterdir() if p.is_dir() and _is_lm_folder(p))
    if not found:
        raise ConfigError(f"--lm-runs {str(root)!r}: no `mixerzoo lm train --out` folder in it")
    return found


def _is_lm_folder(path: Path) -> bool:
    return (path / "config.json").is_file() or (path / LM_CHECKPOINT).is_file()


def lm_folder_record(folder: Path) -> RunRecord:
    """A run folder as a record of kind ``lm``: ``finished`` when it holds ``result.json`` (its
    metrics), else ``interrupted`` (it stopped before its last step); no attempts are known."""
    config = _json_file(folder / "config.json")
    result = _json_file(folder / "result.json")
    ckpt = folder / LM_CHECKPOINT
    made = (folder / "config.json") if (folder / "config.json").is_file() else ckpt
    stamp = made.stat().st_mtime
    return RunRecord(
        run_id=str(folder),
        status="finished" if result else "interrupted",
        config=config,
        config_hash=_lm_hash(config),
        name=config.get("name") or folder.name,
        experiment=None,
        metrics=result.get("metrics", {}) if isinstance(result.get("metrics"), dict) else {},
        checkpoint=str(ckpt.resolve()) if ckpt.is_file() else None,
        wall_s=result.get("train_s"),
        params=result.get("params"),
        error=None if result else "no result.json: the run stopped before its last step",
        package_version=None,
        created_at=stamp,
        updated_at=(folder / "result.json").stat().st_mtime if result else stamp,
        kind="lm",
    )


def _json_file(path: Path) -> dict[str, Any]:
    """A JSON object file; {} when it is absent, one ConfigError line when it is not an object."""
    if not path.is_file():
        return {}
    try:
        value = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        reason = (str(err).splitlines() or [type(err).__name__])[0][:200]
        raise ConfigError(f"{str(path)!r} cannot be read as JSON ({reason})") from None
    if not isinstance(value, dict):
        raise ConfigError(f"{str(path)!r} is not a JSON object")
    return value


def _lm_hash(config: dict[str, Any]) -> str:
    """The config hash ``lm train`` records for this config; ``""`` for a config this version
    no longer validates."""
    from pydantic import ValidationError

    from mixerzoo.training.lm import LMRunConfig

    try:
        return LMRunConfig.model_validate(config).config_hash()
    except (ValidationError, ValueError, TypeError):
        return ""
