"""CAT Table 2's perplexity orders in cat-lm-length-extrapolation: CAT with RoPE against TF++, Mamba
and GLA, and the baselines' own order. The claims follow hand-made losses at the training length
(Table 2's Wikitext perplexities reproduce; a premise failing, a tie within noise and a broken order
do not), and a tiny run builds, trains and scores the three baselines."""

from __future__ import annotations

import math

import pytest

from mixerzoo.claims import INCONCLUSIVE, NOT_REPRODUCED, REPRODUCED, evaluate_claims
from mixerzoo.studies.computed.files import load_theory
from mixerzoo.studies.dispatch import find_study
from mixerzoo.studies.lm.length_extrapolation import PARAMS, TABLE2_PPL, model_specs, outcome_from, run
from tests.conftest import TINY_LM

NAME = "cat-lm-length-extrapolation"
QUIET = {"log": lambda _m: None}
BASELINES = ("tfpp-rope", "mamba-nope", "gla-nope")
#: the claims on Table 2's order, after the study's length-extrapolation claims
TABLE2_CLAIMS = slice(9, 12)


def verdicts(at_l: dict[str, float], se: float = 0.001, unigram: float = math.log(1000.0)) -> list[str]:
    """The Table 2 claims' verdicts on losses at the training length (factor 1, as trained)."""
    loss = {(m, "none", 1): v for m, v in at_l.items()}
    errors = {key: (se, None, 1) for key in loss} | {("unigram", "none", 1): (se, None, 1)}
    out = outcome_from(loss, dict.fromkeys(loss), unigram, "token", 2048, **QUIET, errors=errors)
    exp = load_theory(NAME)
    judged = evaluate_claims(exp.claims, out.cells, out.metric, axes=out.axes)
    return [c["verdict"] for c in judged][TABLE2_CLAIMS]


PAPER = {m: math.log(TABLE2_PPL[m]) for m in ("cat-rope", *BASELINES)}


def test_the_table2_claims_are_the_last_three():
    claims = load_theory(NAME).claims[TABLE2_CLAIMS]
    assert "achieves performance better than state-of-the-art models" in claims[0].claim
    assert all(c.claim.startswith("TF++ (Touvron et al. 2023)* 28.390") for c in claims[1:])


def test_table_2s_wikitext_perplexities_reproduce_the_orders():
    assert verdicts(PAPER) == [REPRODUCED] * 3


def test_models_at_the_unigram_level_leave_every_order_inconclusive():
    assert verdicts(PAPER, unigram=math.log(30.0)) == [INCONCLUSIVE] * 3


def test_a_gap_inside_the_noise_is_a_tie():
    """CAT with RoPE 0.01 nats below TF++ and Mamba: decided with errors of 0.001, a tie with 0.01."""
    close = {**PAPER, "cat-rope": PAPER["tfpp-rope"] - 0.01}
    assert verdicts(close, se=0.001)[0] == REPRODUCED
    assert verdicts(close, se=0.01)[0] == INCONCLUSIVE


def test_broken_orders_are_not_reproduced():
    assert verdicts({**PAPER, "cat-rope": PAPER["gla-nope"] + 0.02})[0] == NOT_REPRODUCED
    assert verdicts({**PAPER, "gla-nope": PAPER["mamba-nope"] - 0.05})[1] == NOT_REPRODUCED
    assert verdicts({**PAPER, "mamba-nope": PAPER["tfpp-rope"] + 0.05})[2] == NOT_REPRODUCED


def test_the_quick_preset_plans_the_baselines_at_every_length():
    cells = find_study(NAME).claim_plan("quick", {}).cells
    for model in ("mamba-nope", "gla-nope"):
        assert {c["factor"] for c in cells if c["model"] == model and c["scaling"] == "none"} == {
            1,
            2,
            4,
            8,
            16,
        }
    assert {c["scaling"] for c in cells if c["model"] == "tfpp-rope"} == {"none", "pi", "yarn"}


def test_the_baselines_are_built_as_their_papers_block():
    specs = model_specs(PARAMS(models=list(BASELINES), num_heads=4))
    assert specs["tfpp-rope"] == {
        "mixer": {"name": "attention", "num_heads": 4},
        "position": "rope",
        "state_mixer": {"name": "swiglu"},
        "norm": "rmsnorm",
    }
    assert specs["gla-nope"]["mixer"]["name"] == "gla" and specs["gla-nope"]["position"] == "none"
    assert specs["mamba-nope"] == {"mixer": {"name": "mamba"}, "position": "none"}


def test_a_tiny_run_trains_and_scores_the_baselines(tiny_text_dir):
    p = PARAMS(**TINY_LM, data_dir=str(tiny_text_dir), models=list(BASELINES), factors=[1, 2])
    out = run(p, **QUIET)
    at_l = {c["model"]: c for c in out.cells if c["factor"] == 1 and c["scaling"] == "none"}
    assert set(at_l) == {*BASELINES, "unigram"}
    assert all(at_l[m]["bpc"] > 0 and "unigram_gain" in at_l[m] for m in BASELINES)
    (order,) = [line for line in out.lines if line[0].startswith("order at L")]
    assert all(m in order[2] for m in BASELINES)
    assert at_l["gla-nope"]["unigram_gain"] == pytest.approx(
        at_l["unigram"]["loss"] - at_l["gla-nope"]["loss"]
    )
