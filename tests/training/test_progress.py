"""Per-step reporting: the train bar shows the running loss from the first step, the step hook sees
every step of the task and LM trainers, and a sweep's bar shows each active run's step progress."""

from __future__ import annotations

import importlib
import math

import pytest
import torch

from mixerzoo.config import load_run_config
from mixerzoo.runs import tracking
from mixerzoo.runs.tracking import ProgressBoard, ProgressSender
from mixerzoo.training.lm import train_lm
from mixerzoo.training.lm_config import load_lm_config
from mixerzoo.training.progress import StepReport, format_progress

train_module = importlib.import_module("mixerzoo.training.train")  # the module, not the function

CONFIG = {
    "data": {"task": {"name": "mqar_cat", "vocab_size": 30, "seq_len": 8}, "n_train": 48, "n_test": 16},
    "model": {"d_model": 16, "n_layers": 1, "mixer": "cat"},
    "train": {"epochs": 2, "batch_size": 16, "device": "cpu", "lr": 0.01},
}


class FakeBar:
    """Records what a tqdm bar is told, in order."""

    disable = False

    def __init__(self, *args, **kwargs) -> None:
        self.events: list[tuple] = []
        FakeBar.last = self

    def update(self, n=1):
        self.events.append(("update", n))

    def set_postfix(self, values=None, refresh=True, **kw):
        self.events.append(("postfix", dict(values or {}, **kw)))

    def set_postfix_str(self, text, refresh=True):
        self.events.append(("postfix_str", text))

    def close(self):
        pass


def test_train_bar_shows_the_running_loss_from_the_first_step(monkeypatch):
    monkeypatch.setattr(train_module, "tqdm", FakeBar)
    seen = []
    result = train_module.train(load_run_config(CONFIG), on_step=lambda *a: seen.append(a), progress=True)
    events = FakeBar.last.events
    assert events[0] == ("update", 1)
    kind, postfix = events[1]
    # after step 1, before any evaluation: the loss only (the first evaluation ends epoch 1, step 3)
    assert kind == "postfix" and set(postfix) == {"loss"} and math.isfinite(float(postfix["loss"]))
    assert [s[0] for s in seen] == list(range(1, result.steps + 1)) == list(range(1, 7))
    assert all(total == 6 and lr > 0 and math.isfinite(loss) for _, loss, lr, total in seen)
    # the lr is the one the step used: warmup/decay from the configured 0.01
    assert max(lr for _, _, lr, _ in seen) <= 0.01 + 1e-12


def test_step_report_reads_the_loss_only_for_a_hook_or_a_shown_bar():
    class Unread:
        """A loss whose reading (a device sync on a GPU) fails the test."""

        def __float__(self):
            raise AssertionError("the loss was read")

    bar = FakeBar()
    bar.disable = True
    calls = []
    report = StepReport(bar, None, total=5)
    report(1, Unread(), Unread(), 0.1)  # disabled bar, no hook: nothing shown, nothing read
    assert bar.events == []
    counter = ProgressSender(ProgressBoard(FakeBar()), "run", every_s=0)
    StepReport(bar, counter, total=5)(1, Unread(), Unread(), 0.1)  # a step counter reads no loss
    assert counter.sink.active == {"run": (1, 5)}
    report = StepReport(bar, lambda *a: calls.append(a), total=5)
    report(2, torch.tensor(2.25), torch.tensor(2.0), 0.1)
    assert calls == [(2, 2.25, 0.1, 5)]
    shown = FakeBar()
    report = StepReport(shown, None, total=5, every_s=1e9)
    report(1, torch.tensor(3.0), torch.tensor(3.0), 0.1)
    report(2, torch.tensor(1.0), torch.tensor(2.0), 0.1)  # within every_s: not shown again
    assert shown.events == [("postfix", {"loss": "3.000"})]


def test_lm_trainer_calls_the_step_and_eval_hooks(tmp_path):
    d = tmp_path / "data"
    d.mkdir()
    (d / "input.txt").write_text("the quick brown fox jumps over the lazy dog. " * 200)
    cfg, corpus = load_lm_config(
        {
            "corpus": {"name": "char", "data_dir": str(d)},
            "model": {"d_model": 16, "n_layers": 1, "mixer": "attention"},
            "train": {
                "steps": 6,
                "batch_size": 4,
                "block_size": 8,
                "warmup": 2,
                "eval_every": 3,
                "eval_iters": 1,
            }
            | {"device": "cpu", "threads": 1},
        }
    )
    steps, evals = [], []
    train_lm(cfg, corpus, on_step=lambda *a: steps.append(a), on_eval=evals.append)
    assert [s[0] for s in steps] == list(range(1, 7)) and all(s[3] == 6 for s in steps)
    assert all(math.isfinite(s[1]) and s[2] >= 0 for s in steps)
    assert [e["step"] for e in evals] == [3, 6] and all("val_loss" in e for e in evals)


def test_format_progress_names_active_runs_and_counts_the_rest():
    assert format_progress({}) == ""
    assert format_progress({"b": (3, 10), "a": (1, 5)}) == "a 1/5 | b 3/10"
    text = format_progress({"a" + "x" * 50: (1, 2), "b": (1, 2), "c": (1, 2), "d": (1, 2)})
    assert text.endswith("| +1 more") and "..." in text and len(text) < 110


def test_progress_sender_throttles_and_board_shows_active_runs():
    bar = FakeBar()
    board = ProgressBoard(bar)
    send = ProgressSender(board, "cat-1L", every_s=1e9)
    for step in range(1, 6):
        send(step, 0.5, 0.1, 5)
    assert board.active == {"cat-1L": (5, 5)}
    shown = [e[1] for e in bar.events]
    assert shown == ["cat-1L 1/5", "cat-1L 5/5"]  # the first and the last step only
    ProgressSender(board, "attn", every_s=0)(2, 0.5, 0.1, 9)
    assert bar.events[-1] == ("postfix_str", "attn 2/9 | cat-1L 5/5")
    send.done()
    assert board.active == {"attn": (2, 9)} and bar.events[-1] == ("postfix_str", "attn 2/9")


@pytest.mark.parametrize("workers", [1, 2])
def test_a_sweep_hears_each_runs_steps(tmp_path, monkeypatch, workers):
    from mixerzoo.store.results import ResultsStore
    from mixerzoo.studies.sweep.config import load_experiment
    from mixerzoo.studies.sweep.runner import run_sweep

    heard = []
    put = ProgressBoard.put
    monkeypatch.setattr(
        tracking.ProgressBoard, "put", lambda self, item: (heard.append(item), put(self, item))
    )
    spec = {"kind": "sweep", "name": "p", "base": CONFIG, "grid": {"train.lr": [1e-2, 3e-3]}}
    exp = load_experiment({**spec, "presets": {"quick": {}, "paper": {}}})
    store = ResultsStore(tmp_path / "r")
    run_sweep(exp, store, workers=workers, progress=True, log=lambda s: None)
    names = {r.name for r in store.runs()}
    assert len(names) == 2
    for name in names:
        assert (name, 6, 6) in heard  # the last step of each run reached the sweep
        assert (name, None, None) in heard  # and its end
