"""Probes of ``mixerzoo eval``: every bad checkpoint or data file is one clear line, never a number.

Before the fixes, float inputs were truncated to ints and scored (exit 0), labels that are all
ignored and ``--batch-size -3`` reported accuracy 0.0, and NaN / empty / string / object data,
labels out of range and mismatched checkpoints ended in tracebacks.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from mixerzoo.config import load_run_config
from mixerzoo.model import build_model
from mixerzoo.runs.task import save_checkpoint

V, L = 30, 8
RUN = {
    "data": {"task": {"name": "mqar_cat", "vocab_size": V, "seq_len": L}, "n_train": 64, "n_test": 32},
    "model": {"d_model": 16, "n_layers": 1, "mixer": "attention", "position": "learned"},
}


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("eval")
    cfg = load_run_config(RUN)
    torch.manual_seed(0)
    model = build_model(cfg.model)
    save_checkpoint(d / "ck.pt", model, cfg)
    rng = np.random.default_rng(0)
    x = rng.integers(0, V, (12, L))
    y = np.full((12, L), -100)
    y[:, 3::2] = rng.integers(0, V, (12, 3))

    def npz(name, **arrays):
        np.savez(d / f"{name}.npz", **arrays)
        return d / f"{name}.npz"

    y_big, y_neg = y.copy(), y.copy()
    y_big[0, 3], y_neg[0, 3] = V, -5
    paths = {
        "good": npz("good", inputs=x, labels=y),
        "float": npz("float", inputs=x + 0.7, labels=y),
        "float_exact": npz("float_exact", inputs=x.astype(np.float64), labels=y),
        "nan": npz("nan", inputs=np.full((2, L), np.nan), labels=y[:2]),
        "empty": npz("empty", inputs=np.zeros((0, L), np.int64), labels=np.zeros((0, L), np.int64)),
        "strings": npz("strings", inputs=np.full((2, L), "a"), labels=np.full((2, L), "a")),
        "bool": npz("bool", inputs=np.ones((2, L), bool), labels=y[:2]),
        "all_ignored": npz("all_ignored", inputs=x, labels=np.full((12, L), -100)),
        "label_too_big": npz("label_too_big", inputs=x, labels=y_big),
        "label_negative": npz("label_negative", inputs=x, labels=y_neg),
        "input_too_big": npz("input_too_big", inputs=np.full((2, L), V), labels=y[:2]),
        "input_negative": npz("input_negative", inputs=np.full((2, L), -1), labels=y[:2]),
        "shape": npz("shape", inputs=x, labels=y[:, :-1]),
        "one_d": npz("one_d", inputs=x[0], labels=y[0]),
        "too_long": npz(
            "too_long", inputs=np.zeros((2, 4 * L), np.int64), labels=np.zeros((2, 4 * L), np.int64)
        ),
        "no_labels": npz("no_labels", inputs=x),
    }
    np.save(d / "plain.npy", x)
    paths["npy"] = d / "plain.npy"
    paths["garbage"] = d / "garbage.npz"
    paths["garbage"].write_bytes(b"PK\x03\x04 not really a zip")
    obj = d / "object.npz"
    np.savez(obj, inputs=np.array([[1, None]], dtype=object), labels=np.array([[1, None]], dtype=object))
    paths["object"] = obj
    return d, model, x, y, paths


@pytest.mark.parametrize(
    "name,needle",
    [
        ("float", "dtype float64"),
        ("float_exact", "dtype float64"),  # even integral floats: a dtype is a contract, not a guess
        ("nan", "dtype float64"),
        ("empty", "is empty"),
        ("strings", "dtype <U1"),
        ("bool", "dtype bool"),
        ("all_ignored", "nothing to score"),
        ("label_too_big", f"[0, {V})"),
        ("label_negative", "[-5, "),
        ("input_too_big", f"[0, {V})"),
        ("input_negative", f"[0, {V})"),
        ("shape", "equal [n, l] shapes"),
        ("one_d", "equal [n, l] shapes"),
        ("too_long", "max_len"),
        ("no_labels", "no array 'labels'"),
        ("npy", "one array"),
        ("garbage", "not a readable .npz"),
        ("object", "not a readable .npz"),
    ],
)
def test_bad_eval_data_is_one_clear_line(files, run_cli, name, needle):
    d, _, _, _, paths = files
    run_cli("eval", d / "ck.pt", "--data", paths[name]).clear_error(needle)


@pytest.mark.parametrize("batch", ["-3", "0", "2.5", "x"])
def test_eval_batch_size_must_be_a_positive_integer(files, run_cli, batch):
    d, _, _, _, paths = files
    run_cli("eval", d / "ck.pt", "--data", paths["good"], "--batch-size", batch).clear_error("--batch-size")


def test_eval_reports_the_accuracy_recomputed_by_hand(files, run_cli, tmp_path):
    """Correct, not just quiet: accuracy = argmax hits / supervised positions, counted directly."""
    d, model, x, y, paths = files
    out = tmp_path / "m.json"
    r = run_cli("eval", d / "ck.pt", "--data", paths["good"], "--batch-size", "5", "--json", out)
    assert r.code == 0, r.err
    got = json.loads(out.read_text())
    with torch.no_grad():
        pred = model(torch.from_numpy(x)).argmax(-1).numpy()
    sup = y != -100
    assert got["n_supervised"] == int(sup.sum())
    assert got["accuracy"] == pytest.approx(float((pred[sup] == y[sup]).mean()))
    per_example = np.mean([np.all(pred[i][sup[i]] == y[i][sup[i]]) for i in range(len(y))])
    assert got["accuracy_per_example"] == pytest.approx(per_example)


@pytest.mark.parametrize("dtype", [np.int32, np.int16, np.uint8, np.uint64])
def test_any_integer_dtype_scores_like_int64(files, run_cli, tmp_path, dtype):
    d, _, x, y, paths = files
    np.savez(tmp_path / "narrow.npz", inputs=x.astype(dtype), labels=y.astype(np.int32))
    a = run_cli("eval", d / "ck.pt", "--data", paths["good"], "--json", "-")
    b = run_cli("eval", d / "ck.pt", "--data", tmp_path / "narrow.npz", "--json", "-")
    assert a.code == b.code == 0, b.err
    acc_a, acc_b = (json.loads(r.out[r.out.index("{") :])["accuracy"] for r in (a, b))
    assert acc_a == acc_b


def legacy_payload(files) -> dict:
    return {"config_json": load_run_config(RUN).model_dump_json(), "state_dict": files[1].state_dict()}


def test_checkpoint_whose_weights_do_not_match_its_config(files, run_cli, tmp_path):
    d, _, _, _, paths = files
    payload = legacy_payload(files)  # the torch.save form of earlier versions
    other = build_model({**RUN["model"], "vocab_size": V, "max_len": L, "d_model": 8})
    torch.save({**payload, "state_dict": other.state_dict()}, tmp_path / "mismatch.pt")
    run_cli("eval", tmp_path / "mismatch.pt", "--data", paths["good"]).clear_error("do not match")
    torch.save({**payload, "state_dict": {}}, tmp_path / "empty_state.pt")
    run_cli("eval", tmp_path / "empty_state.pt", "--data", paths["good"]).clear_error("do not match")


def test_checkpoint_with_a_broken_config(files, run_cli, tmp_path):
    d, _, _, _, paths = files
    payload = legacy_payload(files)  # the torch.save form of earlier versions
    torch.save({**payload, "config_json": '{"data": 1}'}, tmp_path / "badcfg.pt")
    run_cli("eval", tmp_path / "badcfg.pt", "--data", paths["good"]).clear_error("config is not valid")
    torch.save({**payload, "config_json": "{not json"}, tmp_path / "notjson.pt")
    run_cli("eval", tmp_path / "notjson.pt", "--data", paths["good"]).clear_error("config is not valid")


def test_checkpoint_that_is_not_one(files, run_cli, tmp_path):
    _, _, _, _, paths = files
    (tmp_path / "text.pt").write_text("hello")
    run_cli("eval", tmp_path / "text.pt", "--data", paths["good"]).clear_error("could not be read")
    torch.save({"weights": torch.zeros(2)}, tmp_path / "other.pt")
    run_cli("eval", tmp_path / "other.pt", "--data", paths["good"]).clear_error("not a mixerzoo checkpoint")
    run_cli("eval", tmp_path, "--data", paths["good"]).clear_error()  # a directory
