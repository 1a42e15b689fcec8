"""One strict base for every schema, one device rule, and run identities that do not move.

Before: experiment, claim and theory files took ``true`` for a number (read as 1) and ``.nan`` /
``.inf`` for a threshold; ``train.device: cuda:1`` was refused for task runs and accepted for LM
runs; the betas check and the LM budget were written twice.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import pkgutil
from pathlib import Path

import pytest
import torch
import yaml
from pydantic import BaseModel

import mixerzoo
from mixerzoo.config import RunConfig, TrainConfig, load_run_config, resolve_device
from mixerzoo.params import StrictModel, validate
from mixerzoo.registry import ConfigError
from mixerzoo.studies.computed.files import load_theory
from mixerzoo.studies.lm.ar_gap import LMARGapParams
from mixerzoo.studies.lm.common import LMBudget
from mixerzoo.studies.sweep.config import load_experiment, shipped_experiments
from mixerzoo.training.lm_config import LMTrainConfig

DATA = Path(__file__).parent / "data"

RUN = {
    "data": {"task": {"name": "mqar_cat", "vocab_size": 30, "seq_len": 8}, "n_train": 64, "n_test": 32},
    "model": {"d_model": 16, "n_layers": 1, "mixer": "cat"},
    "train": {"epochs": 1, "batch_size": 32},
}
EXPERIMENT = {
    "kind": "sweep",
    "name": "probe",
    "base": RUN,
    "grid": {"model.d_model": [8, 16]},
    "presets": {"quick": {}, "paper": {}},
}
CLAIM = {"claim": "x", "paper_ref": "p", "test": {"op": ">=", "value": 0.9}}
COMPARE = {"left": {"variant": "a"}, "right": {"variant": "b"}, "op": ">"}


def one_line(err: pytest.ExceptionInfo, *needles: str) -> str:
    message = str(err.value)
    assert "\n" not in message and len(message) < 1000, message
    for needle in needles:
        assert needle in message, f"{needle!r} not in {message!r}"
    return message


def test_every_schema_derives_from_the_strict_base():
    for info in pkgutil.walk_packages(mixerzoo.__path__, "mixerzoo."):
        if not info.name.endswith("__main__"):
            importlib.import_module(info.name)
    schemas, todo = [], list(BaseModel.__subclasses__())
    while todo:
        cls = todo.pop()
        todo += cls.__subclasses__()
        if cls.__module__.startswith("mixerzoo."):
            schemas.append(cls)
    loose = sorted(f"{c.__module__}.{c.__qualname__}" for c in schemas if not issubclass(c, StrictModel))
    assert not loose, f"schemas not derived from mixerzoo.params.StrictModel: {loose}"
    assert len(schemas) > 50  # mixers', tasks' and results' parameters, configs, files


def write(tmp_path: Path, payload: dict) -> Path:
    path = tmp_path / "file.yaml"
    path.write_text(yaml.safe_dump(payload))
    return path


@pytest.mark.parametrize(
    "change,needles",
    [
        ({"seeds": [0, True]}, ["seeds", "element 1 (True): a boolean is not a number"]),
        ({"test": {"n": True}}, ["test.n = True", "a boolean is not a number"]),
        ({"test": {"seq_lens": [8, False]}}, ["test.seq_lens", "a boolean is not a number"]),
        ({"figure": {"train_length": float("nan")}}, ["figure.train_length = nan"]),
        ({"figure": {"train_length": True}}, ["figure.train_length = True", "a boolean is not a number"]),
        ({"seeds": [2**64]}, ["seeds", "64-bit"]),
        ({"claims": [{**CLAIM, "test": {"op": ">=", "value": True}}]}, ["claims.0.test.value = True"]),
        ({"claims": [{**CLAIM, "test": {"op": ">=", "value": float("nan")}}]}, ["value = nan", "finite"]),
        ({"claims": [{**CLAIM, "test": {"op": ">=", "value": float("inf")}}]}, ["value = inf", "finite"]),
        (
            {"claims": [{**CLAIM, "test": None, "compare": {**COMPARE, "margin": True}}]},
            ["compare.margin = True", "a boolean is not a number"],
        ),
    ],
)
def test_a_bool_or_nan_in_an_experiment_file_or_claim_is_one_line(tmp_path, change, needles):
    with pytest.raises(ConfigError) as err:
        load_experiment(write(tmp_path, {**EXPERIMENT, **change}))
    one_line(err, *needles)


def test_a_nan_in_a_grid_or_the_base_names_the_point(tmp_path):
    exp = load_experiment(write(tmp_path, {**EXPERIMENT, "grid": {"train.lr": [1e-3, float("nan")]}}))
    with pytest.raises(ConfigError) as err:
        exp.expand()
    one_line(err, "point lr=nan", "train.lr = nan", "finite")


def test_a_bool_or_nan_in_a_theory_file_claim_is_one_line(tmp_path):
    raw = yaml.safe_load((Path(mixerzoo.__file__).parent / "studies/configs/cat-fig4.yaml").read_text())
    for value, needle in ((True, "value = True"), (float("nan"), "value = nan")):
        claims = [{**CLAIM, "test": {"op": ">=", "value": value}}]
        with pytest.raises(ConfigError) as err:
            load_theory(str(write(tmp_path, {**raw, "claims": claims})))
        one_line(err, needle)


@pytest.mark.parametrize("schema", [TrainConfig, LMTrainConfig])
def test_betas_are_checked_once_for_both_schemas(schema):
    for betas in ([0.9, 1.0], [-0.1, 0.9], [True, 0.9]):
        with pytest.raises(ConfigError) as err:
            validate(schema, {"betas": betas}, where="train")
        one_line(err, "train.betas")
    assert validate(schema, {"betas": [0.0, 0.5]}).betas == (0.0, 0.5)


# -- the device rule --------------------------------------------------------------------------
def fake_cuda(monkeypatch, count: int) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: count > 0)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: count)


@pytest.mark.parametrize("device", ["auto", "cpu", "cuda", "cuda:0", "cuda:1", "mps"])
def test_both_schemas_accept_every_device_form_on_any_machine(device):
    """Validation does not look at the machine: a stored config stays valid wherever it is read."""
    assert validate(TrainConfig, {"device": device}).device == device
    assert validate(LMTrainConfig, {"device": device}).device == device


@pytest.mark.parametrize("device", ["tpu", "gpu", "cuda:x", "cuda:-1", "cpu:0", "CUDA", ""])
def test_both_schemas_refuse_a_device_written_wrongly(device):
    for schema in (TrainConfig, LMTrainConfig):
        with pytest.raises(ConfigError) as err:
            validate(schema, {"device": device}, where="train")
        one_line(err, "train.device = ", "auto, cpu, cuda, cuda:N or mps")
    for schema in (LMBudget, LMARGapParams):  # the LM studies' budget: the same rule
        with pytest.raises(ConfigError) as err:
            validate(schema, {"device": device})
        one_line(err, "device = ", "auto, cpu, cuda, cuda:N or mps")
    assert validate(LMBudget, {"device": "cuda:1"}).device == "cuda:1"


def test_a_list_for_a_single_number_is_pydantics_own_error():
    with pytest.raises(ConfigError) as err:
        validate(TrainConfig, {"epochs": [True]}, where="train")
    one_line(err, "train.epochs", "valid integer")


def test_cuda_1_with_two_devices_and_with_one(monkeypatch):
    fake_cuda(monkeypatch, 2)
    assert resolve_device("cuda:1") == torch.device("cuda:1")
    assert resolve_device("auto") == torch.device("cuda")
    fake_cuda(monkeypatch, 1)
    with pytest.raises(ConfigError) as err:
        resolve_device("cuda:1")
    one_line(err, "train.device = 'cuda:1'", "cuda:0..0")
    fake_cuda(monkeypatch, 0)
    with pytest.raises(ConfigError) as err:
        resolve_device("cuda")
    one_line(err, "CUDA is not available")
    assert resolve_device("auto") == torch.device("cpu")


def test_mps_missing_is_one_line(monkeypatch):
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    with pytest.raises(ConfigError) as err:
        resolve_device("mps", what="--device")
    one_line(err, "--device 'mps'", "MPS is not available")


def test_cuda_1_with_one_device_stops_a_task_run_before_the_store(monkeypatch, run_cli, tmp_path):
    fake_cuda(monkeypatch, 1)
    config = write(tmp_path, RUN)
    out = run_cli("train", config, "--results", tmp_path / "r", "--set", "train.device=cuda:1")
    out.clear_error("train.device = 'cuda:1'", "cuda:0..0")
    assert not (tmp_path / "r").exists()


def test_cuda_1_with_one_device_stops_an_lm_run(monkeypatch, run_cli, tmp_path, tiny_text_dir):
    fake_cuda(monkeypatch, 1)
    data = tiny_text_dir
    lm = {
        "corpus": {"name": "char", "data_dir": str(data)},
        "model": {"d_model": 8, "n_layers": 1, "mixer": "attention"},
        "train": {"steps": 2, "batch_size": 2, "block_size": 8, "device": "cuda:1"},
    }
    out = run_cli("lm", "train", write(tmp_path, lm), "--out", tmp_path / "run")
    out.clear_error("train.device = 'cuda:1'", "cuda:0..0")
    assert not (tmp_path / "run").exists()


def test_bench_takes_the_same_rule(monkeypatch):
    from mixerzoo.training.throughput import check_device

    fake_cuda(monkeypatch, 0)
    assert check_device("auto") == "cpu"
    with pytest.raises(ConfigError) as err:
        check_device("cuda:0")
    one_line(err, "--device 'cuda:0'", "CUDA is not available")


# -- run identities ---------------------------------------------------------------------------
def test_config_hashes_of_every_shipped_experiment_are_unchanged():
    """The hashes of every planned run (in expansion order), recorded before the schemas moved to
    one base; a run's identity is its config hash, so a finished run must keep it."""
    stored = json.loads((DATA / "shipped_config_hashes.json").read_text())
    now = {}
    for name in shipped_experiments():
        for preset in ("quick", "paper"):
            key = f"{name}:{preset}"
            if key in stored["experiments"]:
                hashes = [p.config_hash for p in load_experiment(name, preset).expand()]
                digest = hashlib.sha256("\n".join(hashes).encode()).hexdigest()
                now[key] = {"runs": len(hashes), "sha256": digest}
    assert now == stored["experiments"]
    root = Path(mixerzoo.__file__).parent.parent
    for path, digest in stored["run_configs"].items():
        assert load_run_config(root / path).config_hash() == digest, path


def test_lm_config_hash_is_unchanged():
    from mixerzoo.training.lm_config import load_lm_config

    stored = json.loads((DATA / "shipped_config_hashes.json").read_text())["lm_configs"]
    root = Path(mixerzoo.__file__).parent.parent
    for path, digest in stored.items():
        assert load_lm_config(root / path)[0].config_hash() == digest, path


def test_a_run_config_round_trips_through_its_dump():
    cfg = load_run_config(RUN)
    assert validate(RunConfig, cfg.model_dump(mode="json")).config_hash() == cfg.config_hash()
