"""Finished results that several tests here read, each built once per test run.

``three_kinds``: one working directory where ``train``, ``lm train`` and ``study run`` of a
computed study each recorded a run in the default store (``results/``). ``finished_fp_study``: a
store holding the one finished run of the ``fp-tiny`` sweep with the ``cat`` mixer. A test that
only reads one takes it as it is (``read_only_use`` checks it is left as it was); a test that
writes into a store takes its own copy (``finished_fp_study_copy``).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from mixerzoo.store.results import ResultsStore
from mixerzoo.studies.sweep.config import load_experiment

TEXT = "the quick brown fox jumps over the lazy dog. " * 200
TASK = {
    "name": "tiny-task",
    "data": {"task": {"name": "mqar_cat", "vocab_size": 30, "seq_len": 8}, "n_train": 32, "n_test": 16},
    "model": {"d_model": 16, "n_layers": 1, "mixer": "cat"},
    "train": {"epochs": 1, "batch_size": 16, "lr": 1e-2, "device": "cpu"},
}
LM = {
    "corpus": {"name": "char", "data_dir": "data"},
    "model": {"d_model": 16, "n_layers": 1, "mixer": {"name": "attention", "num_heads": 2}},
    "train": {
        "steps": 4,
        "batch_size": 4,
        "block_size": 8,
        "warmup": 1,
        "eval_every": 2,
        "eval_iters": 2,
        "ckpt_every": 2,
        "seed": 3,
        "device": "cpu",
        "threads": 1,
    },
}
THEORY = "cat-thm3-selective-copy"
SMALL = ["--set", "seq_lens=[24, 40]", "--set", "num_tokens_to_copy=4", "--set", "n_test=20"]
# the commands that record one run of each kind, run in a working directory made by `write_inputs`
THREE_KINDS = (
    ["train", "task.yaml", "--quiet"],
    ["lm", "train", "lm.yaml", "--out", "runs/lm", "--quiet"],
    ["study", "run", THEORY, *SMALL],
)


def write_inputs(folder: Path) -> Path:
    """A task config, an LM config and its corpus in ``folder``; no results yet."""
    (folder / "data").mkdir()
    (folder / "data" / "input.txt").write_text(TEXT)
    (folder / "task.yaml").write_text(yaml.safe_dump(TASK))
    (folder / "lm.yaml").write_text(yaml.safe_dump(LM))
    return folder


def cli(argv: list) -> None:
    """The ``mixerzoo`` command in-process; it must succeed."""
    from mixerzoo.cli.main import main

    try:
        main([str(a) for a in argv])
    except SystemExit as stop:
        assert stop.code in (0, None), (argv, stop.code)


@pytest.fixture(scope="session")
def three_kinds(tmp_path_factory) -> Path:
    """A working directory (``write_inputs``) where each of ``THREE_KINDS`` recorded its run in
    the default store; built once per test run, read by tests through ``three_kinds_here``."""
    folder = write_inputs(tmp_path_factory.mktemp("three-kinds"))
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(folder)
        mp.delenv("MIXERZOO_RESULTS", raising=False)
        for argv in THREE_KINDS:
            cli(argv)
    return folder


@pytest.fixture
def three_kinds_here(three_kinds, monkeypatch, read_only_use) -> Path:
    """``three_kinds`` as the working directory of a test that only reads it."""
    monkeypatch.chdir(three_kinds)
    monkeypatch.delenv("MIXERZOO_RESULTS", raising=False)
    return read_only_use(three_kinds)


def tiny_study(mixer: str = "user_running_mean"):
    """The ``fp-tiny`` sweep: one run of ``mixer`` (two training steps)."""
    return load_experiment(
        {
            "kind": "sweep",
            "name": "fp-tiny",
            "claim": "paper: n/a",
            "base": {
                "data": {
                    "task": {"name": "mqar_cat", "vocab_size": 30, "seq_len": 8},
                    "n_train": 32,
                    "n_test": 16,
                },
                "model": {"d_model": 8, "n_layers": 1, "mixer": mixer},
                "train": {"epochs": 1, "batch_size": 16, "max_steps": 2, "device": "cpu"},
            },
            "grid": {"train.lr": [1e-2]},
            "presets": {"quick": {}, "paper": {}},
        }
    )


@pytest.fixture(scope="session")
def finished_fp_study(tmp_path_factory) -> Path:
    """The root of a store where ``tiny_study("cat")`` ran to its end; built once per test run."""
    from mixerzoo.studies.sweep.runner import run_sweep

    root = tmp_path_factory.mktemp("fp-cat") / "r"
    summary = run_sweep(tiny_study("cat"), ResultsStore(root), progress=False, log=lambda s: None)
    assert summary.finished == 1
    return root


@pytest.fixture
def finished_fp_study_copy(finished_fp_study, tmp_path) -> ResultsStore:
    """This test's own copy of ``finished_fp_study`` (at ``tmp_path / "r"``), to write into."""
    shutil.copytree(finished_fp_study, tmp_path / "r")
    return ResultsStore(tmp_path / "r")
