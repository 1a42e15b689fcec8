"""Optional mirrors of the results store in TensorBoard and Weights & Biases (offline mode).

Off by default: metrics always live in the local results store. A tracker is fed each run as it
ends (its evaluation history and final metrics, read back from the store), in the sweep's main
process, so worker processes and Ray tasks need neither package. Both are extras that
mixerzoo does not install; enabling one that is missing is a one-line ConfigError.

    mixerzoo run cat-mqar --track tensorboard --track-dir runs/tb     # tensorboard --logdir runs/tb
    mixerzoo run cat-mqar --track wandb --track-dir runs/wandb        # wandb sync runs/wandb/wandb/offline-*
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Protocol

from mixerzoo.experiments.results_store import RunRecord
from mixerzoo.registry import ConfigError

TRACKERS = ("tensorboard", "wandb")


class Tracker(Protocol):
    def log_run(self, record: RunRecord, history: list[dict[str, Any]]) -> None: ...

    def close(self) -> None: ...


def _numeric(d: dict[str, Any]) -> dict[str, float]:
    return {k: float(v) for k, v in d.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.=@-]+", "_", name).strip("_") or "run"


class TensorBoardTracker:
    """One TensorBoard run directory per mixerzoo run: ``<log_dir>/<experiment>/<name>-<run_id>``."""

    def __init__(self, log_dir: str | Path, experiment: str) -> None:
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError:
            raise ConfigError(
                "--track tensorboard needs the tensorboard package: pip install tensorboard"
            ) from None
        self._writer_cls = SummaryWriter
        self.root = Path(log_dir) / _safe(experiment)

    def log_run(self, record: RunRecord, history: list[dict[str, Any]]) -> None:
        writer = self._writer_cls(log_dir=str(self.root / f"{_safe(record.name or '')}-{record.run_id}"))
        try:
            for h in history:
                for key, value in _numeric(
                    {k: v for k, v in h.items() if k not in ("step", "epoch")}
                ).items():
                    writer.add_scalar(f"eval/{key}", value, global_step=int(h["step"]))
            last = max((int(h["step"]) for h in history), default=0)
            for key, value in _numeric(record.metrics).items():
                writer.add_scalar(f"final/{key}", value, global_step=last)
            writer.add_text("config", f"```\n{record.config}\n```")
            if record.error:
                writer.add_text("error", record.error)
        finally:
            writer.close()

    def close(self) -> None:
        return None


class WandbTracker:
    """One offline W&B run per mixerzoo run (``wandb sync`` uploads them later, if ever)."""

    def __init__(self, log_dir: str | Path, experiment: str, project: str = "mixerzoo") -> None:
        try:
            import wandb
        except ImportError:
            raise ConfigError("--track wandb needs the wandb package: pip install wandb") from None
        self.wandb = wandb
        self.dir = Path(log_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.experiment = experiment
        self.project = project

    def log_run(self, record: RunRecord, history: list[dict[str, Any]]) -> None:
        run = self.wandb.init(
            project=self.project,
            group=self.experiment,
            name=record.name,
            id=record.run_id,
            config=record.config,
            dir=str(self.dir),
            mode="offline",
            reinit=True,
        )
        try:
            for h in history:
                run.log(_numeric({k: v for k, v in h.items() if k != "step"}), step=int(h["step"]))
            run.summary.update({**_numeric(record.metrics), "status": record.status})
        finally:
            run.finish(exit_code=0 if record.status == "finished" else 1)

    def close(self) -> None:
        return None


def make_trackers(names: list[str], log_dir: str | Path, experiment: str) -> list[Tracker]:
    """Build the named trackers (``tensorboard``, ``wandb``); unknown or missing ones are ConfigErrors."""
    out: list[Tracker] = []
    for name in names:
        if name == "tensorboard":
            out.append(TensorBoardTracker(Path(log_dir) / "tensorboard", experiment))
        elif name == "wandb":
            out.append(WandbTracker(Path(log_dir) / "wandb", experiment))
        else:
            raise ConfigError(f"--track {name!r}: allowed: {', '.join(TRACKERS)}")
    return out
