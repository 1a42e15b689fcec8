"""A run: validated config -> trained model + metrics, recorded in the results store.

``execute_run`` is the one place that ties training to the store: it records the start,
every evaluation, the checkpoint and the final metrics, or the error if the run fails.
"""

from __future__ import annotations

import os
import time
import traceback
from pathlib import Path
from typing import Any

import torch

from mixerzoo import __version__
from mixerzoo.config import RunConfig
from mixerzoo.evaluation.length_generalization import evaluate_lengths
from mixerzoo.experiments.results_store import ResultsStore, RunRecord
from mixerzoo.model import build_model
from mixerzoo.params import validate


def save_checkpoint(path: Path, model: torch.nn.Module, cfg: RunConfig) -> None:
    """Write atomically (temp file + rename) so a killed process never leaves a torn checkpoint."""
    tmp = path.with_suffix(".pt.tmp")
    payload = {
        "config_json": cfg.model_dump_json(),
        "state_dict": model.state_dict(),
        "mixerzoo_version": __version__,
    }
    torch.save(payload, tmp)
    os.replace(tmp, path)


def load_checkpoint(path: str | Path, map_location: str = "cpu") -> tuple[torch.nn.Module, RunConfig]:
    """Load a checkpoint with ``weights_only=True`` and rebuild its model."""
    from mixerzoo.registry import ConfigError

    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"checkpoint {str(p)!r} does not exist")
    try:
        payload = torch.load(p, map_location=map_location, weights_only=True)
    except Exception as err:  # noqa: BLE001 - any unreadable file is a user error here
        raise ConfigError(f"checkpoint {str(p)!r} could not be read: {err}") from None
    if not isinstance(payload, dict) or "config_json" not in payload:
        raise ConfigError(f"checkpoint {str(p)!r} is not a mixerzoo checkpoint")
    cfg = RunConfig.model_validate_json(payload["config_json"])
    model = build_model(cfg.model)
    model.load_state_dict(payload["state_dict"])
    model.eval()
    return model, cfg


def execute_run(
    config: RunConfig | dict[str, Any],
    store: ResultsStore,
    experiment: str | None = None,
    progress: bool = True,
    data=None,
    raise_errors: bool = True,
) -> RunRecord:
    """Train one run and record it. On failure the run is stored as ``failed`` with its error."""
    from mixerzoo.training import train

    cfg = validate(RunConfig, config)
    run_id = store.start_run(
        cfg.model_dump(mode="json"), cfg.config_hash(), cfg.label(), experiment, __version__
    )
    t0 = time.perf_counter()

    def on_eval(record: dict[str, Any]) -> None:
        metrics = {k: v for k, v in record.items() if k not in ("step", "epoch", "wall_s")}
        store.log_eval(run_id, record["step"], record["epoch"], record["wall_s"], metrics)

    try:
        result = train(cfg, on_eval=on_eval, progress=progress, data=data)
        metrics = dict(result.metrics)
        if cfg.data.test_seq_lens:
            metrics.update(evaluate_lengths(result.model, cfg))
        ckpt = store.checkpoint_path(run_id)
        save_checkpoint(ckpt, result.model, cfg)
        store.finish_run(run_id, metrics, result.wall_s, result.params, str(ckpt))
    except BaseException as err:  # KeyboardInterrupt too: the run is marked, then re-raised
        message = f"{type(err).__name__}: {err}"
        if not isinstance(err, (KeyboardInterrupt, ValueError)):
            message += "\n" + "".join(traceback.format_exception(err)[-3:])
        store.fail_run(run_id, message, time.perf_counter() - t0)
        if raise_errors or not isinstance(err, Exception):
            raise
    record = store.get(run_id)
    assert record is not None
    return record
