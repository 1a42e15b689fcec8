"""The MAD protocol: scores from hand-made results, level expansion, ``--set``, and the CLI path."""

from __future__ import annotations

import json

import pytest
import yaml

from mixerzoo.cli.common import parse_sets
from mixerzoo.registry import ConfigError
from mixerzoo.studies.mad import (
    MEAN,
    MadRun,
    claim_cells,
    level_label,
    mad_experiment,
    score_runs,
)
from mixerzoo.studies.sweep.overrides import load_with_sets


# -- scores from hand-made results ---------------------------------------------------------
def grid_runs(variant, task, level, accs):
    """Six runs of one level over lr {1e-4, 5e-4, 1e-3} x wd {0, 0.1}, accuracies in that order."""
    pts = [(lr, wd) for lr in (1e-4, 5e-4, 1e-3) for wd in (0.0, 0.1)]
    return [MadRun(variant, task, level, lr, wd, a) for (lr, wd), a in zip(pts, accs)]


def test_mad_score_is_best_over_lr_wd_then_mean_over_levels_then_tasks():
    runs = [
        *grid_runs("a", "recall", "baseline", [0.1, 0.2, 0.9, 0.3, 0.4, 0.5]),  # best 0.9 (5e-4, 0)
        *grid_runs("a", "recall", "seq_len=256", [0.6, 0.1, 0.1, 0.1, 0.1, 0.2]),  # best 0.6 (1e-4, 0)
        *grid_runs("a", "copy", "baseline", [0.0, 0.0, 0.0, 0.0, 0.0, 0.3]),  # best 0.3 (1e-3, 0.1)
    ]
    s = score_runs(runs)
    assert s.best[("a", "recall", "baseline")] == 0.9
    assert s.best[("a", "recall", "seq_len=256")] == 0.6
    assert s.per_task["a"] == {"recall": pytest.approx(0.75), "copy": pytest.approx(0.3)}
    assert s.overall["a"] == pytest.approx((0.75 + 0.3) / 2)
    assert s.complete == {("a", "recall"): True, ("a", "copy"): True}


def test_unfinished_runs_leave_levels_out_and_hold_back_the_overall_score():
    runs = [
        *grid_runs("a", "recall", "baseline", [0.1, 0.2, 0.3, 0.4, 0.5, None]),
        *grid_runs("a", "recall", "harder", [None] * 6),  # not run: left out of the mean
        *grid_runs("a", "copy", "baseline", [None] * 6),
    ]
    s = score_runs(runs)
    assert s.per_task["a"] == {"recall": pytest.approx(0.5)}
    assert s.complete[("a", "recall")] is False
    assert "a" not in s.overall  # copy has no score yet
    cells = {(c["variant"], c["data.task.name"]): c for c in claim_cells(s)}
    assert cells[("a", "recall")]["mad_score"] is None  # claims wait for complete cells
    assert (cells[("a", MEAN)]["runs_finished"], cells[("a", MEAN)]["runs_planned"]) == (5, 18)


def test_claims_compare_mad_scores_of_two_variants():
    from mixerzoo.claims import Claim, evaluate_claims

    runs = [
        *grid_runs("hybrid", "recall", "baseline", [0.9] * 6),
        *grid_runs("hyena", "recall", "baseline", [0.2, 0.95, 0.1, 0.1, 0.1, 0.1]),
    ]
    claim = Claim(
        claim="hybrid above hyena",
        paper_ref="test",
        where={"data.task.name": MEAN},
        compare={"left": {"variant": "hybrid"}, "right": {"variant": "hyena"}, "op": ">"},
    )
    (result,) = evaluate_claims(
        [claim], claim_cells(score_runs(runs)), "mad_score", ["variant", "data.task.name"]
    )
    assert result["verdict"] == "not reproduced"  # hyena's best run (0.95) beats the hybrid's 0.9
    assert "0.9000 vs hyena 0.9500" in result["evidence"]


def test_level_labels_name_the_changed_parameter():
    levels = [{"seq_len": 128, "vocab_size": 16}, {"seq_len": 256, "vocab_size": 16}]
    assert [level_label(levels, i) for i in range(2)] == ["baseline", "seq_len=256"]


# -- the experiment: levels and --set --------------------------------------------------------
TINY = {
    "name": "mad-tiny",
    "claim": "paper: test",
    "base": {
        "data": {"task": {"name": "mqar"}, "n_train": 32, "n_test": 16},
        "model": {"d_model": 8, "n_layers": 1, "mixer": "attention"},
        "train": {"epochs": 1, "batch_size": 16},
    },
    "variants": {"attn": {"model": {"mixer": "attention"}}, "conv": {"model": {"mixer": "base_conv"}}},
    "grid": {
        "data.task.name": ["mqar", "selective_copy"],
        "train.lr": [1e-4, 5e-4, 1e-3],
        "train.weight_decay": [0.0, 0.1],
    },
    "aggregate": {
        "metric": "accuracy_per_query",
        "reduce": "max",
        "over": ["train.lr", "train.weight_decay"],
    },
    "presets": {"quick": {"variants": ["attn"]}, "paper": {}},
}
LEVELS = {
    "mqar": [
        {"vocab_size": 40, "seq_len": 16, "num_kv_pairs": 2, "num_train_examples": 32},
        {"vocab_size": 40, "seq_len": 32, "num_kv_pairs": 2, "num_train_examples": 48},
        {"vocab_size": 40, "seq_len": 16, "num_kv_pairs": 4, "num_train_examples": 64},
    ],
    "selective_copy": [{"vocab_size": 12, "seq_len": 24, "num_tokens_to_copy": 4}],
}


def test_every_level_of_every_task_is_run_over_the_lr_wd_grid():
    exp = mad_experiment(TINY, "paper", levels=LEVELS)
    runs = exp.expand()
    assert len(runs) == 2 * (3 + 1) * 6  # variants x levels x (lr x wd)
    mqar = [r for r in runs if r.config.data.task.name == "mqar" and r.point["variant"] == "attn"]
    got = {
        (
            r.config.data.task.params["seq_len"],
            r.config.data.task.params["num_kv_pairs"],
            r.config.data.n_train,
        )
        for r in mqar
    }
    assert got == {(16, 2, 32), (32, 2, 48), (16, 4, 64)}  # a level's training-set size travels with it
    assert {(r.config.train.lr, r.config.train.weight_decay) for r in mqar} == {
        (lr, wd) for lr in (1e-4, 5e-4, 1e-3) for wd in (0.0, 0.1)
    }
    cells = {r.cell_key for r in runs}
    assert len(cells) == 2 * 4  # the grid is reduced inside a cell: one cell per (variant, level)
    assert len(mad_experiment(TINY, "paper", levels=LEVELS, n_levels=1).expand()) == 2 * 2 * 6


def test_set_model_picks_a_variant_or_a_mixer_or_a_mapping():
    assert list(load_with_sets(TINY, "paper", {"model": "conv"}).variants) == ["conv"]
    exp = load_with_sets(TINY, "quick", {"model": "gla"})  # not a variant: a registered mixer
    assert list(exp.variants) == ["gla"]
    assert {r.config.model.layer_mixers()[0].name for r in exp.expand()} == {"gla"}
    exp = load_with_sets(TINY, "quick", {"model": {"mixer": "hyena", "d_model": 16}})
    assert {(r.point["variant"], r.config.model.d_model) for r in exp.expand()} == {("custom", 16)}


def test_set_path_applies_after_preset_variants_and_grid():
    exp = load_with_sets(TINY, "paper", {"model.d_model": 12, "train.max_steps": 3})
    runs = exp.expand()
    assert {(r.config.model.d_model, r.config.train.max_steps) for r in runs} == {(12, 3)}


@pytest.mark.parametrize(
    "sets,match",
    [
        (
            {"model": "no_such"},
            r"--set model='no_such': not a variant of 'mad-tiny' nor a sequence mixer; allowed: attn",
        ),
        ({"model": 3}, r"--set model=3: expected a variant or mixer name, or a mapping"),
        ({"epochs": 3}, r"--set 'epochs': expected model=NAME, model=\{...\} or a dotted run-config path"),
        ({"model.dmodel": 3}, r"--set: .*unknown field path 'model.dmodel'"),
        ({"train.lr": -1}, r"--set: .*train"),
    ],
)
def test_bad_sets_are_one_line_errors(sets, match):
    with pytest.raises(ConfigError, match=match) as err:
        load_with_sets(TINY, "quick", sets)
    assert "\n" not in str(err.value)


def test_set_parsing_errors_are_one_line():
    with pytest.raises(ConfigError, match=r"--set 'model': expected key=value"):
        parse_sets(("model",))
    with pytest.raises(ConfigError, match=r"--set model: given twice"):
        parse_sets(("model=a", "model=b"))
    assert parse_sets(("model={mixer: gla, d_model: 32}",)) == {"model": {"mixer": "gla", "d_model": 32}}


def test_shipped_mad_expands_mad_levels():
    from mixerzoo.tasks.mad_levels import MAD_LEVELS

    quick = mad_experiment("mad", "quick", {"model": "attention"}).expand()
    tasks = {r.config.data.task.name for r in quick}
    assert len(quick) == len(tasks) * 2 * 6  # quick: 2 levels per task, the full 3 x 2 grid
    paper = mad_experiment("mad", "paper", {"model": "attention"}).expand()
    assert len(paper) == sum(len(MAD_LEVELS[t]) for t in tasks) * 6
    assert {r.config.model.d_model for r in paper} == {128}


# -- through the results store and the CLI ---------------------------------------------------
def test_report_scores_hand_made_runs_in_the_store(tmp_path):
    from mixerzoo.store.results import ResultsStore
    from mixerzoo.studies.mad import mad_report

    exp = mad_experiment(TINY, "paper", levels=LEVELS)
    store = ResultsStore(tmp_path / "res")
    acc = {}
    for i, p in enumerate(exp.expand()):
        if p.point["variant"] == "conv" and p.config.data.task.name == "selective_copy":
            continue  # never finished: conv's mean over tasks stays open
        acc[p.config_hash] = (i % 7) / 10
        run_id = store.start_run(
            p.config.model_dump(mode="json"), p.config_hash, name=p.config.name, experiment=exp.name
        )
        store.finish_run(
            run_id, {"accuracy_per_query": acc[p.config_hash]}, wall_s=0.1, params=1, checkpoint=None
        )
    payload = mad_report(exp, store, "paper")
    # the expected numbers, from the runs directly: max per (variant, task, level), then means
    best: dict = {}
    for p in exp.expand():
        if p.config_hash in acc:
            key = (p.point["variant"], p.config.data.task.name, json.dumps(p.point["data"], sort_keys=True))
            best[key] = max(best.get(key, 0.0), acc[p.config_hash])
    for variant in ("attn", "conv"):
        for task in ("mqar", "selective_copy"):
            vals = [v for (vv, t, _), v in best.items() if (vv, t) == (variant, task)]
            got = payload["mad_scores"]["per_task"].get(variant, {}).get(task)
            assert got == (pytest.approx(sum(vals) / len(vals)) if vals else None)
    per_task = payload["mad_scores"]["per_task"]["attn"]
    assert payload["mad_scores"]["overall"] == {
        "attn": pytest.approx((per_task["mqar"] + per_task["selective_copy"]) / 2)
    }
    assert payload["runs"] == {"finished": 48 - 6, "planned": 48}
    assert payload["protocol"]["levels_per_task"] == {"mqar": 3, "selective_copy": 1}


@pytest.mark.slow
def test_score_mad_scores_a_mixer_registered_outside_mixerzoo(tmp_path, monkeypatch):
    """The README's worked example: a mixer defined in user code, registered in this process."""
    import torch
    from torch import nn

    from mixerzoo.mixers import SEQUENCE_MIXERS, SequenceMixer
    from mixerzoo.studies.mad import score_mad

    class CumulativeMean(SequenceMixer):
        def __init__(self, d_model, max_len=2048, **params):
            super().__init__(d_model, max_len, **params)
            self.proj = nn.Linear(d_model, d_model)

        def forward(self, x, input_ids=None, rope=None):
            steps = torch.arange(1, x.shape[1] + 1, dtype=x.dtype).view(1, -1, 1)
            return self.proj(x.cumsum(1) / steps)

    monkeypatch.setitem(SEQUENCE_MIXERS._items, "my_cumulative_mean", CumulativeMean)
    spec = {**TINY, "grid": {"data.task.name": ["mqar"], "train.lr": [1e-3], "train.weight_decay": [0.0]}}
    spec["base"] = {**TINY["base"], "train": {"epochs": 1, "batch_size": 16, "max_steps": 2}}
    scores = score_mad(
        {"mixer": "my_cumulative_mean"}, "quick", tmp_path / "res", levels=LEVELS, n_levels=1, experiment=spec
    )
    assert list(scores.overall) == ["custom"]
    assert (
        scores.overall["custom"]
        == scores.per_task["custom"]["mqar"]
        == scores.best[("custom", "mqar", "baseline")]
    )
    assert 0.0 <= scores.overall["custom"] <= 1.0


@pytest.mark.slow
def test_cli_run_report_check_with_set(tmp_path, run_cli):
    spec = {
        "kind": "mad",
        "name": "mad-cli",
        "claim": "paper: test",
        "base": {
            "data": {"task": {"name": "mad_memorization"}, "n_train": 64, "n_test": 32},
            "model": {"d_model": 8, "n_layers": 1, "mixer": "attention", "state_mixer": None},
            "train": {"batch_size": 32, "max_steps": 1, "eval_every": 100},
        },
        "variants": {"attention": {}, "hyena": {"model": {"mixer": "hyena"}}},
        "grid": {
            "data.task.name": ["mad_memorization"],
            "train.lr": [1e-3],
            "train.weight_decay": [0.0],
        },
        "aggregate": {
            "metric": "accuracy_per_query",
            "reduce": "max",
            "over": ["train.lr", "train.weight_decay"],
        },
        "presets": {"quick": {"rules": [{"when": {}, "set": {"data.n_test": 16}}]}, "paper": {}},
        "claims": [
            {
                "claim": "hyena above attention",
                "paper_ref": "test",
                "where": {"data.task.name": MEAN},
                "metric": "mad_score",
                "compare": {"left": {"variant": "hyena"}, "right": {"variant": "attention"}, "op": ">"},
            }
        ],
    }
    path = tmp_path / "mad-cli.yaml"
    path.write_text(yaml.safe_dump(spec))
    res = str(tmp_path / "res")
    args = [str(path), "--preset", "quick", "--results", res, "--set", "model=attention"]
    code, out, err = run_cli(["study", "run", *args, "--quiet", "--set", "model.d_model=16"])
    assert code == 0, err
    assert "2 runs" in out  # 2 levels (quick) x 1 lr x 1 weight decay
    code, out, err = run_cli(["study", "report", *args, "--set", "model.d_model=16", "--json"])
    assert code == 0, err
    payload = json.loads(out)
    assert payload["runs"] == {"finished": 2, "planned": 2}
    best = [lv["best_accuracy"] for lv in payload["mad_scores"]["levels"]]
    assert payload["mad_scores"]["per_task"]["attention"]["mad_memorization"] == pytest.approx(sum(best) / 2)
    assert payload["claims"][0]["verdict"] == "not run"  # hyena was not run
    code, out, err = run_cli(["study", "check", *args, "--set", "model.d_model=16"])
    assert code == 0 and "1 not run" in out
    code, out, err = run_cli(["study", "run", str(path), "--set", "nonsense"])
    assert code == 2 and err.strip() == "error: --set 'nonsense': expected key=value"


def test_a_mad_preset_whose_claims_are_paper_only_reports_them_not_run_with_the_reason(tmp_path, run_cli):
    from tests.studies.conftest import tiny_mad

    why = "measured: nothing learns at this budget"
    # its one claim holds for any score: without the note it reads "reproduced"
    spec = tiny_mad("mad-claims-paper-only", {"quick": {"claims_paper_only": why}, "paper": {}})
    path = tmp_path / "mad-claims-paper-only.yaml"
    path.write_text(yaml.safe_dump(spec))
    args = [str(path), "--preset", "quick", "--results", str(tmp_path / "res")]
    code, out, err = run_cli(["study", "run", *args, "--quiet"])
    assert code == 0, err
    code, out, err = run_cli(["study", "report", *args, "--json"])
    assert code == 0, err
    payload = json.loads(out)
    assert payload["runs"]["finished"] == payload["runs"]["planned"] > 0
    (claim,) = payload["claims"]
    assert claim["verdict"] == "not run" and claim["evidence"] == f"paper preset only: {why}"
