"""Probes of everyday mistakes: each is refused in one line (exit 2) before any work, and leaves
nothing behind; machine-readable output stays machine-readable.

Before the fixes: an output path under a regular file (``data --out``, ``train --json``, ``eval
--json``, ``report --out``) ended in a traceback after the work was done; ``d_model: 1000000000``
crashed the memory pre-check; ``hyena`` with ``inner_mlps: 1000000`` spent about 20 minutes
building its filter network; ``epochs: 1e23`` trained until killed; ``train.seed: 1e30`` passed
validation and failed the run; a malformed theory result crashed ``report``; ``--num-gpus -1``
reached Ray; ``bench --device tpu`` exited 0; ``train --json -`` mixed text into the JSON.
"""

from __future__ import annotations

import copy
import json
import os

import numpy as np
import pytest
import torch
import yaml

from mixerzoo.config import MAX_TRAIN_STEPS, load_run_config
from mixerzoo.registry import ConfigError
from mixerzoo.store.results import ResultsStore

RUN = {
    "name": "probe",
    "data": {"task": {"name": "mqar_cat", "vocab_size": 30, "seq_len": 8}, "n_train": 32, "n_test": 16},
    "model": {"d_model": 16, "n_layers": 1, "mixer": "attention"},
    "train": {"epochs": 1, "batch_size": 16, "device": "cpu"},
}


def config(tmp_path, name="run.yaml", **changes):
    """A copy of RUN with dotted ``changes`` (``model__d_model=...`` sets model.d_model), as a file."""
    cfg = copy.deepcopy(RUN)
    for key, value in changes.items():
        node = cfg
        *parents, last = key.split("__")
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value
    path = tmp_path / name
    path.write_text(yaml.safe_dump(cfg))
    return path


def tree(root) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A tiny trained checkpoint and a matching .npz, made through the CLI once for this module."""
    from mixerzoo.cli.main import main

    d = tmp_path_factory.mktemp("trained")
    rng = np.random.default_rng(0)
    labels = np.full((4, 8), -100)
    labels[:, 5] = rng.integers(0, 30, 4)
    np.savez(d / "data.npz", inputs=rng.integers(0, 30, (4, 8)), labels=labels)
    cfg = config(d)
    try:
        main(["train", str(cfg), "--results", str(d / "r"), "--quiet"])
    except SystemExit as e:
        assert e.code in (0, None)
    (run,) = ResultsStore(d / "r").runs()
    return {"checkpoint": run.checkpoint, "data": d / "data.npz"}


# -- output paths -----------------------------------------------------------------------------
def output_probes(tmp_path, trained, target):
    """Every command with an output option, writing to ``target``."""
    cfg = config(tmp_path)
    r = tmp_path / "r"
    return {
        "data --out": ["data", "mqar", "--n", "4", "--out", target],
        "train --json": ["train", cfg, "--results", r, "--quiet", "--json", target],
        "eval --json": ["eval", trained["checkpoint"], "--data", trained["data"], "--json", target],
        "study report --out": ["study", "report", "cat-mqar", "--results", r, "--out", target],
        "study plot --out": ["study", "plot", "cat-mqar", "--results", r, "--out", target],
        "study run --track-dir": ["study", "run", "cat-mqar", "--results", r, "--track-dir", target],
        "demo --plot": ["demo", "--results", r, "--plot", target],
        "bench --json": ["bench", "--mixers", "attention", "--seq-lens", "8", "--json", target],
        "study run --json": ["study", "run", "cat-fig4", "--results", r, "--json", target],
        "baselines run --json": ["baselines", "run", "ngram", "--data", trained["data"], "--json", target],
        "import-regbench --out": ["import-regbench", tmp_path / "x.tsv", "--out", target],
        "export-regbench --out": ["export-regbench", trained["data"], "--out", target],
        "lm train --out": ["lm", "train", cfg, "--out", target],
        "analyze attention-map --out": [
            "analyze",
            "attention-map",
            trained["checkpoint"],
            "--data",
            trained["data"],
            "--out",
            target,
        ],
    }


PROBES = [
    "data --out",
    "train --json",
    "eval --json",
    "study report --out",
    "study plot --out",
    "study run --track-dir",
    "demo --plot",
    "bench --json",
    "study run --json",
    "baselines run --json",
    "import-regbench --out",
    "export-regbench --out",
    "lm train --out",
    "analyze attention-map --out",
]


@pytest.mark.parametrize("probe", PROBES)
def test_an_output_under_a_regular_file_is_refused_before_any_work(run_cli, tmp_path, trained, probe):
    (tmp_path / "file").write_text("x")
    args = output_probes(tmp_path, trained, tmp_path / "file" / "sub" / "out.json")[probe]
    before = tree(tmp_path)
    run_cli(*args).clear_error("file' is a file")
    assert tree(tmp_path) == before  # no results store, no parent directories, nothing
    assert (tmp_path / "file").read_text() == "x"


@pytest.mark.parametrize(
    "probe", ["data --out", "train --json", "eval --json", "study report --out", "study plot --out"]
)
def test_an_empty_output_path_is_refused(run_cli, tmp_path, trained, monkeypatch, probe):
    monkeypatch.chdir(tmp_path)
    args = output_probes(tmp_path, trained, "")[probe]
    before = tree(tmp_path)
    run_cli(*args).clear_error("give a")
    assert tree(tmp_path) == before


@pytest.mark.parametrize("probe", ["train --json", "eval --json", "study report --out", "demo --plot"])
def test_a_directory_where_a_file_is_wanted_is_refused(run_cli, tmp_path, trained, probe):
    (tmp_path / "outdir").mkdir()
    args = output_probes(tmp_path, trained, tmp_path / "outdir")[probe]
    run_cli(*args).clear_error("is a directory")
    assert not list((tmp_path / "outdir").iterdir())


@pytest.mark.parametrize("probe", ["study plot --out", "study run --track-dir", "lm train --out"])
def test_a_file_where_a_directory_is_wanted_is_refused(run_cli, tmp_path, trained, probe):
    (tmp_path / "file").write_text("x")
    args = output_probes(tmp_path, trained, tmp_path / "file")[probe]
    run_cli(*args).clear_error("is a file, not a directory")
    assert (tmp_path / "file").read_text() == "x"


@pytest.mark.parametrize("probe", ["data --out", "train --json", "study report --out", "lm train --out"])
def test_an_unwritable_output_directory_is_refused(run_cli, tmp_path, trained, monkeypatch, probe):
    """Tests run as root, which may write anywhere: the permission answer is patched in."""
    from mixerzoo import outputs as paths

    (tmp_path / "locked").mkdir()
    monkeypatch.setattr(paths, "_writable", lambda d: d.resolve() != (tmp_path / "locked").resolve())
    args = output_probes(tmp_path, trained, tmp_path / "locked" / "new" / "out.json")[probe]
    run_cli(*args).clear_error("locked' is not writable")
    assert not list((tmp_path / "locked").iterdir())


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores permission bits")
def test_a_read_only_directory_is_refused_for_real(run_cli, tmp_path):
    (tmp_path / "ro").mkdir()
    (tmp_path / "ro").chmod(0o555)
    try:
        run_cli("data", "mqar", "--n", "4", "--out", tmp_path / "ro" / "x.npz").clear_error("not writable")
    finally:
        (tmp_path / "ro").chmod(0o755)


def test_missing_parent_directories_of_an_output_are_created(run_cli, tmp_path, trained):
    out = tmp_path / "new" / "deeper" / "metrics.json"
    r = run_cli("eval", trained["checkpoint"], "--data", trained["data"], "--json", out)
    assert r.code == 0, r.err
    assert "accuracy" in json.loads(out.read_text())


def test_a_write_that_fails_anyway_is_one_line(tmp_path):
    """A path that passed the checks can still fail when written (it changed meanwhile)."""
    from mixerzoo.outputs import write_json

    (tmp_path / "file").write_text("x")
    with pytest.raises(ConfigError, match="cannot write .*out.json"):
        write_json(str(tmp_path / "file" / "out.json"), {"a": 1})


# -- bounded numbers --------------------------------------------------------------------------
@pytest.mark.parametrize(
    "changes,needles",
    [
        ({"model__d_model": 10**9}, ["cannot be built", "64-bit", "model.d_model"]),
        ({"model__d_model": "1e9"}, ["model.d_model = '1e9'", "write the integer out"]),
        ({"model__d_model": 1e9}, ["cannot be built"]),
        ({"model__mixer": {"name": "hyena", "inner_mlps": 1_000_000}}, ["inner_mlps", "1024"]),
        ({"model__mixer": {"name": "hyena", "filter_order": 10**12}}, ["cannot be built"]),
        ({"model__mixer": {"name": "ngram_head", "order": 10**9}}, ["order", "1024"]),
        ({"model__mixer": {"name": "ngram_head", "order": 9}}, ["order = 9", "max_len = 8"]),
        ({"model__mixer": {"name": "landmark_cat", "block_size": 10**12}}, ["block_size", "max_len = 8"]),
        ({"model__n_layers": 10**6}, ["model.n_layers", "1024"]),
        ({"train__epochs": 10**23}, ["train.epochs", "64-bit integer"]),
        ({"train__epochs": 1e23}, ["train.epochs", "64-bit integer"]),
        ({"train__epochs": 10**9}, ["train.epochs = 1000000000", "2,000,000,000 optimizer steps"]),
        ({"train__max_steps": 10**9}, ["train.max_steps"]),
        ({"train__seed": 10**30}, ["train.seed", "64-bit integer"]),
        ({"data__seed": 2**63}, ["data.seed", "64-bit integer"]),
        ({"data__n_train": 10**30}, ["data.n_train", "64-bit integer"]),
        ({"data__test_seq_lens": [8, 10**30]}, ["data.test_seq_lens", "element"]),
        ({"data__task__seq_len": 10**30}, ["seq_len", "64-bit integer"]),
    ],
)
def test_huge_numbers_are_refused_at_once_and_record_nothing(run_cli, tmp_path, changes, needles):
    ResultsStore(tmp_path / "r")  # an existing store: it must gain no row
    path = config(tmp_path, **changes)
    run_cli("train", path, "--results", tmp_path / "r", "--quiet").clear_error(*needles)
    assert ResultsStore(tmp_path / "r").runs() == []


def test_a_config_error_does_not_create_the_results_store(run_cli, tmp_path):
    path = config(tmp_path, model__d_model=10**9)
    run_cli("train", path, "--results", tmp_path / "r", "--quiet").clear_error("cannot be built")
    assert not (tmp_path / "r").exists()


def test_the_step_bound_counts_epochs_times_batches_and_yields_to_max_steps():
    many = {**RUN, "train": {**RUN["train"], "epochs": MAX_TRAIN_STEPS}}  # 2 batches per epoch
    with pytest.raises(ConfigError, match="200,000,000 optimizer steps"):
        load_run_config(many)
    capped = load_run_config({**many, "train": {**many["train"], "max_steps": 3}})
    assert capped.train.epochs == MAX_TRAIN_STEPS
    just = {**RUN, "train": {**RUN["train"], "epochs": MAX_TRAIN_STEPS // 2}}
    assert load_run_config(just).train.epochs == MAX_TRAIN_STEPS // 2


def test_the_largest_64_bit_seed_trains(tmp_path):
    from mixerzoo.training import train

    top = 2**63 - 1
    cfg = load_run_config(
        {**RUN, "train": {**RUN["train"], "seed": top}, "data": {**RUN["data"], "seed": top}}
    )
    result = train(cfg, progress=False)
    assert np.isfinite(result.metrics["loss"])


# -- theory results, Ray resources, bench devices ---------------------------------------------
@pytest.mark.parametrize(
    "content,needle",
    [
        ("{not json", "Expecting property name"),
        ("[]", "Input should be a valid dictionary"),
        ('{"name": "cat-fig4"}', "missing required field 'claims'"),
        ('{"name": "cat-fig4", "claims": [1]}', "claims.0"),
        ('{"name": "cat-fig4", "claims": [{"claim": "a"}]}', "claims.0.verdict"),
        ('{"name": "cat-fig4", "claims": [], "lines": [{"setting": 1}]}', "lines.0.predicted"),
        ('{"name": "cat-fig4", "claims": [], "preset": 3}', "preset"),
        ("[" * 100_000, "not a theory result"),
    ],
)
@pytest.mark.parametrize("command", ["report", "check"])
def test_a_malformed_theory_result_is_one_line(run_cli, tmp_path, content, needle, command):
    (tmp_path / "theory").mkdir()
    (tmp_path / "theory" / "cat-fig4.json").write_text(content)
    before = tree(tmp_path)
    run_cli("study", command, "cat-fig4", "--results", tmp_path).clear_error("is not a theory result", needle)
    assert tree(tmp_path) == before  # no report written


@pytest.mark.parametrize(
    "option,value", [("--num-gpus", "-1"), ("--num-cpus", "-0.5"), ("--num-gpus", "nan")]
)
def test_negative_or_nan_ray_resources_are_refused(run_cli, tmp_path, option, value):
    run_cli(
        "study", "run", "cat-mqar", "--executor", "ray", option, value, "--results", tmp_path / "r"
    ).clear_error(option)
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("device", ["tpu", "cuda:x", "cpu:0", ""])
def test_bench_refuses_a_device_that_does_not_exist(run_cli, device):
    run_cli("bench", "--mixers", "attention", "--seq-lens", "8", "--device", device).clear_error("--device")


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
@pytest.mark.parametrize("device", ["cuda", "cuda:0"])
def test_bench_refuses_cuda_without_cuda(run_cli, device):
    run_cli("bench", "--mixers", "attention", "--seq-lens", "8", "--device", device).clear_error(
        "CUDA is not available"
    )


# -- JSON on stdout ---------------------------------------------------------------------------
def test_train_json_to_stdout_is_only_json(run_cli, tmp_path):
    r = run_cli("train", config(tmp_path), "--results", tmp_path / "r", "--quiet", "--json", "-")
    assert r.code == 0, r.err
    record = json.loads(r.out)
    assert record["status"] == "finished"
    assert f"run {record['run_id']}" in r.err and "checkpoint:" in r.err  # the text went to stderr


def test_eval_json_to_stdout_is_only_json(run_cli, trained):
    r = run_cli("eval", trained["checkpoint"], "--data", trained["data"], "--json", "-")
    assert r.code == 0, r.err
    assert set(json.loads(r.out)) >= {"accuracy", "loss"}
    assert "accuracy_per_query" in r.err


def test_bench_json_to_stdout_is_only_json(run_cli):
    args = ["--mixers", "attention", "--seq-lens", "8", "--batch", "2", "--steps", "1", "--warmup", "0"]
    r = run_cli("bench", *args, "--d-model", "8", "--layers", "1", "--vocab", "16", "--json", "-")
    assert r.code == 0, r.err
    assert [row["status"] for row in json.loads(r.out)["results"]] == ["ok"]
    assert "step_ms" in r.err


def test_study_run_of_a_computed_study_json_to_stdout_is_only_json(run_cli, tmp_path):
    small = ["--set", "seq_lens=[24, 40]", "--set", "num_tokens_to_copy=4", "--set", "n_test=20"]
    r = run_cli("study", "run", "cat-thm3-selective-copy", *small, "--results", tmp_path, "--json", "-")
    assert r.code == 0, r.err
    assert json.loads(r.out)["claims"][0]["verdict"] == "reproduced"
    assert "predicted" in r.err


def test_baselines_run_json_to_stdout_is_only_json(run_cli, tmp_path):
    data = tmp_path / "rb.npz"
    assert run_cli("data", "regbench", "--n", "4", "--out", data).code == 0
    r = run_cli("baselines", "run", "ngram", "--data", data, "--json", "-")
    assert r.code == 0, r.err
    assert json.loads(r.out)["baseline"] == "ngram"
    assert "accuracy" in r.err


def test_check_device_knows_how_many_cuda_devices_there_are(monkeypatch):
    from mixerzoo.training.throughput import check_device

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert check_device("cuda") == "cuda" and check_device("cuda:1") == "cuda:1"
    with pytest.raises(ConfigError, match="cuda:0..1"):
        check_device("cuda:2")
    assert check_device("cpu") == "cpu"


def test_language_model_runs_and_studies_share_the_step_bound():
    from pydantic import ValidationError

    from mixerzoo.config import MAX_TRAIN_STEPS
    from mixerzoo.studies.lm.common import LMTraining
    from mixerzoo.training.lm_config import LMTrainConfig

    for schema in (LMTrainConfig, LMTraining):
        assert schema(steps=MAX_TRAIN_STEPS).steps == MAX_TRAIN_STEPS
        with pytest.raises(ValidationError, match="less than or equal to 100000000"):
            schema(steps=MAX_TRAIN_STEPS + 1)
