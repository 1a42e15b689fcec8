"""Thm. 2 tools: filter and attention-map distances, checked on constructed models."""

from __future__ import annotations

import math

import numpy as np
import torch

from mixerzoo.ops.heads import merge_heads, split_heads
from mixerzoo.tasks import build_task
from mixerzoo.theory import thm1_associative_recall as thm1
from mixerzoo.theory.thm2_length_generalization import (
    attention_distance,
    attention_probabilities,
    cat_filter_distances,
    filter_distance,
    shifted_filter_distances,
)


def test_filter_distance_ignores_scale_and_sign():
    taps = torch.tensor([[0.0, 1.0, 0.0], [0.0, -3.0, 0.0], [1.0, 0.0, 0.0], [0.5, 0.5, 0.0]])
    torch.testing.assert_close(
        filter_distance(taps, 1), torch.tensor([0.0, 0.0, 2.0, 1.0], dtype=torch.float64)
    )


def test_constructed_model_is_at_distance_zero_and_the_broken_one_far():
    p = thm1.Thm1Params(vocab_size=512)
    good, info = thm1.construct(p, 128)
    bad = thm1.construct(p.model_copy(update={"key_filter": [1.0, 0.0, 0.0]}), 128)[0]
    assert cat_filter_distances(good.blocks[0].mixer) == {
        "q_filter_l1": 0.0,
        "k_filter_l1": 0.0,
        "v_filter_l1": 0.0,
    }
    data = build_task("mqar_cat", vocab_size=512, seq_len=128).make(4, 0, "test")
    near = attention_distance(good, data.inputs, data.labels)
    far = attention_distance(bad, data.inputs, data.labels)
    # CAT-ws App. E.1 (key delay):
    # ||S(c X_k q) - I_{alpha+1}||_1 <= 2(L-1)e^{-c Delta} / (1 + (L-1)e^{-c Delta})
    tail = 127 * math.exp(-info["c"] * (1 - info["mu"]))
    assert near["attention_l1_max"] <= 2 * tail / (1 + tail)
    assert far["attention_l1_mean"] > 1.9


def test_attention_probabilities_reproduce_the_mixer_output():
    torch.manual_seed(0)
    from mixerzoo import build_model

    model = build_model(
        {"vocab_size": 30, "d_model": 16, "n_layers": 1, "mixer": {"name": "cat", "num_heads": 2}}
    )
    ids = torch.from_numpy(np.random.default_rng(0).integers(0, 30, size=(2, 12)))
    probs = attention_probabilities(model, ids)
    mixer = model.blocks[0].mixer
    h = model.blocks[0].norm1(model.embed(ids))
    v = split_heads(mixer.convolve(mixer.qkv(h).chunk(3, dim=-1)[2], "v"), 2)
    with torch.no_grad():
        torch.testing.assert_close(mixer.out(merge_heads(probs @ v)), mixer(h), atol=1e-5, rtol=1e-5)


def test_a_shifted_construction_is_found_at_its_shift():
    # Cor. 1 with one extra delay on keys and values (F_k = D_2, F_v = D_1) solves MQAR too; its map
    # puts the mass on alpha + 2: distance 2 from Cor. 1's map, ~0 at shift 1.
    p = thm1.Thm1Params(vocab_size=512, key_filter=[0.0, 0.0, 1.0])
    model, _ = thm1.construct(p, 128)
    with torch.no_grad():
        model.blocks[0].mixer.filters["v"].copy_(torch.tensor([[0.0, 1.0, 0.0]]))
    data = build_task("mqar_cat", vocab_size=512, seq_len=128).make(4, 0, "test")
    att = attention_distance(model, data.inputs, data.labels)
    assert att["attention_l1_mean"] > 1.9
    assert att["best_shift"] == 1 and att["attention_l1_best_shift"] < 0.05


def test_shifted_filters_are_found_at_the_common_delay():
    """Cor. 1 (key D_1, value D_0) sits at s = 0; with one more delay on keys and values (key D_2,
    value D_1) at s = 1, distance 0 there, while a key delay without its value delay is far."""
    cor1 = thm1.construct(thm1.Thm1Params(vocab_size=64), 16)[0].blocks[0].mixer
    zero = {"k_filter_l1_shifted": 0.0, "v_filter_l1_shifted": 0.0}
    assert shifted_filter_distances(cor1) == {**zero, "filter_shift": 0}
    mixer = thm1.construct(thm1.Thm1Params(vocab_size=64, key_filter=[0.0, 0.0, 1.0]), 16)[0].blocks[0].mixer
    unpaired = shifted_filter_distances(mixer)  # key D_2, value D_0: no common delay fits both
    assert max(unpaired["k_filter_l1_shifted"], unpaired["v_filter_l1_shifted"]) == 2.0
    with torch.no_grad():
        mixer.filters["v"].copy_(torch.tensor([[0.0, -3.0, 0.0]]))  # D_1 up to scale and sign
    assert shifted_filter_distances(mixer) == {**zero, "filter_shift": 1}


def test_a_tiny_run_gives_every_cell_the_shifted_distances_the_claims_read():
    from mixerzoo.claims import VERDICTS, evaluate_claims
    from mixerzoo.studies.computed.files import load_theory
    from mixerzoo.theory.thm2_length_generalization import Thm2Params, plan_cells, run

    p = Thm2Params(
        train_seq_len=16, test_multipliers=[1, 2], d_model=16, vocab_size=64, n_train=64, n_test=8, epochs=1
    )
    out = run(p, log=lambda _m: None)
    assert [c["length_factor"] for c in out.cells] == [1, 2]
    for c in out.cells:
        assert c["shift_mismatch"] == abs(c["best_shift"] - c["filter_shift"])
        if c["filter_shift"] == 0:  # s = 0 is Cor. 1 itself
            assert (
                c["k_filter_l1_shifted"] == c["k_filter_l1"] and c["v_filter_l1_shifted"] == c["v_filter_l1"]
            )
    claims = load_theory("cat-thm2-length-generalization").claims
    judged = evaluate_claims(claims, out.cells, out.metric, axes=out.axes)
    assert len(judged) == 3 and all(j["verdict"] in VERDICTS for j in judged)
    # the cells carry the size of their evidence, and the planned cells are the ones run
    assert all(c["n_test"] == 8 and c["seeds"] == 1 for c in out.cells)
    assert plan_cells(p.model_dump()) == [{k: c[k] for k in out.axes} for c in out.cells]


def test_the_paper_scope_is_fig_6s_length_factors():
    from mixerzoo.studies.dispatch import find_study

    study = find_study("cat-thm2-length-generalization")
    assert study.scope({}) == [{"length_factor": f} for f in (1, 2, 4, 8, 16)]
