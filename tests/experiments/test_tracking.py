"""Live tracking: every step's loss and learning rate and every evaluation reach W&B (offline) and
TensorBoard while the run trains. Neither package is needed: test doubles stand in for ``wandb``
and for TensorBoard's ``SummaryWriter``, each writing one JSON line per call to a file at once."""

from __future__ import annotations

import json
import math
import sys
import types
from pathlib import Path

import pytest
import yaml

from mixerzoo.registry import ConfigError
from mixerzoo.runs import tracking
from mixerzoo.runs.task import execute_run
from mixerzoo.runs.tracking import TrackSpec
from mixerzoo.store.results import ResultsStore
from mixerzoo.studies.sweep.config import load_experiment
from mixerzoo.studies.sweep.runner import run_sweep

CONFIG = {
    "data": {"task": {"name": "mqar_cat", "vocab_size": 30, "seq_len": 8}, "n_train": 64, "n_test": 16},
    "model": {"d_model": 16, "n_layers": 1, "mixer": "cat"},
    "train": {"epochs": 2, "batch_size": 16, "device": "cpu", "eval_every_steps": 3, "lr": 0.01},
}
STEPS = 8  # 64 examples / 16 per batch x 2 epochs


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.is_file() else []


class Probe:
    """What a double saw when it wrote: the evaluations the results store held at that moment."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def evals_now(self) -> int:
        store = ResultsStore(self.root, read_only=True)
        return sum(len(store.history(r.run_id)) for r in store.runs())


def fake_wandb(probe: Probe, inits: list) -> types.ModuleType:
    module = types.ModuleType("wandb")

    class Run:
        def __init__(self, **kw) -> None:
            self.kw, self.summary = kw, {}
            self.file = Path(kw["dir"]) / f"{len(inits)}.jsonl"
            self.finished = None

        def log(self, values, step):
            with self.file.open("a") as f:  # written at once, as wandb's offline writer streams
                f.write(json.dumps({"step": step, **values, "_evals_in_store": probe.evals_now()}) + "\n")

        def finish(self, exit_code=0):
            self.finished = exit_code

    def init(**kw):
        run = Run(**kw)
        inits.append(run)
        return run

    module.init = init
    return module


def fake_summary_writer(probe: Probe):
    class Writer:
        def __init__(self, log_dir, flush_secs=120):
            self.path = Path(log_dir) / "events.jsonl"
            self.path.parent.mkdir(parents=True, exist_ok=True)

        def _write(self, **row):
            with self.path.open("a") as f:
                f.write(json.dumps(row) + "\n")

        def add_scalar(self, tag, value, global_step):
            self._write(tag=tag, value=value, step=global_step, evals_in_store=probe.evals_now())

        def add_text(self, tag, text):
            self._write(tag=tag, text=text)

        def flush(self):
            self._write(tag="flushed")

        def close(self):
            self._write(tag="closed")

    return Writer


@pytest.fixture
def doubles(tmp_path, monkeypatch):
    probe = Probe(tmp_path / "r")
    inits: list = []
    monkeypatch.setitem(sys.modules, "wandb", fake_wandb(probe, inits))
    monkeypatch.setattr(tracking, "summary_writer_class", lambda: fake_summary_writer(probe))
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    return inits


def _check_live(rows: list[dict], store: ResultsStore, loss_key: str, value_of) -> None:
    """A loss row for every step 1..STEPS, in order, each written when the store held exactly the
    evaluations made before that step (so it was written during training, not replayed after)."""
    (rec,) = store.runs()
    eval_steps = [h["step"] for h in store.history(rec.run_id)]
    assert eval_steps == [3, 4, 6, 8]  # every 3 steps and at each epoch's end
    losses = [r for r in rows if loss_key in r]
    assert [r["step"] for r in losses] == list(range(1, STEPS + 1))
    assert all(math.isfinite(value_of(r)) for r in losses)
    for r in losses:
        assert r["_seen"] == sum(s < r["step"] for s in eval_steps), r


def test_wandb_offline_and_tensorboard_stream_every_step_while_training(tmp_path, doubles):
    store = ResultsStore(tmp_path / "r")
    spec = TrackSpec(("wandb", "tensorboard"), str(tmp_path / "t"), project="p", entity="me")
    rec = execute_run(CONFIG, store, experiment="study-x", progress=False, tracking=spec)
    assert rec.status == "finished"
    (run,) = doubles
    assert run.kw["mode"] == "offline" and run.kw["project"] == "p" and run.kw["entity"] == "me"
    assert run.kw["name"] == f"study-x: {rec.name}" and run.kw["group"] == "study-x"
    assert run.finished == 0 and run.summary["status"] == "finished"

    rows = [{**r, "_seen": r["_evals_in_store"]} for r in _lines(run.file)]
    _check_live(rows, store, "train/loss", lambda r: r["train/loss"])
    lrs = [r["train/lr"] for r in rows if "train/lr" in r]
    assert lrs[0] > 0 and len(lrs) == STEPS
    eval_rows = [r for r in rows if "eval/accuracy_per_query" in r]
    assert [r["step"] for r in eval_rows] == [h["step"] for h in store.history(rec.run_id)]
    assert any("final/accuracy_per_query" in r for r in rows)

    (events,) = (tmp_path / "t" / "tensorboard" / "study-x").glob("*/events.jsonl")
    rows = [{**r, "_seen": r.get("evals_in_store")} for r in _lines(events)]
    by_tag = [
        {"step": r["step"], "train/loss": r["value"], "_seen": r["_seen"]}
        for r in rows
        if r["tag"] == "train/loss"
    ]
    _check_live(by_tag, store, "train/loss", lambda r: r["train/loss"])
    assert rows[-1]["tag"] == "closed"


def test_wandb_mode_follows_the_api_key_unless_given(monkeypatch):
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    assert TrackSpec(("wandb",), "d").wandb_mode() == "offline"
    monkeypatch.setenv("WANDB_API_KEY", "x")
    assert TrackSpec(("wandb",), "d").wandb_mode() == "online"
    assert TrackSpec(("wandb",), "d", mode="offline").wandb_mode() == "offline"
    with pytest.raises(ConfigError, match="--track-mode"):
        TrackSpec(("wandb",), "d", mode="sometimes")


def test_missing_backends_are_one_line_before_any_run(tmp_path, monkeypatch, run_cli):
    monkeypatch.setitem(sys.modules, "wandb", None)  # import wandb raises ImportError

    def missing():
        raise ImportError("no tensorboard")

    monkeypatch.setattr(tracking, "summary_writer_class", missing)
    for name in ("wandb", "tensorboard"):
        with pytest.raises(ConfigError, match=f"needs the {name} package"):
            TrackSpec((name,), "d").check()
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(CONFIG))
    code, _, err = run_cli(["train", path, "--results", tmp_path / "r", "--track", "wandb"])
    assert code == 2 and "needs the wandb package" in err and "Traceback" not in err
    assert not (tmp_path / "r").exists()


def test_a_backend_failing_mid_run_is_dropped_and_the_run_finishes(tmp_path, doubles, capsys):
    def broken_log(self, values, step):
        raise RuntimeError("disk quota")

    run_cls = type(sys.modules["wandb"].init(dir=str(tmp_path)))
    run_cls.log = broken_log
    rec = execute_run(
        CONFIG, ResultsStore(tmp_path / "r"), progress=False, tracking=TrackSpec(("wandb",), str(tmp_path))
    )
    assert rec.status == "finished"
    assert capsys.readouterr().err.count("tracking: WandbSink stopped (RuntimeError: disk quota)") == 1


def test_cli_train_and_study_run_stream_with_names_from_the_study(tmp_path, doubles, run_cli):
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(CONFIG))
    code, _, err = run_cli(
        ["train", path, "--results", tmp_path / "r", "--track", "wandb", "--track-project", "proj", "--quiet"]
    )
    assert code == 0, err
    assert (
        doubles[-1].kw["project"] == "proj"
        and Path(doubles[-1].kw["dir"]).parent == tmp_path / "r" / "tracking"
    )
    assert len(_lines(doubles[-1].file)) >= STEPS

    spec = {
        "kind": "sweep",
        "name": "tiny-track",
        "base": {**CONFIG, "train": {**CONFIG["train"], "epochs": 1}},
        "grid": {"train.lr": [1e-2, 3e-3]},
        "presets": {"quick": {}, "paper": {}},
    }
    study = tmp_path / "study.yaml"
    study.write_text(yaml.safe_dump(spec))
    before = len(doubles)
    code, _, err = run_cli(
        ["study", "run", study, "--results", tmp_path / "s", "--track", "wandb", "--quiet"]
    )
    assert code == 0, err
    made = doubles[before:]
    assert len(made) == 2 and {r.kw["group"] for r in made} == {"tiny-track"}
    assert all(r.kw["name"].startswith("tiny-track: ") for r in made)
    assert all(len([x for x in _lines(r.file) if "train/loss" in x]) == 4 for r in made)


def test_run_sweep_without_tracking_writes_nothing(tmp_path, doubles):
    exp = load_experiment(
        {
            "kind": "sweep",
            "name": "t",
            "base": CONFIG,
            "grid": {"train.lr": [1e-2]},
            "presets": {"quick": {}, "paper": {}},
        }
    )
    run_sweep(exp, ResultsStore(tmp_path / "r"), progress=False, log=lambda s: None)
    assert doubles == []


FAKE_WANDB_MODULE = """
import json, os
from pathlib import Path

class _Run:
    def __init__(self, kw):
        self.summary = {}
        self.file = Path(kw["dir"]) / (kw["tags"][0] + ".jsonl")
        self.file.write_text(json.dumps({"init": kw["name"], "pid": os.getpid()}) + "\\n")

    def log(self, values, step):
        with self.file.open("a") as f:
            f.write(json.dumps({"step": step, **values, "pid": os.getpid()}) + "\\n")

    def finish(self, exit_code=0):
        pass

def init(**kw):
    return _Run(kw)
"""


def test_pool_workers_stream_their_own_runs(tmp_path, monkeypatch):
    """--workers 2: each worker process writes its runs' steps (spawned workers import the backend)."""
    import os

    fake = tmp_path / "fake_pkgs"
    fake.mkdir()
    (fake / "wandb.py").write_text(FAKE_WANDB_MODULE)
    monkeypatch.syspath_prepend(str(fake))  # spawned workers get the parent's sys.path
    monkeypatch.setitem(sys.modules, "wandb", None)  # so that undoing drops the stand-in imported here
    monkeypatch.delitem(sys.modules, "wandb")
    spec = {"kind": "sweep", "name": "pool-track", "base": CONFIG, "grid": {"train.lr": [1e-2, 3e-3]}}
    exp = load_experiment({**spec, "presets": {"quick": {}, "paper": {}}})
    store = ResultsStore(tmp_path / "r")
    tracking_spec = TrackSpec(("wandb",), str(tmp_path / "t"))
    summary = run_sweep(exp, store, workers=2, tracking=tracking_spec, progress=False, log=lambda s: None)
    assert summary.finished == 2
    for rec in store.runs():
        rows = _lines(tmp_path / "t" / "wandb" / f"{rec.run_id}.jsonl")
        assert rows[0]["init"] == f"pool-track: {rec.name}"
        assert [r["step"] for r in rows if "train/loss" in r] == list(range(1, STEPS + 1))
        assert {r["pid"] for r in rows} != {os.getpid()} and len({r["pid"] for r in rows}) == 1


def test_lm_train_streams_steps_and_evaluations(tmp_path, doubles, run_cli):
    data = tmp_path / "data"
    data.mkdir()
    (data / "input.txt").write_text("the quick brown fox jumps over the lazy dog. " * 200)
    config = {
        "corpus": {"name": "char", "data_dir": str(data)},
        "model": {"d_model": 16, "n_layers": 1, "mixer": "attention"},
        "train": {"steps": 6, "batch_size": 4, "block_size": 8, "warmup": 2, "eval_every": 3, "eval_iters": 1}
        | {"device": "cpu", "threads": 1},
    }
    path = tmp_path / "lm.yaml"
    path.write_text(yaml.safe_dump(config))
    code, _, err = run_cli(
        [
            "lm",
            "train",
            path,
            "--out",
            tmp_path / "run",
            "--results",
            tmp_path / "r",
            "--track",
            "wandb",
            "--quiet",
        ]
    )
    assert code == 0, err
    (run,) = doubles
    assert run.kw["group"] == "lm" and run.kw["name"] == "lm: run" and run.finished == 0
    rows = _lines(run.file)
    assert [r["step"] for r in rows if "train/loss" in r] == list(range(1, 7))
    assert [r["step"] for r in rows if "eval/val_loss" in r] == [3, 6]
