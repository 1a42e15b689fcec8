"""The cat-lm-length-extrapolation experiment (CAT Sec. 6.2, Fig. 1 right): claims follow hand-made
losses, the perplexity ratios are exp(loss(fL) - loss(L)), and a tiny run trains and scores every model."""

from __future__ import annotations

import math

import pytest

from mixerzoo.claims import INCONCLUSIVE, NOT_REPRODUCED, NOT_RUN, REPRODUCED, evaluate_claims
from mixerzoo.registry import ConfigError
from mixerzoo.studies.computed.files import load_theory, resolve_params
from mixerzoo.studies.lm.length_extrapolation import PARAMS, model_specs, outcome_from, plan_cells, run

FACTORS = (1, 2, 4, 8, 16)
QUIET = {"log": lambda _m: None}


def losses(curves: dict[tuple[str, str], tuple[float, ...]]) -> dict[tuple[str, str, int], float]:
    return {(m, s, f): v for (m, s), vs in curves.items() for f, v in zip(FACTORS, vs, strict=True)}


def verdicts(curves, unigram: float = 3.0) -> list[str]:
    exp = load_theory("cat-lm-length-extrapolation")
    loss = losses(curves)
    out = outcome_from(loss, dict.fromkeys(loss), unigram, "char", 128, **QUIET)
    return [c["verdict"] for c in evaluate_claims(exp.claims, out.cells, out.metric, axes=out.axes)]


# attention with RoPE: as good as CAT at L, then worse at every longer length under every scaling
ATTENTION = {
    ("attention-rope", "none"): (1.40, 2.50, 3.50, 4.00, 4.20),
    ("attention-rope", "pi"): (1.40, 1.60, 1.90, 2.20, 2.40),
    ("attention-rope", "yarn"): (1.40, 1.50, 1.70, 1.90, 2.10),
}


def test_claims_follow_hand_made_losses():
    good = {
        **ATTENTION,
        ("cat-nope", "none"): (1.45, 1.44, 1.44, 1.45, 1.45),  # flat; worse than attention at L only
        ("cat-rope", "none"): (1.35, 1.80, 2.50, 3.00, 3.20),  # the raw RoPE rows are not judged
        ("cat-rope", "pi"): (1.35, 1.40, 1.45, 1.50, 1.60),
        ("cat-rope", "yarn"): (1.35, 1.34, 1.36, 1.37, 1.38),
    }
    # attention-nope is not in these curves: its claim stays "not run"; so do Table 2's
    # orders among TF++, Mamba and GLA, which these curves leave out (tests/studies/test_lm_cat_table2.py)
    assert verdicts(good) == [REPRODUCED, REPRODUCED, NOT_RUN] + [REPRODUCED] * 6 + [NOT_RUN] * 3
    # CAT with RoPE worse than attention at L; CAT without positions no better than the unigram
    # model and rising (ratio e^0.2 at 2L, above Pythia's); attention flat
    bad = {
        ("attention-rope", "none"): (1.40, 1.41, 1.41, 1.42, 1.42),
        ("attention-rope", "pi"): (1.40, 1.41, 1.41, 1.42, 1.42),
        ("attention-rope", "yarn"): (1.40, 1.41, 1.41, 1.42, 1.42),
        ("cat-nope", "none"): (3.50, 3.70, 3.90, 4.10, 4.20),
        ("cat-rope", "none"): (1.50, 1.80, 2.50, 3.00, 3.20),
        ("cat-rope", "pi"): (1.50, 1.60, 1.70, 1.80, 1.90),
        ("cat-rope", "yarn"): (1.50, 1.55, 1.60, 1.65, 1.70),
        ("attention-nope", "none"): (1.60, 1.60, 1.60, 1.60, 1.60),  # trains: well below unigram
    }
    # CAT without positions never learned (above the unigram model at L): whether it stays flat or
    # generalizes better than Pythia is inconclusive, not "not reproduced"
    length = [INCONCLUSIVE, NOT_REPRODUCED, INCONCLUSIVE]
    assert verdicts(bad) == [NOT_REPRODUCED] * 6 + length + [NOT_RUN] * 3
    learned = {**bad, ("cat-nope", "none"): (2.80, 3.00, 3.20, 3.40, 3.60)}  # learned, then rising
    assert verdicts(learned)[6:9] == [NOT_REPRODUCED] * 3


def test_attention_without_positions_diverging_reproduces_its_claim():
    curves = {**ATTENTION, ("attention-nope", "none"): (3.2, 3.2, 3.2, 3.2, 3.2)}
    assert verdicts(curves, unigram=3.0)[2] == REPRODUCED


def test_ppl_ratio_is_the_perplexity_at_the_length_over_the_one_at_L():
    curves = {("cat-nope", "none"): (1.0, 1.1, 0.9, 1.3, 2.0)}
    cells = outcome_from(losses(curves), {}, 3.0, "char", 64, **QUIET).cells
    ratio = {c["factor"]: c["ppl_ratio"] for c in cells if c["model"] == "cat-nope"}
    assert ratio == pytest.approx({1: 1.0, 2: math.exp(0.1), 4: math.exp(-0.1), 8: math.exp(0.3), 16: math.e})
    bpc = {c["factor"]: c["bpc"] for c in cells if c["model"] == "cat-nope"}
    assert bpc[16] == pytest.approx(2.0 / math.log(2))
    assert {c["length"] for c in cells if c["model"] == "cat-nope"} == {64, 128, 256, 512, 1024}


def test_model_names_give_mixer_and_positions():
    specs = model_specs(PARAMS(models=["attention-rope", "cat-nope", "mh_cat-rope"], conv_width=5))
    assert specs["attention-rope"] == {"mixer": {"name": "attention", "num_heads": 2}, "position": "rope"}
    assert specs["cat-nope"]["position"] == "none" and specs["cat-nope"]["mixer"]["conv_width"] == 5
    assert specs["mh_cat-rope"]["mixer"]["name"] == "mh_cat" and specs["mh_cat-rope"]["position"] == "rope"


@pytest.mark.parametrize(
    "sets,field",
    [({"models": ["cat"]}, "models"), ({"factors": [2, 4]}, "factors"), ({"scalings": ["ntk"]}, "scalings")],
)
def test_bad_parameters_are_one_line_naming_the_field(sets, field):
    exp = load_theory("cat-lm-length-extrapolation")
    with pytest.raises(ConfigError, match=field) as err:
        resolve_params(exp, "quick", sets)
    assert "\n" not in str(err.value)


def test_a_tiny_run_scores_rope_models_under_every_scaling(tmp_path, tiny_text_dir):
    p = PARAMS(
        corpus="char",
        data_dir=str(tiny_text_dir),
        models=["attention-rope", "cat-nope"],
        conv_width=3,
        d_model=16,
        n_layers=1,
        num_heads=2,
        block_size=16,
        batch_size=2,
        steps=2,
        warmup=0,
        factors=[1, 4],
        eval_tokens=128,
        threads=1,
        device="cpu",
        runs_dir=str(tmp_path / "runs"),
    )
    out = run(p, **QUIET)
    rows = {(c["model"], c["scaling"], c["factor"]) for c in out.cells}
    expected = {("attention-rope", s, f) for s in ("none", "pi", "yarn") for f in (1, 4)}
    assert rows == expected | {("cat-nope", "none", 1), ("cat-nope", "none", 4), ("unigram", "none", 1)}
    axes = [{k: c[k] for k in ("model", "scaling", "factor")} for c in out.cells]
    assert plan_cells(p.model_dump(mode="json")) == axes
    at_l = {c["model"]: c for c in out.cells if c["factor"] == 1 and c["scaling"] == "none"}
    gain = at_l["unigram"]["loss"] - at_l["cat-nope"]["loss"]
    assert at_l["cat-nope"]["unigram_gain"] == pytest.approx(gain) and "unigram_gain" not in at_l["unigram"]
    assert all(c["bpc"] is not None and c["bpc"] > 0 for c in out.cells)
    assert (tmp_path / "runs" / "cat-nope" / "seed-0" / "checkpoint.pt").is_file()
    assert [p.name for p in out.plot(tmp_path / "fig")] == ["cat-lm-length-extrapolation.png"]


def test_a_gap_inside_the_windows_noise_is_a_tie():
    """CAT with RoPE 0.0065 nats below Pythia at L, each loss with a window error of 0.01: a tie
    (inconclusive); the same gap with errors of 0.001 decides."""
    exp = load_theory("cat-lm-length-extrapolation")
    curves = {
        **ATTENTION,
        ("cat-nope", "none"): (1.45, 1.44, 1.44, 1.45, 1.45),
        ("cat-rope", "none"): (1.3935, 1.80, 2.50, 3.00, 3.20),
        ("cat-rope", "yarn"): (1.3935, 1.34, 1.36, 1.37, 1.38),
    }
    loss = losses(curves)
    claim = "further improves perplexity when combined with RoPE."

    def verdict(se: float) -> str:
        errors = {key: (se, None, 1) for key in loss} | {("unigram", "none", 1): (se, None, 1)}
        out = outcome_from(loss, dict.fromkeys(loss), 3.0, "char", 128, **QUIET, errors=errors)
        (result,) = [
            c
            for c in evaluate_claims(exp.claims, out.cells, out.metric, axes=out.axes)
            if c["claim"].endswith(claim)
        ]
        return result["verdict"]

    assert verdict(0.01) == INCONCLUSIVE
    assert verdict(0.001) == REPRODUCED


def test_cells_carry_the_errors_of_their_losses_and_ratios():
    curves = {("cat-nope", "none"): (1.0, 1.1, 0.9, 1.3, 2.0)}
    loss = losses(curves)
    errors = {key: (0.03, None, 1) for key in loss} | {("unigram", "none", 1): (0.04, None, 1)}
    cells = outcome_from(loss, {}, 3.0, "char", 64, **QUIET, errors=errors).cells
    by_factor = {c["factor"]: c for c in cells if c["model"] == "cat-nope"}
    assert by_factor[2]["se:loss"] == 0.03 and by_factor[2]["seeds"] == 1
    assert by_factor[2]["se:ppl_ratio"] == pytest.approx(math.exp(0.1) * math.hypot(0.03, 0.03))
    assert by_factor[1]["se:unigram_gain"] == pytest.approx(0.05)
    (unigram,) = [c for c in cells if c["model"] == "unigram"]
    assert unigram["se:loss"] == 0.04
