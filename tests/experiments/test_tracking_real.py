"""Live tracking with the real TensorBoard and W&B packages: their own files hold every step's loss
and every evaluation, and a reader sees the steps while the run is still training.

Skipped where a package is missing (the ``test`` extra installs both). W&B runs offline with its
home folders in ``tmp_path``; its run file is read back record by record (``wandb_history``).
"""

from __future__ import annotations

import json
import math
import struct
import sys
import time
from pathlib import Path

import pytest
import yaml

from mixerzoo.registry import ConfigError
from mixerzoo.runs import tracking
from mixerzoo.runs.task import execute_run
from mixerzoo.runs.tracking import TrackSpec, safe_name
from mixerzoo.store.results import ResultsStore
from mixerzoo.studies.sweep.config import load_experiment
from mixerzoo.studies.sweep.runner import run_sweep

CONFIG = {
    "data": {"task": {"name": "mqar_cat", "vocab_size": 30, "seq_len": 8}, "n_train": 64, "n_test": 16},
    "model": {"d_model": 16, "n_layers": 1, "mixer": "cat"},
    "train": {"epochs": 2, "batch_size": 16, "device": "cpu", "eval_every_steps": 3, "lr": 0.01},
}
STEPS = 8  # 64 examples / 16 per batch x 2 epochs
EVAL_STEPS = [3, 4, 6, 8]  # every 3 steps and at each epoch's end


def tb_scalars(root: Path) -> dict[str, list[tuple[int, float]]]:
    """Every scalar of the one event file under ``root``, read with TensorBoard's own reader."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    files = sorted(root.rglob("events.out.tfevents.*"))
    if not files:
        return {}
    (path,) = files
    acc = EventAccumulator(str(path), size_guidance={"scalars": 0})
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


# A W&B run file (run-<id>.wandb) is a LevelDB-style log: a 7-byte file header (":W&B", id, version),
# then 32 KiB blocks of chunks, each a 7-byte header (crc32, length, kind) and a piece of one record
# (kind 1: whole, 2/3/4: first/middle/last piece); each record is W&B's own protobuf ``Record``.
BLOCK, HEADER, WHOLE, LAST = 32 * 1024, 7, 1, 4


def wandb_records(path: Path) -> list:
    """The complete records of a run file, including one W&B's process is still writing."""
    from wandb.proto import wandb_internal_pb2

    data = path.read_bytes()
    assert data[:4] == b":W&B"
    records, pos, parts = [], HEADER, b""
    while pos + HEADER <= len(data):
        if BLOCK - pos % BLOCK < HEADER:  # a block's tail too short for a chunk header is padding
            pos += BLOCK - pos % BLOCK
            continue
        _crc, size, kind = struct.unpack("<IHB", data[pos : pos + HEADER])
        if kind == 0 or pos + HEADER + size > len(data):
            break  # not written yet
        parts += data[pos + HEADER : pos + HEADER + size]
        pos += HEADER + size
        if kind in (WHOLE, LAST):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(parts)
            records.append(record)
            parts = b""
    return records


def _items(items) -> dict:
    return {item.key or "/".join(item.nested_key): json.loads(item.value_json) for item in items}


def wandb_history(path: Path) -> list[dict]:
    """The run's history rows (``_step`` and the values logged at it), in the order written."""
    records = wandb_records(path) if path.is_file() else []
    return [_items(r.history.item) for r in records if r.WhichOneof("record_type") == "history"]


def steps_with(rows: list[dict], key: str) -> list[int]:
    return [row["_step"] for row in rows if key in row]


def wait_for(read, done, what: str, limit_s: float = 60.0):
    """``read()`` once ``done`` holds for it: W&B's own process writes the run file a moment after
    the call that logged (polled; fails after ``limit_s``)."""
    deadline = time.monotonic() + limit_s
    while True:
        value = read()
        if done(value):
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not written within {limit_s:.0f} s; the file holds {value}")
        time.sleep(0.05)


def run_files(root: Path) -> list[Path]:
    return sorted((root / "wandb").rglob("run-*.wandb"))


@pytest.fixture
def wandb_offline(tmp_path, monkeypatch):
    """Real W&B, offline, its settings, cache and data folders in ``tmp_path``; its run file is
    written every 0.1 s instead of W&B's default 15 s, so the mid-run check waits little."""
    if getattr(sys.modules.get("wandb"), "__path__", None) is None:  # a stand-in left by another test
        monkeypatch.delitem(sys.modules, "wandb", raising=False)
    pytest.importorskip("wandb")
    for var in ("WANDB_API_KEY", "WANDB_MODE", "WANDB_DIR"):
        monkeypatch.delenv(var, raising=False)
    for var in ("WANDB_CONFIG_DIR", "WANDB_CACHE_DIR", "WANDB_DATA_DIR"):
        monkeypatch.setenv(var, str(tmp_path / "wandb-home" / var.lower()))
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("WANDB_ERROR_REPORTING", "false")
    monkeypatch.setenv("WANDB__TRANSACTION_LOG_FLUSH_INTERVAL", "0.1")


def test_tensorboard_event_file_holds_every_step_and_is_flushed_at_each_evaluation(tmp_path, monkeypatch):
    pytest.importorskip("tensorboard")
    from torch.utils.tensorboard import SummaryWriter

    root, store = tmp_path / "t", ResultsStore(tmp_path / "r")
    seen: dict[int, list[int]] = {}
    flushed_after: list[int] = []

    class Writer(SummaryWriter):  # the real writer, noting after how many steps it is flushed
        def flush(self) -> None:
            flushed_after.append(len(seen))
            super().flush()

    monkeypatch.setattr(tracking, "summary_writer_class", lambda: Writer)

    def read_mid_run(step: int, loss: float, lr: float, total: int) -> None:
        seen[step] = [s for s, _ in tb_scalars(root).get("train/loss", [])]

    spec = TrackSpec(("tensorboard",), str(root))
    rec = execute_run(
        CONFIG, store, experiment="study-x", progress=False, tracking=spec, on_step=read_mid_run
    )
    assert rec.status == "finished"
    assert sorted(seen) == list(range(1, STEPS + 1)) and flushed_after == EVAL_STEPS
    for step, steps in seen.items():  # at step k the file holds every step up to the last evaluation
        flushed = max((e for e in EVAL_STEPS if e < step), default=0)
        assert steps[:flushed] == list(range(1, flushed + 1)) and max(steps, default=0) <= step, (step, steps)

    (folder,) = (root / "tensorboard" / "study-x").iterdir()
    assert folder.name == f"{safe_name('study-x: ' + rec.name)}-{rec.run_id}"
    scalars = tb_scalars(root)
    assert [s for s, _ in scalars["train/loss"]] == list(range(1, STEPS + 1))
    assert all(math.isfinite(v) for _, v in scalars["train/loss"])
    assert [s for s, _ in scalars["train/lr"]] == list(range(1, STEPS + 1)) and scalars["train/lr"][0][1] > 0
    history = store.history(rec.run_id)
    assert [h["step"] for h in history] == EVAL_STEPS
    evals = scalars["eval/accuracy_per_query"]
    assert evals == [(h["step"], pytest.approx(h["accuracy_per_query"])) for h in history]
    assert scalars["final/accuracy_per_query"] == [(STEPS, pytest.approx(rec.metrics["accuracy_per_query"]))]


def test_wandb_offline_run_file_holds_every_step_while_training(tmp_path, wandb_offline):
    root, store = tmp_path / "t", ResultsStore(tmp_path / "r")
    mid_run: list[dict] = []

    def read_mid_run(step: int, loss: float, lr: float, total: int) -> None:
        if step == 5:  # training waits here until the file shows steps 1-4 (the evaluations at 3 and 4)
            (path,) = wait_for(lambda: run_files(root), bool, "the run file")
            rows = wait_for(
                lambda: wandb_history(path),
                lambda r: steps_with(r, "train/loss")[:4] == [1, 2, 3, 4],
                "steps 1-4",
            )
            mid_run.extend(rows)

    spec = TrackSpec(("wandb",), str(root), project="p")
    rec = execute_run(
        CONFIG, store, experiment="study-x", progress=False, tracking=spec, on_step=read_mid_run
    )
    assert rec.status == "finished"
    assert set(steps_with(mid_run, "train/loss")) <= set(range(1, 6))
    assert steps_with(mid_run, "eval/accuracy_per_query")[:2] == [3, 4]

    (path,) = run_files(root)
    assert path.parent.name.startswith("offline-run-")  # no API key: offline
    records = wait_for(
        lambda: wandb_records(path), lambda rs: rs[-1].WhichOneof("record_type") == "exit", "the run's end"
    )
    by_kind = {r.WhichOneof("record_type"): r for r in records}
    run = by_kind["run"].run
    assert (run.display_name, run.run_group, run.project) == (f"study-x: {rec.name}", "study-x", "p")
    assert list(run.tags) == [rec.run_id] and by_kind["exit"].exit.exit_code == 0

    rows = wandb_history(path)
    assert steps_with(rows, "train/loss") == list(range(1, STEPS + 1))
    assert all(math.isfinite(r["train/loss"]) and r["train/lr"] > 0 for r in rows)
    history = store.history(rec.run_id)
    evals = [(r["_step"], r["eval/accuracy_per_query"]) for r in rows if "eval/accuracy_per_query" in r]
    assert evals == [(h["step"], pytest.approx(h["accuracy_per_query"])) for h in history]
    assert rows[-1]["final/accuracy_per_query"] == pytest.approx(rec.metrics["accuracy_per_query"])
    summary = {}
    for r in records:
        if r.WhichOneof("record_type") == "summary":
            summary.update(_items(r.summary.update))
    assert summary["status"] == "finished"


def test_cli_train_writes_both_backends_and_a_sweep_opens_one_wandb_run_per_cell(
    tmp_path, wandb_offline, run_cli
):
    pytest.importorskip("tensorboard")
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(CONFIG))
    argv = ["train", path, "--results", tmp_path / "r", "--track", "tensorboard", "--track", "wandb"]
    code, _, err = run_cli([*argv, "--quiet"])
    assert code == 0, err
    track = tmp_path / "r" / "tracking"
    assert [s for s, _ in tb_scalars(track / "tensorboard")["train/loss"]] == list(range(1, STEPS + 1))
    (run_file,) = run_files(track)
    rows = wait_for(lambda: wandb_history(run_file), lambda r: len(r) == STEPS, "all steps")
    assert steps_with(rows, "train/loss") == list(range(1, STEPS + 1))

    spec = {"kind": "sweep", "name": "two", "base": {**CONFIG, "train": {**CONFIG["train"], "epochs": 1}}}
    exp = load_experiment({**spec, "grid": {"train.lr": [1e-2, 3e-3]}, "presets": {"quick": {}, "paper": {}}})
    summary = run_sweep(
        exp,
        ResultsStore(tmp_path / "s"),
        tracking=TrackSpec(("wandb",), str(tmp_path / "st")),
        log=lambda s: None,
    )
    assert summary.finished == 2
    files = run_files(tmp_path / "st")
    assert len(files) == 2  # in one process, each cell its own run, each run its own steps
    for f in files:
        rows = wait_for(lambda f=f: wandb_history(f), lambda r: len(r) == STEPS // 2, "the cell's steps")
        assert steps_with(rows, "train/loss") == [1, 2, 3, 4]


def test_missing_tensorboard_is_one_line_with_the_real_import(monkeypatch):
    """torch.utils.tensorboard raises ImportError without the tensorboard package: one ConfigError."""
    pytest.importorskip("tensorboard")
    for name in [m for m in sys.modules if m == "tensorboard" or m.startswith("torch.utils.tensorboard")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "tensorboard", None)
    with pytest.raises(ConfigError, match=r"^--track tensorboard needs the tensorboard package: pip install"):
        TrackSpec(("tensorboard",), "d").check()
