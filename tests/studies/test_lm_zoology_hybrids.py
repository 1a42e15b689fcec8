"""The zoology-table2-hybrids study (Zoology Sec. 5, Table 2): Zoology's FLOPs accounting gives Table 2's
TFLOPs column, the study validates and plans, its claims follow hand-made held-out losses (Table 2's
perplexities reproduce; a premise failing, a tie within noise and a broken order do not), and a tiny run
trains and scores the three models."""

from __future__ import annotations

import math

import pytest

from mixerzoo.claims import INCONCLUSIVE, NOT_REPRODUCED, REPRODUCED, evaluate_claims
from mixerzoo.registry import ConfigError
from mixerzoo.studies.computed.files import load_theory, resolve_params
from mixerzoo.studies.dispatch import find_study
from mixerzoo.studies.lm.heldout import HeldoutScores
from mixerzoo.studies.lm.hybrids import (
    PARAMS,
    attention_layers,
    has_paper_shapes,
    model_flops,
    model_specs,
    outcome_from,
    plan_cells,
    run,
)
from mixerzoo.studies.lm.zoology_flops import GPT2_VOCAB, Layer, training_flops
from tests.conftest import TINY_LM

NAME = "zoology-table2-hybrids"
QUIET = {"log": lambda _m: None}
#: Zoology Table 2's 360M rows: overall perplexity as a loss
PAPER = {"attention": math.log(9.44), "base_conv": math.log(11.01), "hybrid": math.log(8.59)}
UNIGRAM = math.log(2000.0)


def paper_params():
    return resolve_params(load_theory(NAME), "paper", {})[1]


@pytest.mark.parametrize(
    "layers,d,tflops",
    [
        ([Layer("attention", 4, 16)] * 24, 1024, 6.23),  # Attention, 360M
        ([Layer("attention", 4, 12)] * 12, 768, 2.46),  # Attention, 125M
        ([Layer("base_conv", 2)] * 48, 1080, 4.81),  # BaseConv, 354M
        ([Layer("base_conv", 2)] * 30, 852, 2.46),  # BaseConv, 168M
        ([Layer("base_conv", 2)] * 45 + [Layer("attention", 2, 12)] * 3, 1080, 5.10),  # + Full attention
        ([Layer("base_conv", 2)] * 27 + [Layer("attention", 2, 12)] * 3, 852, 2.58),  # + Full attention
    ],
)
def test_zoologys_accounting_gives_table_2s_tflops(layers, d, tflops):
    assert training_flops(layers, d, 2048, GPT2_VOCAB) / 1e12 == pytest.approx(tflops, rel=0.025)


def test_the_paper_preset_counts_the_papers_18_percent():
    flops = model_flops(paper_params(), GPT2_VOCAB)
    assert flops["hybrid"] / 1e12 == pytest.approx(5.10, rel=0.01)
    assert 1 - flops["hybrid"] / flops["attention"] == pytest.approx(1 - 5.10 / 6.23, abs=0.005)


def test_the_hybrid_intersperses_its_attention_layers_evenly():
    assert attention_layers(48, 3) == [8, 24, 40] and attention_layers(8, 1) == [4]
    specs = model_specs(paper_params())
    names = [m["name"] for m in specs["hybrid"]["mixer"]]
    assert [i for i, n in enumerate(names) if n == "attention"] == [8, 24, 40] and len(names) == 48
    assert specs["hybrid"]["d_model"] == 1080 and specs["hybrid"]["position"] == "rope"
    assert specs["base_conv"]["state_mixer"] == {"name": "mlp", "hidden_mult": 2.0}
    assert specs["attention"]["state_mixer"]["hidden_mult"] == 4.0 and "d_model" not in specs["attention"]


def test_the_study_validates_and_plans_both_presets():
    study = find_study(NAME)
    for preset in ("quick", "paper"):
        cells = study.claim_plan(preset, {}).cells
        assert cells == [{"model": m} for m in ("attention", "base_conv", "hybrid", "unigram")]


@pytest.mark.parametrize(
    "sets,needle",
    [
        ({"hybrid_attention_layers": 49}, "hybrid_attention_layers"),
        ({"hybrid_num_heads": 16}, "hybrid_num_heads"),
    ],
)
def test_a_hybrid_that_does_not_fit_is_one_line(sets, needle):
    with pytest.raises(ConfigError, match=needle) as err:
        resolve_params(load_theory(NAME), "paper", sets)
    assert "\n" not in str(err.value)


def verdicts(
    losses: dict[str, float], se: float = 0.001, unigram: float = UNIGRAM, flops=None, paper_shapes=True
) -> list[str]:
    scores = HeldoutScores(
        unit="token",
        split="val",
        losses={m: [v] for m, v in losses.items()},
        errors={m: [se] for m in losses},
        unigram=unigram,
        unigram_se=se,
    )
    flops = flops or model_flops(paper_params(), GPT2_VOCAB)
    out = outcome_from(scores, flops, paper_shapes=paper_shapes, **QUIET)
    exp = load_theory(NAME)
    return [c["verdict"] for c in evaluate_claims(exp.claims, out.cells, out.metric, axes=out.axes)]


def test_table_2s_numbers_reproduce_every_claim():
    assert verdicts(PAPER) == [REPRODUCED] * 5


def test_models_at_the_unigram_level_leave_the_loss_claims_inconclusive():
    got = verdicts(PAPER, unigram=math.log(12.0))
    assert [got[i] for i in (0, 2, 4)] == [INCONCLUSIVE] * 3
    assert [got[i] for i in (1, 3)] == [REPRODUCED] * 2  # FLOPs are counted, not learned


def test_the_18_percent_is_judged_only_at_table_2s_shapes():
    """A FLOPs share belongs to the 360M shapes: at the quick preset's shapes it decides nothing."""
    assert has_paper_shapes(paper_params())
    quick = resolve_params(load_theory(NAME), "quick", {})[1]
    assert not has_paper_shapes(quick)
    got = verdicts(PAPER, paper_shapes=False)
    assert got[3] == INCONCLUSIVE and got[1] == REPRODUCED


def test_a_gap_inside_the_noise_is_a_tie():
    """The hybrid 0.01 nats below attention: decided with errors of 0.001, a tie with errors of 0.01."""
    close = {**PAPER, "hybrid": PAPER["attention"] - 0.01}
    assert verdicts(close, se=0.001)[0] == REPRODUCED
    assert verdicts(close, se=0.01)[0] == INCONCLUSIVE


def test_broken_orders_and_costlier_hybrids_are_not_reproduced():
    behind = {**PAPER, "hybrid": PAPER["attention"] + 0.05}
    got = verdicts(behind)
    assert got[0] == NOT_REPRODUCED and got[2] == NOT_REPRODUCED  # behind attention; ratio above 0.91
    slight = {**PAPER, "hybrid": PAPER["attention"] - 0.05}  # ahead, but by less than 0.85 points
    assert verdicts(slight)[:3] == [REPRODUCED, REPRODUCED, NOT_REPRODUCED]
    costly = {"attention": 1.0, "base_conv": 0.8, "hybrid": 1.1}  # FLOPs above attention's
    got = verdicts(PAPER, flops=costly)
    assert got[1] == NOT_REPRODUCED and got[3] == NOT_REPRODUCED


def test_a_tiny_run_trains_and_scores_the_three_models(tmp_path, tiny_text_dir):
    p = PARAMS(
        **TINY_LM,
        data_dir=str(tiny_text_dir),
        conv_layers=3,
        conv_d_model=20,
        hybrid_attention_layers=1,
        hybrid_num_heads=2,
        filter_order=8,
        seeds=[0],
        eval_split="val",
        runs_dir=str(tmp_path / "runs"),
    )
    out = run(p, **QUIET)
    assert [{"model": c["model"]} for c in out.cells] == plan_cells(p.model_dump(mode="json"))
    cells = {c["model"]: c for c in out.cells}
    assert cells["hybrid"]["flops"] > 0 and "flops_reduction" in cells["base_conv"]
    assert cells["hybrid"]["ppl_ratio"] == pytest.approx(
        math.exp(cells["hybrid"]["loss"] - cells["attention"]["loss"])
    )
    assert cells["base_conv"]["params"] > 0 and "flops" not in cells["unigram"]
    assert (tmp_path / "runs" / "hybrid" / "seed-0" / "checkpoint.pt").is_file()
