"""A finished ``study run --all`` batch that several tests here read, built once per test run.

``first_batch``: one batch of a tiny good study and a broken one (planned fine, failing when its
runs are built) in a fresh results folder. A test that only reads the folder takes it as it is
(``read_only_use`` checks it is left as it was); a test that runs another batch there takes its
own copy (``first_batch_copy``).
"""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest
import yaml

from mixerzoo.studies.base import Console, ResultsDir, RunOptions
from mixerzoo.studies.run_all import run_all

TINY = {
    "kind": "sweep",
    "name": "tiny-all",
    "paper": "test Fig. 0",
    "base": {
        "data": {"task": {"name": "mqar_cat", "vocab_size": 30, "seq_len": 8}, "n_train": 32, "n_test": 16},
        "model": {"d_model": 8, "n_layers": 1, "mixer": "attention"},
        "train": {"epochs": 1, "batch_size": 16, "device": "cpu"},
    },
    "variants": {"attention-1L": {}},
    "aggregate": {"metric": "accuracy_per_query", "reduce": "max", "over": []},
    "claims": [
        {
            "claim": "attention learns it",
            "paper_ref": "test Fig. 0",
            "test": {"op": ">=", "value": 0.0},
        }
    ],
    "presets": {"quick": {}, "paper": {}},
}


def tiny_mad(name: str, presets: dict | None = None) -> dict:
    """A one-run MAD study (memorization, 1-layer attention, one lr and weight decay) whose one claim
    holds for any score: with its preset as given it reads "reproduced"."""
    return {
        "kind": "mad",
        "name": name,
        "claim": "paper: test",
        "base": {
            "data": {"task": {"name": "mad_memorization"}, "n_train": 32, "n_test": 16},
            "model": {"d_model": 8, "n_layers": 1, "mixer": "attention", "state_mixer": None},
            "train": {"batch_size": 16, "max_steps": 1, "eval_every": 100},
        },
        "variants": {"attention": {}},
        "grid": {"data.task.name": ["mad_memorization"], "train.lr": [1e-3], "train.weight_decay": [0.0]},
        "aggregate": {
            "metric": "accuracy_per_query",
            "reduce": "max",
            "over": ["train.lr", "train.weight_decay"],
        },
        "presets": presets or {"quick": {}, "paper": {}},
        "claims": [
            {
                "claim": "attention scores",
                "paper_ref": "test",
                "where": {"variant": "attention"},
                "metric": "mad_score",
                "test": {"op": ">=", "value": 0.0},
            }
        ],
    }


def console(lines: list[str]) -> Console:
    """A console that appends every line it is given to ``lines`` and writes nothing."""
    return Console(
        echo=lambda text="", err=False: lines.append(str(text)),
        write_json=lambda path, data: None,
        check_dir=lambda path, what: None,
    )


def studies(folder: Path) -> list[str]:
    """The files of a broken study and of ``TINY``, written to ``folder``: [broken, good]."""
    good = folder / "tiny-all.yaml"
    good.write_text(yaml.safe_dump(TINY))
    broken = folder / "broken.yaml"  # planned fine, fails when its runs are built
    broken.write_text(
        yaml.safe_dump({**TINY, "name": "broken", "base": {**TINY["base"], "model": {"mixer": 3}}})
    )
    return [str(broken), str(good)]


@dataclasses.dataclass(frozen=True)
class Batch:
    """What one ``run_all`` of ``names`` (quick preset) did: its exit code and console lines, and
    the results folder it wrote."""

    names: tuple[str, ...]
    results: Path
    code: int
    lines: tuple[str, ...]


@pytest.fixture(scope="session")
def first_batch(tmp_path_factory) -> Batch:
    """The first batch of ``studies`` in a fresh results folder; built once per test run."""
    folder = tmp_path_factory.mktemp("run-all")
    names, lines = studies(folder), []
    where = ResultsDir(folder / "r", explicit=True)
    code = run_all("quick", where, RunOptions(quiet=True), console(lines), names=names)
    return Batch(tuple(names), folder / "r", code, tuple(lines))


@pytest.fixture
def first_batch_copy(first_batch, tmp_path) -> Batch:
    """``first_batch`` with this test's own copy of its results folder (at ``tmp_path / "r"``)."""
    shutil.copytree(first_batch.results, tmp_path / "r")
    return dataclasses.replace(first_batch, results=tmp_path / "r")
