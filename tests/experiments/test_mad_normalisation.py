"""MAD's iso-state / iso-parameter normalisation (mad.py) and the figure-level claims of mad.yaml.

Independent answers: recurrent state sizes are written out here per mixer from the papers'
recurrences (Mamba: an (expand d) x d_state SSM state per layer; GLA: a (expand_k d) x (expand_v d)
/ h matrix state over h heads; linear attention and RWKV-6: h matrices of e x e, e = d / h),
and parameters are counted on the model the runs build (``LanguageModel`` from the planned run's
config), every parameter except the token embedding (the LM head is tied to it). The targets
are MAD's: 4096 floats of total state at width 128 (Sec. 3.2) and mad-lab's own layer configs
(configs/layers/mamba.yml, mh-gated-linear-attention.yml, rwkv6-time-mixer.yml), which the
normalisation must leave as they are.
"""

from __future__ import annotations

import pytest

from mixerzoo.claims import NOT_REPRODUCED, NOT_RUN, REPRODUCED, evaluate_claims
from mixerzoo.mixers import SEQUENCE_MIXERS
from mixerzoo.model.language_model import LanguageModel
from mixerzoo.registry import ConfigError
from mixerzoo.studies.mad import (
    ISO_PARAM_RTOL,
    MEAN,
    SCORE,
    mad_experiment,
    normalise_variant,
    recurrent_state,
)
from mixerzoo.studies.sweep.config import load_experiment

TARGET = 4096  # MAD Sec. 3.2: "a common total state dimension of 4096"
MAD_BASE = {
    "d_model": 128,
    "n_layers": 2,
    "norm": "rmsnorm",
    "position": "none",
    "state_mixer": {"name": "swiglu", "hidden_mult": 2.75},
}
FIXED_STATE = {"mamba", "gla", "linear-attention", "rwkv6"}


def hand_state(spec: dict, d: int) -> int:
    """One layer's recurrent state from the mixer's recurrence, written out here."""
    name = spec["name"]
    if name == "mamba":
        return spec.get("expand", 2) * d * spec["d_state"]
    h = spec["num_heads"]
    if name == "gla":
        return int(spec.get("expand_k", 0.5) * d) * int(spec.get("expand_v", 1.0) * d) // h
    if name in ("linear_attention", "rwkv6"):
        return h * (d // h) ** 2
    raise AssertionError(f"no hand formula for {name}")


def non_embedding_params(model_cfg) -> int:
    net = LanguageModel(model_cfg.model_copy(update={"vocab_size": 16}))
    return sum(p.numel() for n, p in net.named_parameters() if not n.startswith("embed."))


# -- the normalisation leaves mad-lab's own configs as they are --------------------------------
@pytest.mark.parametrize(
    "model",
    [
        # mamba.yml: d_state 4, expand 2; MAD App. B.3: 4 Mamba layers, no channel mixer
        {
            "mixer": {"name": "mamba", "d_state": 4, "d_conv": 4, "expand": 2},
            "n_layers": 4,
            "state_mixer": None,
        },
        # mh-gated-linear-attention.yml: 8 heads, expand_k = expand_v = 1
        {"mixer": {"name": "gla", "num_heads": 8, "expand_k": 1.0, "expand_v": 1.0}},
        # rwkv6-time-mixer.yml: head size 16 at d = 128
        {"mixer": {"name": "rwkv6", "num_heads": 8}},
    ],
)
def test_mad_lab_layer_configs_are_already_iso_state(model):
    out = normalise_variant({**MAD_BASE, **model})
    n = model.get("n_layers", 2)
    assert n * hand_state(model["mixer"], 128) == TARGET  # the arithmetic of mad.py's comment
    assert out.state == TARGET
    assert not [k for k in out.changed if k.startswith("mixer.")]


@pytest.mark.parametrize(
    "d,n,mixer,knob,expected",
    [
        (128, 4, {"name": "mamba", "d_state": 16}, "d_state", 4),
        (128, 2, {"name": "mamba", "d_state": 16}, "d_state", 8),
        (64, 4, {"name": "mamba", "d_state": 16}, "d_state", 8),
        (128, 2, {"name": "gla", "num_heads": 2, "expand_k": 1.0}, "num_heads", 8),
        (128, 2, {"name": "gla", "num_heads": 8}, "num_heads", 4),  # expand_k 0.5 halves each head
        (128, 2, {"name": "linear_attention", "num_heads": 16}, "num_heads", 8),
        (128, 2, {"name": "rwkv6", "num_heads": 4}, "num_heads", 8),
    ],
)
def test_iso_state_knob_is_the_one_reaching_4096(d, n, mixer, knob, expected):
    # expected by enumeration with the hand formulas: the one value whose total is 4096 (heads
    # must divide every width they split: d, and GLA's key width)
    key_width = int(mixer.get("expand_k", 0.5) * d) if mixer["name"] == "gla" else d
    hits = [
        v
        for v in range(1, 4 * d + 1)
        if (knob == "d_state" or (d % v == 0 and key_width % v == 0))
        and n * hand_state({**mixer, knob: v}, d) == TARGET
    ]
    assert hits == [expected]
    out = normalise_variant({**MAD_BASE, "d_model": d, "n_layers": n, "mixer": mixer})
    assert out.changed[f"mixer.{knob}"] == (mixer[knob], expected)
    assert out.model["mixer"] == {**mixer, knob: expected}
    assert out.state == TARGET


def test_mad_accounting_leaves_out_the_convolution_window():
    mamba = SEQUENCE_MIXERS.get("mamba")(128, d_state=4, d_conv=4, expand=2)
    assert recurrent_state(mamba) == 256 * 4
    assert mamba.state_size() == 256 * 4 + 256 * 3  # mixerzoo's own count keeps the 3-tap window
    assert recurrent_state(SEQUENCE_MIXERS.get("attention")(128, num_heads=16)) is None


def test_models_without_a_fixed_state_and_hybrids_keep_their_layers():
    for mixer in (
        "hyena",
        ["hyena", {"name": "attention", "num_heads": 16}],
        [{"name": "mamba", "d_state": 4}, "attention"],
    ):
        out = normalise_variant({**MAD_BASE, "mixer": mixer})
        assert out.state is None and out.model["mixer"] == mixer and not out.changed


def test_unreachable_state_is_a_one_line_error():
    with pytest.raises(
        ConfigError, match=r"model.mixer = .*total state 64 cannot come within 2% of 4096 by num_heads"
    ) as err:
        normalise_variant({"d_model": 8, "n_layers": 1, "mixer": {"name": "linear_attention"}})
    assert "\n" not in str(err.value)


# -- iso-parameter ---------------------------------------------------------------------------
def test_iso_parameter_sets_the_moe_width_and_keeps_widths_inside_the_tolerance():
    target = 400_000
    moe = normalise_variant({**MAD_BASE, "mixer": "hyena", "state_mixer": "moe_mlp"}, target_params=target)
    hidden = round(moe.changed["state_mixer.hidden_mult"][1] * 128)
    # 2 MoE layers of 8 GLU experts: one more unit of expert width costs 2 x 8 x 3 x 128 parameters
    assert abs(moe.params - target) <= 2 * 8 * 3 * 128 / 2
    assert moe.model["state_mixer"] == {"name": "moe_mlp", "hidden_mult": hidden / 128}
    own = normalise_variant({**MAD_BASE, "mixer": "hyena"}).params
    near = normalise_variant({**MAD_BASE, "mixer": "hyena"}, target_params=round(own * 1.05))
    assert near.params == own and not near.changed  # inside the 10% tolerance: MAD's width kept
    far = normalise_variant({**MAD_BASE, "mixer": "hyena"}, target_params=round(own * 1.2))
    # 2 SwiGLU layers: one unit of hidden width costs 2 x 3 x 128 parameters
    assert abs(far.params - round(own * 1.2)) <= 2 * 3 * 128 / 2
    assert set(far.changed) == {"state_mixer.hidden_mult"}


# -- the paper preset, as the runs build it ------------------------------------------------------
def _paper_models(sets=None):
    """variant -> the model config of its planned runs (one level per task is enough: the model
    section does not depend on the level)."""
    out = {}
    for run in mad_experiment("mad", "paper", sets, n_levels=1).expand():
        out.setdefault(run.point["variant"], run.config.model)
    return out


def test_paper_preset_is_iso_state_and_iso_parameter():
    models = _paper_models()
    assert set(models) == set(load_experiment("mad").variants)
    reference = non_embedding_params(models["attention"])
    for variant, cfg in models.items():
        specs = [s.flat() for s in cfg.layer_mixers()]
        params = non_embedding_params(cfg)
        assert abs(params / reference - 1) <= ISO_PARAM_RTOL, (variant, params, reference)
        if variant in FIXED_STATE:
            assert cfg.d_model == 128
            assert sum(hand_state(s, cfg.d_model) for s in specs) == TARGET, (variant, specs)
    assert models["mamba"].n_layers == 4 and models["mamba"].layer_state_mixers() == [None] * 4
    assert models["linear-attention"].layer_mixers()[0].params["num_heads"] == 8  # mad-lab's 16 holds 2048


def test_paper_preset_normalises_a_model_chosen_with_set():
    models = _paper_models({"model": "hyena-moe"})
    hyena_moe = models["hyena-moe"]
    full = _paper_models()
    assert hyena_moe == full["hyena-moe"]  # the reference is the file's attention, not the chosen model
    assert hyena_moe.layer_state_mixers()[0].params["hidden_mult"] != 0.125


def test_quick_preset_is_not_normalised():
    # quick keeps the file's layers (16 heads: 2 x 16 x 8^2 = 2048 floats, not 4096) and width 64
    exp = mad_experiment("mad", "quick", {"model": "linear-attention"})
    heads = {s.params["num_heads"] for r in exp.expand() for s in r.config.model.layer_mixers()}
    assert heads == {16}
    assert not [r for r in exp.rules if "variant" in r.when]  # no normalisation rule appended


def test_report_lists_each_variants_state_and_parameters(tmp_path):
    from mixerzoo.store.results import ResultsStore
    from mixerzoo.studies.mad import mad_report

    exp = mad_experiment("mad", "paper", {"model": "gla"}, n_levels=1)
    payload = mad_report(exp, ResultsStore(tmp_path / "r"), "paper")
    norm = payload["normalisation"]
    assert norm["applied"] is True and norm["target_state"] == TARGET
    gla = {"name": "gla", "num_heads": 8, "expand_k": 1.0, "expand_v": 1.0}
    assert norm["variants"]["gla"]["total_state"] == 2 * hand_state(gla, 128)
    assert {c["verdict"] for c in payload["claims"]} == {NOT_RUN}


# -- the claims ----------------------------------------------------------------------------------
TASKS = [
    "mad_in_context_recall",
    "mad_fuzzy_recall",
    "mad_noisy_recall",
    "mad_selective_copy",
    "mad_compression",
    "mad_memorization",
]
#: hand-made MAD scores in the figure's order (readings of the plot, rounded) for the five
#: architectures it shows; the other variants below every striped one
AS_FIGURE = {
    "hyena": [0.82, 0.08, 0.79, 0.93, 0.45, 0.895],
    "mh-hyena": [0.99, 0.14, 0.99, 0.93, 0.45, 0.894],
    "striped-hyena-attention": [1.0, 0.23, 1.0, 1.0, 0.47, 0.891],
    "striped-hyena-attention-moe": [1.0, 0.25, 1.0, 1.0, 0.50, 0.895],
    "striped-hyena-experts-attention-moe": [1.0, 0.28, 1.0, 1.0, 0.52, 0.891],
    "striped-mamba-attention": [1.0, 0.25, 1.0, 1.0, 0.48, 0.89],
    "attention": [1.0, 0.2, 1.0, 0.99, 0.4, 0.85],
    "mamba": [0.7, 0.1, 0.7, 0.9, 0.45, 0.85],
}


def _cells(scores):
    cells = []
    for variant in load_experiment("mad").variants:
        per_task = scores.get(variant, [0.5] * 5 + [0.85])
        for task, value in zip(TASKS, per_task):
            cells.append({"variant": variant, "data.task.name": task, SCORE: value})
        cells.append({"variant": variant, "data.task.name": MEAN, SCORE: sum(per_task) / len(per_task)})
    return cells


def _verdicts(scores):
    claims = load_experiment("mad").claims
    return [
        r["verdict"] for r in evaluate_claims(claims, _cells(scores), SCORE, ["variant", "data.task.name"])
    ]


def test_claims_name_the_files_variants_and_quote_a_source():
    exp = load_experiment("mad")
    assert len(exp.claims) == 10
    for claim in exp.claims:
        assert "2403.17844" in claim.paper_ref
        named = [s.get("variant") for s in claim.selectors()]
        if claim.compare is not None:
            named += [claim.compare.left.get("variant"), claim.compare.right.get("variant")]
        for v in named:
            for one in v if isinstance(v, list) else [v]:
                assert one is None or one in exp.variants


def test_claims_on_hand_made_scores_in_the_figures_order():
    assert _verdicts(AS_FIGURE) == [REPRODUCED] * 10
    # the figure reversed: Hyena above its striped hybrid everywhere
    reversed_ = {
        **AS_FIGURE,
        "hyena": AS_FIGURE["striped-hyena-experts-attention-moe"],
        "striped-hyena-attention": AS_FIGURE["hyena"],
    }
    verdicts = _verdicts(reversed_)
    assert verdicts[0] == verdicts[5] == verdicts[6] == NOT_REPRODUCED
