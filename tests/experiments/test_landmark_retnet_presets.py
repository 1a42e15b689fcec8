"""The `cat-landmark` and `zoology-retnet-kv` files (issue 9 item 5): the Landmark CAT variant is
the one Prop. 1 says can answer, and RetNet's claims cannot read "reproduced" off a RetNet that
has not learned."""

import math

from mixerzoo.claims import INCONCLUSIVE, NOT_REPRODUCED, NOT_RUN, REPRODUCED, evaluate_claims
from mixerzoo.studies.sweep.config import load_experiment

M = "accuracy_per_query"


def test_landmark_variant_uses_prop1_value_filter_and_a_block_size_within_its_bound():
    exp = load_experiment("cat-landmark")
    mixer = exp.variants["landmark-cat"]["model"]["mixer"]
    # F_v = D_-1 (Prop. 1): without it (or a key delay) one layer returns the key, not its value
    assert mixer["value_filter"] == "next" or mixer.get("key_delay", 0) >= 1
    block = mixer["block_size"]
    for preset in ("quick", "paper"):  # paper = the file's grid with its seeds
        for run in load_experiment("cat-landmark", preset).expand():
            d, length = run.point["model.d_model"], run.point["data.task.seq_len"]
            if run.point["variant"] == "landmark-cat":
                # Prop. 1 (A): LCAT solves AR once d >= 2 B log L_bar, L_bar = ceil(L / B)
                assert d >= 2 * block * math.log(math.ceil(length / block)), (preset, d, length)


def test_landmark_quick_preset_compares_both_models_at_every_length_it_runs():
    runs = load_experiment("cat-landmark", "quick").expand()
    by_length = {}
    for run in runs:
        by_length.setdefault(run.point["data.task.seq_len"], set()).add(run.point["variant"])
    assert by_length and all(v == {"cat", "landmark-cat"} for v in by_length.values())


def retnet_cells(retnet, attention, d=64, pairs=8):
    out = []
    for variant, acc in (("retnet-chunk8", retnet), ("attention", attention)):
        out.append(
            {
                "variant": variant,
                "data.task.num_kv_pairs": pairs,
                "model.d_model": d,
                M: acc,
                "runs_finished": 1,
                "runs_planned": 1,
            }
        )
    return out


def test_retnet_kv_premise_says_when_retnet_has_not_learned():
    """Attention 0.98 vs RetNet 0.001 "reproduces" attention >= RetNet; the premise (RetNet solves
    the fewest pairs at some width) is what says the comparison is empty. It is a premise, never a
    claim of its own."""
    exp = load_experiment("zoology-retnet-kv", "quick")
    ahead, decline = evaluate_claims(exp.claims, retnet_cells(0.001, 0.98), M)
    assert ahead["verdict"] == INCONCLUSIVE and "premise not met" in ahead["evidence"]
    assert decline["verdict"] == NOT_RUN  # D = 32, 64 are not in the quick preset
    ahead, _ = evaluate_claims(exp.claims, retnet_cells(0.95, 0.99), M)
    assert ahead["verdict"] == REPRODUCED
    ahead, _ = evaluate_claims(exp.claims, retnet_cells(0.99, 0.95), M)
    assert ahead["verdict"] == NOT_REPRODUCED


def test_retnet_kv_quick_runs_no_retnet_cell_that_cannot_learn():
    """RetNet stays at or below 0.02 on this cell at quick budgets (docs/training_recipes.md), so the
    quick preset trains attention only and both RetNet claims read "not run" there, not
    "inconclusive" on an untrained RetNet; the paper preset keeps both chunk sizes."""
    quick = load_experiment("zoology-retnet-kv", "quick")
    assert {r.point["variant"] for r in quick.expand()} == {"attention"}
    attention_only = [c for c in retnet_cells(0.001, 0.98) if c["variant"] == "attention"]
    assert [v["verdict"] for v in evaluate_claims(quick.claims, attention_only, M)] == [NOT_RUN, NOT_RUN]
    paper = {r.point["variant"] for r in load_experiment("zoology-retnet-kv", "paper").expand()}
    assert {"retnet-chunk8", "retnet-chunk32"} <= paper
