"""train.dtype and train.compile in task training: one implementation with LM training
(``training/precision.py``); the training data moved to the device once."""

from __future__ import annotations

import json
import math

import pytest
import torch
import yaml

from mixerzoo.cli.main import main
from mixerzoo.config import load_run_config
from mixerzoo.registry import ConfigError
from mixerzoo.store.results import ResultsStore
from mixerzoo.training import precision
from mixerzoo.training.train import DeviceData, train

#: one mixer of each family: attention, convolution, state space, linear recurrence, the rest
FAMILIES = {
    "attention": "attention",
    "convolution-augmented attention": "cat",
    "short + long convolution": "base_conv",
    "implicit long convolution": "hyena",
    "selective state space": "mamba",
    "diagonal state space": "s4d",
    "gated linear attention": "gla",
    "retention": "retnet",
    "linear attention + window": "based",
    "recurrent (LSTM)": "lstm",
}


def tiny(mixer: str = "attention", **train_fields) -> dict:
    return {
        "name": f"tiny-{mixer}",
        "data": {
            "task": {"name": "mqar", "vocab_size": 32, "seq_len": 16, "num_kv_pairs": 2},
            "n_train": 64,
            "n_test": 16,
        },
        "model": {"d_model": 16, "n_layers": 2, "mixer": mixer},
        "train": {"epochs": 3, "batch_size": 16, "lr": 3e-3, "device": "cpu", **train_fields},
    }


@pytest.mark.parametrize("family", FAMILIES)
def test_bfloat16_trains_through_the_cli_for_every_family(family, tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(tiny(FAMILIES[family])))
    out, results = tmp_path / "run.json", tmp_path / "r"
    main(
        [
            "train",
            str(path),
            "--results",
            str(results),
            "--quiet",
            "--json",
            str(out),
            "--set",
            "train.dtype=bfloat16",
        ]
    )
    rec = json.loads(out.read_text())
    assert rec["status"] == "finished", rec["error"]
    assert rec["config"]["train"]["dtype"] == "bfloat16"
    losses = [h["train_loss"] for h in ResultsStore(results).history(rec["run_id"])]
    assert len(losses) == 3 and all(math.isfinite(x) for x in losses)
    assert losses[-1] != losses[0]


def test_auto_is_float32_on_the_cpu_and_bfloat16_on_cuda(monkeypatch):
    assert precision.amp_dtype("auto", torch.device("cpu")) is None
    assert precision.amp_dtype("float32", torch.device("cuda")) is None
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    assert precision.amp_dtype("auto", torch.device("cuda")) == torch.bfloat16
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: False)
    assert precision.amp_dtype("auto", torch.device("cuda")) == torch.float16
    assert precision.amp_dtype("bfloat16", torch.device("cpu")) == torch.bfloat16


def test_float16_scales_the_loss_and_trains():
    cpu = torch.device("cpu")
    assert precision.grad_scaler(cpu, torch.float16).is_enabled()
    assert not precision.grad_scaler(cpu, torch.bfloat16).is_enabled()
    assert not precision.grad_scaler(cpu, None).is_enabled()
    result = train(load_run_config(tiny(dtype="float16")), progress=False)
    losses = [h["train_loss"] for h in result.history]
    assert all(math.isfinite(x) for x in losses) and losses[-1] != losses[0]


def test_float32_is_the_default_and_the_reduced_dtypes_change_the_numbers():
    eager = train(load_run_config(tiny()), progress=False)
    again = train(load_run_config(tiny(dtype="float32")), progress=False)
    bf16 = train(load_run_config(tiny(dtype="bfloat16")), progress=False)
    assert [h["train_loss"] for h in eager.history] == [h["train_loss"] for h in again.history]
    assert [h["train_loss"] for h in bf16.history] != [h["train_loss"] for h in eager.history]


def test_dtype_and_compile_in_the_config_hash():
    base = load_run_config(tiny())
    assert load_run_config(tiny(dtype="auto")).config_hash() == base.config_hash()
    assert load_run_config(tiny(dtype="bfloat16")).config_hash() != base.config_hash()
    assert load_run_config(tiny(compile=True)).config_hash() == base.config_hash()  # rounding only
    with pytest.raises(ConfigError, match="train.dtype") as err:
        load_run_config(tiny(dtype="float64"))
    assert "\n" not in str(err.value)


def test_compiled_step_trains_like_eager(monkeypatch, capsys):
    """Dynamo + AOTAutograd capture of the task loss (aot_eager: the graphs run eagerly, so the
    numbers match eager's to rounding); the inductor backend is the slow test below."""
    eager = train(load_run_config(tiny()), progress=False)
    monkeypatch.setattr(precision, "COMPILE_BACKEND", "aot_eager")
    compiled = train(load_run_config(tiny(compile=True)), progress=False)
    assert "torch.compile failed" not in capsys.readouterr().err
    torch.testing.assert_close(
        [h["train_loss"] for h in compiled.history],
        [h["train_loss"] for h in eager.history],
        rtol=1e-5,
        atol=0,
    )


@pytest.mark.slow
def test_inductor_compiled_step_trains_like_eager(capsys):
    eager = train(load_run_config(tiny()), progress=False)
    compiled = train(load_run_config(tiny(compile=True)), progress=False)
    assert "torch.compile failed" not in capsys.readouterr().err
    torch.testing.assert_close(
        [h["train_loss"] for h in compiled.history],
        [h["train_loss"] for h in eager.history],
        rtol=1e-4,
        atol=0,
    )


def test_a_compile_failure_is_one_warning_line_and_the_eager_run(monkeypatch, capsys):
    def broken_backend(gm, example_inputs):
        raise RuntimeError("no C++ compiler found\nsecond line")

    eager = train(load_run_config(tiny()), progress=False)
    capsys.readouterr()
    monkeypatch.setattr(precision, "COMPILE_BACKEND", broken_backend)
    fell_back = train(load_run_config(tiny(compile=True)), progress=False)
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("warning: train.compile = true: torch.compile failed (")
    assert "no C++ compiler found" in err[0]
    assert [h["train_loss"] for h in fell_back.history] == [h["train_loss"] for h in eager.history]


def count_copies(monkeypatch) -> list:
    calls = []
    real = torch.Tensor.to

    def counting(self, *args, **kwargs):
        calls.append(args)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(torch.Tensor, "to", counting)
    return calls


def test_data_that_fits_moves_to_the_device_once(monkeypatch):
    """``meta`` stands in for a GPU: the arrays move there once, and a batch is gathered there."""
    x, y = torch.arange(40).reshape(10, 4), torch.arange(10)
    data = DeviceData([x, y, None], torch.device("meta"), fits=True)
    assert data.where.type == "meta" and all(t.device.type == "meta" for t in data.tensors if t is not None)
    idx = torch.randperm(10).to(data.where)
    calls = count_copies(monkeypatch)
    for start in range(0, 10, 4):
        bx, by, bm = data.take(idx[start : start + 4])
        assert bx.device.type == by.device.type == "meta" and bm is None
    assert calls == []  # no per-step copy


def test_data_that_does_not_fit_stays_on_the_host_and_copies_each_batch(monkeypatch):
    x, y = torch.arange(40).reshape(10, 4), torch.arange(10)
    data = DeviceData([x, y, None], torch.device("meta"), fits=False)
    assert data.where.type == "cpu" and data.tensors[0] is x
    calls = count_copies(monkeypatch)
    bx, by, _ = data.take(torch.arange(4))
    assert bx.device.type == "meta" and len(calls) == 2


def test_on_the_cpu_the_training_arrays_are_used_in_place():
    x = torch.arange(8)
    assert DeviceData([x], torch.device("cpu")).tensors[0] is x
