"""``mixerzoo analyze probe`` and ``analyze attention-map`` on a small RegBench checkpoint."""

from __future__ import annotations

import json

import pytest
import torch

from mixerzoo.baselines.regbench_files import write_regbench
from mixerzoo.config import load_run_config
from mixerzoo.model import build_model
from mixerzoo.runs.task import save_checkpoint

TASK = {"name": "regbench", "max_string_len": 6, "min_strings": 3, "max_strings": 4, "seq_len": 40}


def _checkpoint(path, mixer):
    cfg = load_run_config(
        {
            "data": {"task": TASK, "n_train": 8, "n_test": 8},
            "model": {"d_model": 16, "n_layers": 2, "mixer": mixer},
        }
    )
    torch.manual_seed(0)
    save_checkpoint(path, build_model(cfg.model), cfg)
    return cfg


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("analyze")
    cfg = _checkpoint(d / "attn.pt", {"name": "attention", "num_heads": 2})
    _checkpoint(d / "retnet.pt", "retnet")
    task = cfg.data.build_task()
    write_regbench(task.make(60, 0, "train"), d / "train.npz")
    write_regbench(task.make(30, 0, "test"), d / "test.npz")
    return d


def test_probe_fits_one_probe_per_layer_and_task(files, run_cli):
    d = files
    args = ["analyze", "probe", d / "attn.pt", "--train", d / "train.npz", "--test", d / "test.npz"]
    code, out, err = run_cli(
        [
            *args,
            "--target",
            "frequency",
            "--target",
            "state",
            "--n",
            "2",
            "--samples",
            "200",
            "--json",
            d / "p.json",
        ],
    )
    assert code == 0, err
    payload = json.loads((d / "p.json").read_text())
    got = {(r["layer"], r["task"]) for r in payload["results"]}
    assert got == {(k, t) for k in (0, 1, 2) for t in ("frequency-2", "state")}
    for r in payload["results"]:
        assert r["value"] >= 0 and (r["metric"] != "accuracy" or r["value"] <= 1)
    assert out.splitlines()[0].split() == ["layer", "frequency-2", "state"]


def test_probe_refuses_bad_layers_and_orders_in_one_line(files, run_cli):
    d = files
    args = ["analyze", "probe", d / "attn.pt", "--train", d / "train.npz", "--test", d / "test.npz"]
    for extra, needle in (
        (["--layers", "0,7"], "layers 0..2"),
        (["--n", "two"], "--n"),
        (["--n", "0"], ">= 1"),
    ):
        code, _, err = run_cli([*args, *extra])
        assert code == 2 and needle in err and "Traceback" not in err
    code, _, err = run_cli(
        ["analyze", "probe", d / "nope.pt", "--train", d / "train.npz", "--test", d / "test.npz"]
    )
    assert code == 2 and "does not exist" in err


def test_attention_map_writes_one_png_per_attention_layer(files, run_cli):
    d = files
    code, out, err = run_cli(
        ["analyze", "attention-map", d / "attn.pt", "--data", d / "test.npz", "--out", d / "m.png"]
    )
    assert code == 0, err
    for k in (0, 1):
        assert (d / f"m_layer{k}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    code, out, err = run_cli(
        [
            "analyze",
            "attention-map",
            d / "attn.pt",
            "--data",
            d / "test.npz",
            "--layer",
            "1",
            "--out",
            d / "one.png",
        ],
    )
    assert code == 0 and (d / "one.png").is_file()


def test_attention_map_errors_are_one_line(files, run_cli):
    d = files
    cases = [
        (["--layer", "5"], "attention layers of this checkpoint: 0, 1"),
        (["--instance", "99"], "holds 30 instances"),
    ]
    for extra, needle in cases:
        code, _, err = run_cli(
            [
                "analyze",
                "attention-map",
                d / "attn.pt",
                "--data",
                d / "test.npz",
                "--out",
                d / "x.png",
                *extra,
            ],
        )
        assert code == 2 and needle in err and "Traceback" not in err
    code, _, err = run_cli(
        ["analyze", "attention-map", d / "retnet.pt", "--data", d / "test.npz", "--out", d / "x.png"]
    )
    assert code == 2 and "no attention-like layer" in err
