"""A language-model run: trained through the lifecycle every run goes through, and read from its folder.

:func:`execute_lm_run` trains (or resumes) a language model on its corpus as one attempt of its
run in the results store (``runs/lifecycle.py``): the attempt begins once training is set up, so
a mistake found before that records nothing; under torchrun, rank 0 alone records it. ``mixerzoo
lm train`` and the Python API (``api.train_lm``) both call it.

:func:`lm_folder_records` reads language-model run folders (``lm train --out DIR``) as records
without writing anything, so that folders made before the store recorded them can be listed.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path
from typing import Any

from mixerzoo.checkpoint import LM_CHECKPOINT
from mixerzoo.registry import ConfigError
from mixerzoo.runs.lifecycle import Recording
from mixerzoo.store.records import RunRecord
from mixerzoo.store.results import ResultsStore
from mixerzoo.training.lm import LMResult, setup_distributed, train_lm
from mixerzoo.training.lm_config import LMRunConfig


def execute_lm_run(
    cfg: LMRunConfig,
    corpus,
    store: ResultsStore | Callable[[], ResultsStore],
    out_dir: str | os.PathLike | None = None,
    *,
    echo: Callable[[str], None] | None = None,
    log: Callable[[str], None] | None = None,
    tracking=None,
) -> tuple[LMResult, Recording | None]:
    """Train the run (resuming from ``out_dir``'s checkpoint of the same config) and record it:
    ``(result, recording)``, the recording None on a torchrun rank other than 0.

    ``store`` may be a function that opens the store once training is set up. On rank 0,
    ``echo`` hears the corpus's description and ``log`` every evaluation line; ``tracking`` (a
    ``tracking.TrackSpec``) streams the run's steps and evaluations live.
    """
    info = setup_distributed(cfg.train.device)  # a device absent here: one line, before the store
    made = _recording(cfg, store, out_dir, tracking) if info.is_main else None
    if made is not None and echo is not None:
        echo(corpus.describe())
    hooks: dict[str, Any] = {}
    if made is not None and tracking is not None and tracking.backends:
        hooks = {"on_step": made.track_step, "on_eval": made.track_eval}
    with made or nullcontext():
        result = train_lm(cfg, corpus, out_dir, log=log, on_start=made.start if made else None, **hooks)
        if made is not None:
            _fill(made, result, out_dir)
    return result, made


def _recording(
    cfg: LMRunConfig, store: ResultsStore | Callable[[], ResultsStore], out_dir=None, tracking=None
) -> Recording:
    """The attempt of this LM run (``runs/lifecycle.py``), named after the config or its run folder."""
    name = cfg.name or (Path(out_dir).name if out_dir else None)
    config = cfg.model_dump(mode="json")
    return Recording(store, "lm", config, cfg.config_hash(), name, tracking=tracking, group="lm")


def _fill(made: Recording, result: LMResult, out_dir) -> None:
    """The attempt's metrics, evaluations, checkpoint and output (the run folder)."""
    made.metrics = {"steps": result.steps, **result.metrics}
    if result.tokens_per_s is not None:
        made.metrics["tokens_per_s"] = result.tokens_per_s
    made.params = result.params
    made.evals = [row for row in result.history if "val_loss" in row]  # a resumed run's earlier ones too
    if out_dir is not None:
        made.output = Path(out_dir)
        if (made.output / LM_CHECKPOINT).is_file():
            made.checkpoint = made.output / LM_CHECKPOINT


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

    try:
        return LMRunConfig.model_validate(config).config_hash()
    except (ValidationError, ValueError, TypeError):
        return ""
