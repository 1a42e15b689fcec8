"""A probe study's models are runs of its results folder (``studies/computed/trained.py``).

Run through ``mixerzoo study run``, a probe study trains each model as a task run of the results
folder; a second run of it, or another study planning a model with the same config (a sweep's run
included), reads the model back from its checkpoint instead of training it again, with the same
cells. A model made by other code is trained again.
"""

from __future__ import annotations

import json

import pytest

from mixerzoo.analysis import icll_probes
from mixerzoo.store.results import ResultsStore
from mixerzoo.studies.computed.files import load_theory, resolve_params, run_theory
from mixerzoo.studies.computed.trained import store_trainer
from mixerzoo.studies.sweep.config import load_experiment
from tests.analysis.test_icll_experiments import TINY_TASK

TF = {"mixer": {"name": "attention", "num_heads": 1}, "position": "learned", "n_layers": 1}
SETS = {
    "task": TINY_TASK,
    "n_train": 16,
    "n_test": 8,
    "d_model": 8,
    "models": {"TF/1": TF, "GLA/1": {"mixer": {"name": "gla", "num_heads": 1}, "n_layers": 1}},
    "train": {"epochs": 1, "batch_size": 8, "lr": 1e-3, "eval_every": 1},
    "orders": [2],
    "targets": ["frequency"],
    "probe_steps": 3,
    "probe_train": 40,
    "probe_test": 20,
}


def _run(store, lines):
    exp = load_theory("icll-fig4")
    return run_theory(exp, "quick", SETS, log=lines.append, trainer=store_trainer(store, exp.name))


def test_a_second_run_reads_the_models_back_with_the_same_cells(tmp_path):
    store = ResultsStore(tmp_path / "res")
    first_lines, second_lines = [], []
    first = _run(store, first_lines)
    runs = store.runs()
    assert len(runs) == 2 and {r.status for r in runs} == {"finished"}
    assert {r.experiment for r in runs} == {"icll-fig4"}
    assert all(r.checkpoint for r in runs)
    assert sum("trained (run" in line for line in first_lines) == 2
    second = _run(store, second_lines)
    assert len(store.runs()) == 2  # nothing trained again
    assert sum("reused (run" in line for line in second_lines) == 2
    assert not any("trained (run" in line for line in second_lines)
    assert json.dumps(first["cells"], sort_keys=True) == json.dumps(second["cells"], sort_keys=True)


def test_a_sweep_run_of_the_same_config_is_the_probe_studys_model(tmp_path):
    """A model another study trained (here as a lone run recorded under a sweep's name) is reused."""
    from mixerzoo.runs.task import execute_run

    store = ResultsStore(tmp_path / "res")
    params = resolve_params(load_theory("icll-fig4"), "quick", SETS)[1]
    cfg = icll_probes.run_config(params, "TF/1")
    made = execute_run(cfg, store, experiment="icll-fig2", progress=False)
    lines = []
    payload = _run(store, lines)
    (tf_line,) = [line for line in lines if line.startswith("TF/1 (1 layer)")]
    assert f"reused (run {made.run_id}, icll-fig2)" in tf_line
    assert sum("trained (run" in line for line in lines) == 1  # GLA/1 only
    tf = [c for c in payload["cells"] if c["variant"] == "TF/1"]
    assert tf and tf[0]["model_regbench_tvd"] == pytest.approx(made.metrics["regbench_tvd"])


def test_a_model_made_by_other_code_is_trained_again(tmp_path, monkeypatch):
    from mixerzoo.store.records import RunRecord

    store = ResultsStore(tmp_path / "res")
    _run(store, [])
    monkeypatch.setattr(RunRecord, "stale", property(lambda self: True))
    lines = []
    _run(store, lines)
    assert sum("trained (run" in line for line in lines) == 2
    assert not any("reused" in line for line in lines)


def test_the_quick_icll_probe_models_are_the_quick_sweeps_runs():
    """icll-fig4 / -fig5 / -fig6 at quick plan the configs of icll-fig2's quick runs (the 2-layer
    models) and one 4-layer Transformer they share, so one results folder trains each model once.
    icll-fig2d's quick runs score 4,000 test instances and are its own; icll-fig3 trains its own
    (three times the instances: the previous-token heads its claims read formed only there)."""
    fig2 = {p.config.config_hash() for p in load_experiment("icll-fig2", "quick").expand()}
    fig2d = {p.config.config_hash() for p in load_experiment("icll-fig2d", "quick").expand()}
    fig3 = resolve_params(load_theory("icll-fig3"), "quick", {})[1]
    assert icll_probes.run_config(fig3, "TF/4").config_hash() not in fig2 | fig2d
    four_layer = set()
    for name in ("icll-fig4", "icll-fig5", "icll-fig6"):
        params = resolve_params(load_theory(name), "quick", {})[1]
        for label, section in params.models.items():
            digest = icll_probes.run_config(params, label).config_hash()
            assert digest not in fig2d, (name, label)
            if section["n_layers"] == 2:
                assert digest in fig2, (name, label)
            else:
                four_layer.add(digest)
    assert len(four_layer) == 1  # TF/4 of icll-fig4 and -fig6 is icll-fig5's TF


def test_study_run_keeps_a_probe_studys_models_in_the_results_folder(tmp_path, run_cli):
    res = tmp_path / "res"
    argv = ["study", "run", "icll-fig4", "--results", res]
    for key, value in SETS.items():
        argv += ["--set", f"{key}={json.dumps(value)}"]
    code, out, err = run_cli(argv)
    assert code in (0, 1), err
    assert "trained (run" in out
    runs = ResultsStore(res).runs()
    tasks = [r for r in runs if r.kind == "task"]
    assert len(tasks) == 2 and {r.experiment for r in tasks} == {"icll-fig4"}
    code, out, err = run_cli(argv)
    assert code in (0, 1), err
    assert out.count("reused (run") == 2
    assert len([r for r in ResultsStore(res).runs() if r.kind == "task"]) == 2
