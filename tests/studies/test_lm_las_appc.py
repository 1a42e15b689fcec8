"""The las-appc-wikitext103 study (LaS App. C, Fig. 3): it validates and plans, its claims follow
hand-made held-out losses (the paper's perplexities reproduce; a premise failing, a tie within noise
and a broken order do not), and a tiny run trains and scores every variant."""

from __future__ import annotations

import math

import pytest

from mixerzoo.claims import INCONCLUSIVE, NOT_REPRODUCED, REPRODUCED, evaluate_claims
from mixerzoo.registry import ConfigError
from mixerzoo.studies.computed.files import load_theory, resolve_params
from mixerzoo.studies.dispatch import find_study
from mixerzoo.studies.lm.heldout import HeldoutScores
from mixerzoo.studies.lm.las_variants import PARAMS, model_specs, outcome_from, plan_cells, run
from tests.conftest import TINY_LM

NAME = "las-appc-wikitext103"
QUIET = {"log": lambda _m: None}
#: LaS App. C's perplexities, as losses (nats per word)
PAPER = {"attention": math.log(20.20), "l": math.log(20.34), "s": math.log(21.69), "las": math.log(21.87)}
UNIGRAM = math.log(1000.0)  # a word-level unigram model: far above every trained model


def verdicts(losses: dict[str, float], se: float = 0.001, unigram: float = UNIGRAM) -> list[str]:
    """The claims' verdicts on one seed per model, each loss with the windows' error ``se``."""
    scores = HeldoutScores(
        unit="token",
        split="test",
        losses={m: [v] for m, v in losses.items()},
        errors={m: [se] for m in losses},
        unigram=unigram,
        unigram_se=se,
    )
    out = outcome_from(scores, **QUIET)
    exp = load_theory(NAME)
    return [c["verdict"] for c in evaluate_claims(exp.claims, out.cells, out.metric, axes=out.axes)]


def test_the_study_validates_and_plans_both_presets():
    exp = load_theory(NAME)
    study = find_study(NAME)
    for preset in ("quick", "paper"):
        _, params = resolve_params(exp, preset, {})
        assert params.models == ["attention", "las", "l", "s"]
        cells = study.claim_plan(preset, {}).cells
        assert cells == [{"model": m} for m in ("attention", "las", "l", "s", "unigram")]
    assert resolve_params(exp, "paper", {})[1].n_layers == 12


def test_the_papers_perplexities_reproduce_every_claim():
    assert verdicts(PAPER) == [REPRODUCED] * 6


def test_models_at_the_unigram_level_leave_every_claim_inconclusive():
    """Every model within 0.5 nats of the unigram model: no premise holds, nothing is judged."""
    assert verdicts(PAPER, unigram=math.log(25.0)) == [INCONCLUSIVE] * 6


def test_a_gap_inside_the_noise_is_a_tie():
    """S-attention 0.008 nats below LaS: decided with errors of 0.001, a tie with errors of 0.01."""
    assert verdicts(PAPER, se=0.001)[4] == REPRODUCED
    assert verdicts(PAPER, se=0.01)[4] == INCONCLUSIVE


def test_broken_orders_are_not_reproduced():
    far = {**PAPER, "l": PAPER["attention"] + 0.1}  # L-attention 0.1 nats behind: no close match
    assert verdicts(far)[0] == NOT_REPRODUCED
    pooled_ahead = {**PAPER, "s": PAPER["attention"] - 0.05, "las": PAPER["attention"] - 0.05}
    got = verdicts(pooled_ahead)
    assert got[1] == NOT_REPRODUCED and got[3] == NOT_REPRODUCED and got[5] == NOT_REPRODUCED
    assert verdicts({**PAPER, "l": PAPER["attention"] - 0.01})[2] == NOT_REPRODUCED


def test_cells_carry_the_unigram_gain_and_its_error():
    scores = HeldoutScores(
        unit="char", losses={"attention": [1.0, 1.2]}, errors={"attention": [0.01, 0.01]}, unigram=3.0
    )
    scores.unigram_se = 0.02
    cells = {c["model"]: c for c in outcome_from(scores, **QUIET).cells}
    att = cells["attention"]
    assert att["loss"] == pytest.approx(1.1) and att["unigram_gain"] == pytest.approx(1.9)
    assert att["seeds"] == 2 and att["chance:loss"] == 3.0 and att["bpc"] == pytest.approx(1.1 / math.log(2))
    assert att["se:unigram_gain"] == pytest.approx(math.hypot(att["se:loss"], 0.02))
    assert cells["unigram"]["loss"] == 3.0 and cells["unigram"]["se:loss"] == 0.02


def test_variants_are_las_own():
    specs = model_specs(PARAMS(num_heads=4, decay_max=0.01, pool_size=5))
    assert specs["attention"] == {"mixer": {"name": "attention", "num_heads": 4}, "position": "learned"}
    assert {specs[v]["mixer"]["variant"] for v in ("las", "l", "s")} == {"las", "l", "s"}


def test_a_bad_model_is_one_line():
    with pytest.raises(ConfigError, match="models") as err:
        resolve_params(load_theory(NAME), "quick", {"models": ["alibi"]})
    assert "\n" not in str(err.value)


def test_a_tiny_run_trains_and_scores_every_variant(tmp_path, tiny_text_dir):
    p = PARAMS(
        **TINY_LM,
        data_dir=str(tiny_text_dir),
        seeds=[0, 1],
        runs_dir=str(tmp_path / "runs"),
    )
    out = run(p, **QUIET)
    assert [{"model": c["model"]} for c in out.cells] == plan_cells(p.model_dump(mode="json"))
    trained = [c for c in out.cells if c["model"] != "unigram"]
    assert all(c["seeds"] == 2 and c["bpc"] > 0 and "unigram_gain" in c for c in trained)
    assert (tmp_path / "runs" / "s" / "seed-1" / "checkpoint.pt").is_file()
