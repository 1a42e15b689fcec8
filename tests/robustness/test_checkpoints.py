"""Checkpoints: one safetensors + JSON format, exact round trips, files of earlier versions, and no pickle.

Every command that reads a checkpoint is given a file whose unpickling would create a marker
file: each refuses it in one line naming the file, and the marker never appears. Files written
by the previous version (``torch.save``; kept under ``data/``) still load.
"""

from __future__ import annotations

import json
import pathlib
import pickle
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from safetensors.torch import load_file, save_file

import mixerzoo
from mixerzoo.checkpoint import Checkpoint, load_checkpoint, model_from_checkpoint, save_checkpoint
from mixerzoo.config import load_run_config
from mixerzoo.evaluation.lm_runs import load_lm_run
from mixerzoo.mixers import SEQUENCE_MIXERS
from mixerzoo.model import build_model
from mixerzoo.registry import ConfigError
from mixerzoo.runs import task as runs
from mixerzoo.training.lm import read_checkpoint, train_lm
from mixerzoo.training.lm_config import load_lm_config

DATA = Path(__file__).parent / "data"
TASK_RUN = {
    "data": {"task": {"name": "mqar_cat", "vocab_size": 12, "seq_len": 8}, "n_train": 64, "n_test": 32},
    "model": {"d_model": 8, "n_layers": 1, "mixer": "attention", "position": "learned"},
}
#: the config of data/legacy_lm_run (see data/README.md)
LM_RUN = {
    "corpus": {"name": "char"},
    "model": {"d_model": 8, "n_layers": 1, "mixer": {"name": "attention", "num_heads": 2}},
    "train": {
        "steps": 4,
        "batch_size": 2,
        "block_size": 8,
        "warmup": 1,
        "lr": 3e-3,
        "eval_every": 2,
        "eval_iters": 1,
        "ckpt_every": 2,
        "seed": 5,
        "device": "cpu",
        "threads": 1,
    },
}


class Payload:
    """Unpickling this calls ``Path.touch(marker)``: proof that loading ran code from the file."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (pathlib.Path.touch, (pathlib.Path(self.marker),))


@pytest.fixture
def data(tmp_path):
    """A copy of ``data/`` (reading a corpus writes its token cache next to it)."""
    shutil.copytree(DATA, tmp_path / "data")
    return tmp_path / "data"


def token_file(path: Path, vocab: int = 12, length: int = 8) -> Path:
    rng = np.random.default_rng(0)
    labels = np.full((6, length), -100)
    labels[:, 3::2] = rng.integers(0, vocab, (6, len(range(3, length, 2))))
    np.savez(path, inputs=rng.integers(0, vocab, (6, length)), labels=labels)
    return path


def lm_config(data: Path, tmp_path: Path, **train):
    raw = {**LM_RUN, "train": {**LM_RUN["train"], **train}}
    return load_lm_config(raw, data_dir=str(data / "legacy_corpus"), cache_dir=str(tmp_path / "cache"))


# -- the format -------------------------------------------------------------------------
def test_a_nested_state_round_trips_exactly(tmp_path):
    tied = torch.randn(3, 4)
    state = {
        "config": {"a": [1, 2.5, None, True, "x"], "nan": float("nan")},
        "model": {"embed.weight": tied, "head.weight": tied},  # tied weights share memory
        "ints": {0: torch.tensor(1.0), 7: {"$odd": (0.9, 0.99)}},
        "big": 2**127 + 3,
        "dtypes": [torch.zeros(2, dtype=torch.bfloat16), torch.get_rng_state(), torch.tensor(5)],
    }
    save_checkpoint(tmp_path / "c.pt", "task", state)
    got = load_checkpoint(tmp_path / "c.pt")
    assert (got.kind, got.version) == ("task", 2)
    assert got.state["config"]["a"] == [1, 2.5, None, True, "x"] and np.isnan(got.state["config"]["nan"])
    assert torch.equal(got.state["model"]["embed.weight"], tied)
    assert torch.equal(got.state["model"]["head.weight"], tied)
    assert set(got.state["ints"]) == {0, 7} and got.state["ints"][7] == {"$odd": (0.9, 0.99)}
    assert got.state["big"] == 2**127 + 3
    for a, b in zip(got.state["dtypes"], state["dtypes"]):
        assert a.dtype == b.dtype and torch.equal(a, b)


def test_the_file_is_safetensors_with_json_metadata(tmp_path):
    model = build_model({"vocab_size": 12, "d_model": 8, "n_layers": 1, "max_len": 8})
    runs.save_checkpoint(tmp_path / "c.pt", model, load_run_config(TASK_RUN))
    tensors = load_file(tmp_path / "c.pt")  # any safetensors reader, no mixerzoo needed
    assert torch.equal(tensors["model/embed.weight"], model.state_dict()["embed.weight"])
    from safetensors import safe_open

    with safe_open(str(tmp_path / "c.pt"), "pt") as fh:
        header = json.loads(fh.metadata()["mixerzoo"])
    assert header["version"] == 2 and header["kind"] == "task"
    assert header["state"]["config"]["model"]["d_model"] == 8


@pytest.mark.parametrize("mixer", SEQUENCE_MIXERS.names())
def test_every_mixer_round_trips_to_the_same_outputs(tmp_path, mixer):
    cfg = {"vocab_size": 12, "d_model": 16, "n_layers": 1, "mixer": mixer, "max_len": 16}
    torch.manual_seed(0)
    model = build_model(cfg).eval()
    save_checkpoint(tmp_path / "c.pt", "lm", {"config": {"model": cfg}, "model": model.state_dict()})
    twin = model_from_checkpoint(load_checkpoint(tmp_path / "c.pt"), cfg)
    x = torch.randint(0, 12, (2, 16))
    with torch.no_grad():
        assert torch.equal(model(x), twin(x))


def test_adamw_state_round_trips_and_the_next_step_is_identical(tmp_path):
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 3)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, betas=(0.8, 0.95), fused=True)
    for _ in range(3):
        model(torch.randn(5, 4)).square().sum().backward()
        opt.step()
        opt.zero_grad()
    save_checkpoint(
        tmp_path / "c.pt", "lm", {"config": {}, "model": model.state_dict(), "opt": opt.state_dict()}
    )
    state = load_checkpoint(tmp_path / "c.pt").state
    twin = torch.nn.Linear(4, 3)
    twin.load_state_dict(state["model"])
    twin_opt = torch.optim.AdamW(twin.parameters(), lr=1.0, fused=True)
    twin_opt.load_state_dict(state["opt"])
    assert twin_opt.param_groups[0]["betas"] == (0.8, 0.95)
    x = torch.randn(5, 4)
    for m, o in ((model, opt), (twin, twin_opt)):
        m(x).square().sum().backward()
        o.step()
    for a, b in zip(model.parameters(), twin.parameters()):
        assert torch.equal(a, b)


def test_a_checkpoint_file_gets_the_mode_of_any_new_file(tmp_path):
    (tmp_path / "plain").write_text("")
    save_checkpoint(tmp_path / "c.pt", "task", {"config": {}, "model": {"w": torch.zeros(2)}})
    assert (tmp_path / "c.pt").stat().st_mode == (tmp_path / "plain").stat().st_mode


def test_a_failed_write_keeps_the_previous_checkpoint(tmp_path, monkeypatch):
    save_checkpoint(tmp_path / "c.pt", "task", {"config": {"v": 1}, "model": {}})

    def full_disk(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("mixerzoo.checkpoint.save_file", full_disk)
    with pytest.raises(OSError, match="No space"):
        save_checkpoint(tmp_path / "c.pt", "task", {"config": {"v": 2}, "model": {}})
    assert load_checkpoint(tmp_path / "c.pt").config == {"v": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["c.pt"]


def test_no_pickle_load_in_the_package():
    """No ``weights_only=False``, ``pickle.load(s)`` or unrestricted unpickler in mixerzoo's source.

    The one ``pickle.Unpickler`` is the CIFAR-10 reader's, which admits numpy arrays, lists and
    dicts only (``tasks/sequential_images.py``).
    """
    root = Path(mixerzoo.__file__).parent
    found = []
    for f in root.rglob("*.py"):
        text = f.read_text()
        for pattern in (
            r"weights_only\s*=\s*False",
            r"pickle\.loads?\(",
            r"torch\.load\((?![^)]*weights_only=True)",
        ):
            found += [f"{f.name}: {m.group(0)}" for m in re.finditer(pattern, text)]
        if "Unpickler" in text and f.name != "sequential_images.py":
            found.append(f"{f.name}: Unpickler")
    assert not found


# -- files of the previous version ------------------------------------------------------
def test_a_task_checkpoint_of_the_previous_version_loads(data, run_cli, tmp_path):
    old = torch.load(data / "legacy_task.pt", weights_only=True)
    model, cfg = runs.load_checkpoint(data / "legacy_task.pt")
    assert cfg.model.d_model == 8 and load_checkpoint(data / "legacy_task.pt").version == 1
    for name, value in model.state_dict().items():
        assert torch.equal(value, old["state_dict"][name]), name
    r = run_cli("eval", data / "legacy_task.pt", "--data", token_file(tmp_path / "d.npz"), "--json", "-")
    assert r.code == 0, r.err
    assert json.loads(r.out)["n_supervised"] == 6 * 3


def test_an_lm_checkpoint_of_the_previous_version_loads_and_evaluates(data, run_cli, tmp_path):
    run = load_lm_run(data / "legacy_lm_run", data_dir=str(data / "legacy_corpus"))
    old = torch.load(data / "legacy_lm_run" / "checkpoint.pt", weights_only=True)
    assert run.step == 2 and run.train_len == 8
    for name, value in run.model.state_dict().items():
        assert torch.equal(value, old["model"][name]), name
    r = run_cli("eval", data / "legacy_lm_run", "--data-dir", data / "legacy_corpus", "--json", "-")
    assert r.code == 0, r.err
    got = json.loads(r.out)
    assert (
        got["kind"] == "lm" and got["split"] == "val" and got["bpc"] == pytest.approx(got["loss"] / np.log(2))
    )
    lengths = run_cli("lm", "eval", "lengths", data / "legacy_lm_run", "--data-dir", data / "legacy_corpus")
    assert lengths.code == 0, lengths.err
    arrays = run_cli(
        "eval", data / "legacy_lm_run", "--data", token_file(tmp_path / "d.npz", vocab=10), "--json", "-"
    )
    assert arrays.code == 0, arrays.err
    assert json.loads(arrays.out)["n_supervised"] == 6 * 3


def test_resuming_from_a_previous_version_checkpoint_gives_the_uninterrupted_curve(data, tmp_path):
    cfg, corpus = lm_config(data, tmp_path)
    full = train_lm(cfg, corpus, tmp_path / "full")
    shutil.copytree(data / "legacy_lm_run", tmp_path / "old")
    resumed = train_lm(cfg, corpus, tmp_path / "old")
    assert resumed.resumed_from == 2
    # the legacy folder was trained on another machine: the same curve up to float rounding there
    assert len(resumed.history) == len(full.history)
    for got, want in zip(resumed.history, full.history):
        assert got.keys() == want.keys()
        for key, value in want.items():
            close = isinstance(value, float) and got[key] == pytest.approx(value, rel=1e-5)
            assert close or got[key] == value, (key, got[key], value)
    assert load_checkpoint(tmp_path / "old" / "checkpoint.pt").version == 2  # rewritten in this format


# -- pickle payloads --------------------------------------------------------------------
def crafted(path: Path, marker: Path, how: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    evil = Payload(marker)
    if how == "lm":
        torch.save({"format": 1, "config": {"model": {}}, "model": evil, "step": 1}, path)
    elif how == "task":
        torch.save({"config_json": "{}", "state_dict": {"w": evil}}, path)
    elif how == "legacy-torch":
        torch.save({"format": 1, "x": evil}, path, _use_new_zipfile_serialization=False)
    else:  # a bare pickle
        path.write_bytes(pickle.dumps({"format": 1, "model": evil}))
    return path


def test_the_crafted_payload_runs_code_when_unpickled(tmp_path):
    """The control: the payload of the tests below is live (an unrestricted load creates the marker)."""
    marker = tmp_path / "marker"
    for how in ("lm", "task", "legacy-torch", "bare"):
        crafted(tmp_path / how / "checkpoint.pt", marker, how)
        marker.unlink(missing_ok=True)
        with open(tmp_path / how / "checkpoint.pt", "rb") as fh:
            if how == "bare":
                pickle.load(fh)  # noqa: S301 - the point of this control
            else:
                torch.load(fh, weights_only=False)  # noqa: S614
        assert marker.exists(), how


def commands(ckpt: Path, data: Path, tmp_path: Path) -> dict[str, list]:
    folder = ckpt.parent
    npz = token_file(tmp_path / "d.npz")
    (tmp_path / "lm.yaml").write_text(yaml.safe_dump(LM_RUN))
    corpus = ["--data-dir", data / "legacy_corpus"]
    return {
        "eval file": ["eval", ckpt, "--data", npz],
        "eval lm": ["eval", ckpt, *corpus],
        "eval folder": ["eval", folder, *corpus],
        "lm eval ar-slices": ["lm", "eval", "ar-slices", folder, *corpus],
        "lm eval lengths": ["lm", "eval", "lengths", folder, *corpus],
        "lm train resume": [
            "lm",
            "train",
            tmp_path / "lm.yaml",
            *corpus,
            "--cache-dir",
            tmp_path / "c",
            "--out",
            folder,
            "--results",
            tmp_path / "results",
        ],
        "analyze probe": ["analyze", "probe", ckpt, "--train", npz, "--test", npz],
        "analyze attention-map": [
            "analyze",
            "attention-map",
            ckpt,
            "--data",
            npz,
            "--out",
            tmp_path / "m.png",
        ],
    }


@pytest.mark.parametrize("how", ["lm", "task", "legacy-torch", "bare"])
def test_every_checkpoint_reader_refuses_a_pickle_payload_without_running_it(data, run_cli, tmp_path, how):
    marker = tmp_path / "marker"
    ckpt = crafted(tmp_path / "run" / "checkpoint.pt", marker, how)
    for name, args in commands(ckpt, data, tmp_path).items():
        message = run_cli(*args).clear_error(str(ckpt))
        assert not marker.exists(), f"{name}: the payload ran"
        assert "weights_only" not in message, name
        wanted = "could not be read" if how == "bare" else "refused: loading it needs pickle"
        assert wanted in message, f"{name}: {message}"
    for reader in (runs.load_checkpoint, load_lm_run, read_checkpoint):  # the readers behind them
        with pytest.raises(ConfigError, match=re.escape(str(ckpt))):
            reader(ckpt)
    assert not marker.exists()


# -- malformed checkpoints --------------------------------------------------------------
def lm_state(data: Path, tmp_path: Path) -> dict:
    """The state of a real `lm train` checkpoint (step 2 of 4), in this version's format."""
    cfg, corpus = lm_config(data, tmp_path)
    train_lm(cfg, corpus, tmp_path / "real", stop_after=2)
    return read_checkpoint(tmp_path / "real" / "checkpoint.pt")


def test_an_lm_checkpoint_with_missing_or_bad_entries_is_one_line(data, run_cli, tmp_path):
    state = lm_state(data, tmp_path)
    (tmp_path / "lm.yaml").write_text(yaml.safe_dump(LM_RUN))
    corpus = ["--data-dir", data / "legacy_corpus", "--cache-dir", tmp_path / "c"]
    cases = {
        "no-optimizer": ({k: v for k, v in state.items() if k != "optimizer"}, "it has no 'optimizer'"),
        "bad-rng": ({**state, "rng": [{"bit_generator": "PCG64", "state": 3}]}, "cannot be resumed"),
        "bad-optimizer": ({**state, "optimizer": {"state": {}, "param_groups": []}}, "cannot be resumed"),
        "bad-step": ({**state, "step": "two"}, "cannot be resumed"),
        "bad-history": ({**state, "history": [1, 2]}, "cannot be resumed"),
        "task-kind": (None, "it is a task-run checkpoint, not a language-model one"),
    }
    for name, (bad, needle) in cases.items():
        (tmp_path / name).mkdir()
        save_checkpoint(tmp_path / name / "checkpoint.pt", "lm" if bad else "task", bad or state)
        run_cli("lm", "train", tmp_path / "lm.yaml", *corpus, "--out", tmp_path / name).clear_error(needle)
    readers = {
        "no-model": ({k: v for k, v in state.items() if k != "model"}, "no model weights"),
        "no-corpus": ({**state, "config": {**state["config"], "corpus": None}}, "no 'corpus' section"),
        "bad-model": ({**state, "config": {**state["config"], "model": {"d_model": "wide"}}}, "not valid"),
    }
    for name, (bad, needle) in readers.items():
        (tmp_path / name).mkdir()
        save_checkpoint(tmp_path / name / "checkpoint.pt", "lm", bad)
        run_cli("lm", "eval", "lengths", tmp_path / name, *corpus[:2]).clear_error(needle)
        run_cli("eval", tmp_path / name, *corpus[:2]).clear_error(needle)


@pytest.mark.parametrize("d_model", [10**9, 1e9, 10**6])
def test_a_huge_model_in_a_checkpoint_config_is_one_line_before_any_allocation(
    data, run_cli, tmp_path, d_model
):
    cfg = load_run_config(TASK_RUN).model_dump(mode="json")
    cfg["model"]["d_model"] = d_model
    weights = build_model(load_run_config(TASK_RUN).model).state_dict()
    save_checkpoint(tmp_path / "huge.pt", "task", {"config": cfg, "model": weights})
    npz = token_file(tmp_path / "d.npz")
    run_cli("eval", tmp_path / "huge.pt", "--data", npz).clear_error(str(tmp_path / "huge.pt"))
    lm = lm_state(data, tmp_path)
    lm["config"]["model"]["d_model"] = d_model
    (tmp_path / "lm").mkdir()
    save_checkpoint(tmp_path / "lm" / "checkpoint.pt", "lm", lm)
    run_cli("eval", tmp_path / "lm", "--data-dir", data / "legacy_corpus").clear_error("checkpoint")


def test_weights_that_do_not_match_the_config_are_named(tmp_path):
    weights = build_model({"vocab_size": 12, "d_model": 8, "n_layers": 1, "max_len": 8}).state_dict()
    ckpt = Checkpoint(tmp_path / "c.pt", "task", {"config": {}, "model": weights}, 2)
    with pytest.raises(
        ConfigError, match=r"'embed.weight' has shape \[12, 8\], the config's model \[12, 16\]"
    ):
        model_from_checkpoint(ckpt, {"vocab_size": 12, "d_model": 16, "n_layers": 1, "max_len": 8})
    with pytest.raises(ConfigError, match="missing 'blocks.1"):
        model_from_checkpoint(ckpt, {"vocab_size": 12, "d_model": 8, "n_layers": 2, "max_len": 8})


def test_foreign_damaged_and_newer_files_are_one_line(run_cli, tmp_path):
    npz = token_file(tmp_path / "d.npz")
    save_file({"w": torch.zeros(2)}, tmp_path / "foreign.pt")
    save_file(
        {"w": torch.zeros(2)},
        tmp_path / "newer.pt",
        metadata={"mixerzoo": json.dumps({"version": 99, "kind": "task"})},
    )
    save_file({"w": torch.zeros(2)}, tmp_path / "damaged.pt", metadata={"mixerzoo": "{not json"})
    deep = '{"version": 2, "kind": "task", "state": ' + "[" * 100_000 + "]" * 100_000 + "}"
    save_file({"w": torch.zeros(2)}, tmp_path / "deep.pt", metadata={"mixerzoo": deep})
    save_checkpoint(tmp_path / "good.pt", "task", {"config": {}, "model": {"w": torch.zeros(64)}})
    (tmp_path / "truncated.pt").write_bytes((tmp_path / "good.pt").read_bytes()[:-100])
    (tmp_path / "empty.pt").write_bytes(b"")
    expected = {
        "foreign": "not a mixerzoo checkpoint",
        "newer": "format version 99",
        "damaged": "damaged",
        "deep": "damaged",
        "truncated": "could not be read",
        "empty": "could not be read",
    }
    for name, needle in expected.items():
        run_cli("eval", tmp_path / f"{name}.pt", "--data", npz).clear_error(
            needle, str(tmp_path / f"{name}.pt")
        )


# -- eval takes any mixerzoo checkpoint -------------------------------------------------
def test_eval_takes_a_run_id_of_the_store(run_cli, tmp_path):
    (tmp_path / "run.yaml").write_text(yaml.safe_dump({**TASK_RUN, "train": {"epochs": 1, "batch_size": 32}}))
    results = tmp_path / "results"
    assert run_cli("train", tmp_path / "run.yaml", "--results", results, "--quiet").code == 0
    listed = run_cli("results", "--json", "--results", results)
    run_id = json.loads(listed.out)[0]["run_id"]
    npz = token_file(tmp_path / "d.npz")
    by_id = run_cli("eval", run_id, "--results", results, "--data", npz, "--json", "-")
    assert by_id.code == 0, by_id.err
    assert json.loads(by_id.out)["kind"] == "task"
    run_cli("eval", "no-such-run", "--results", results, "--data", npz).clear_error(
        "'no-such-run' does not exist"
    )
    own = run_cli("eval", run_id, "--results", results, "--json", "-")  # no --data: its own test split
    assert own.code == 0, own.err
    stored = json.loads(listed.out)[0]["metrics"]["accuracy_per_query"]
    assert json.loads(own.out)["accuracy_per_query"] == pytest.approx(stored)


def test_eval_of_an_lm_checkpoint_scores_its_validation_split(data, run_cli, tmp_path):
    """The loss is the mean next-token cross-entropy over consecutive windows of the val split."""
    cfg, corpus = lm_config(data, tmp_path)
    train_lm(cfg, corpus, tmp_path / "run")
    r = run_cli(
        "eval", tmp_path / "run" / "checkpoint.pt", "--data-dir", data / "legacy_corpus", "--json", "-"
    )
    assert r.code == 0, r.err
    got = json.loads(r.out)
    val = corpus.splits["val"]
    n = (len(val) - 1) // 8
    windows = torch.from_numpy(np.asarray(val[: n * 8 + 1])[np.arange(n)[:, None] * 8 + np.arange(9)]).long()
    model = load_lm_run(tmp_path / "run", data_dir=str(data / "legacy_corpus")).model
    with torch.no_grad():
        logits = model(windows[:, :-1])
    expected = torch.nn.functional.cross_entropy(
        logits.reshape(-1, logits.shape[-1]), windows[:, 1:].reshape(-1)
    )
    assert (got["context"], got["windows"], got["tokens"]) == (8, n, n * 8)
    assert got["loss"] == pytest.approx(float(expected), rel=1e-5)
