"""LM length extrapolation (CAT Fig. 1 right): each row equals the model scored directly on
windows of that length with the rotary embedding built by hand for the scaling."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mixerzoo.evaluation.ar_hits import contiguous_windows, token_losses
from mixerzoo.evaluation.lm_lengths import evaluate_lengths
from mixerzoo.model import build_model
from mixerzoo.ops.rotary import Rotary
from mixerzoo.registry import ConfigError

L = 8  # training length
TOKENS = np.random.default_rng(0).integers(0, 11, size=700)


def tiny(mixer: dict, position: str):
    torch.manual_seed(0)
    cfg = {"vocab_size": 11, "d_model": 16, "n_layers": 1, "max_len": L, "mixer": mixer, "position": position}
    model = build_model(cfg).eval()
    with torch.no_grad():  # GPT-2 init attends almost uniformly: positions would not matter
        for p in model.blocks[0].mixer.parameters():
            p.normal_(0.0, 1.0)
    return model


def direct(model, factor: int, rope, max_tokens: int):
    windows = contiguous_windows(TOKENS, factor * L, max(1, max_tokens // (factor * L)))
    return token_losses(model, windows, batch_size=4, rope=rope)


@pytest.mark.parametrize("scaling", ["pi", "yarn"])
def test_rows_equal_direct_scoring_with_the_scaled_rope(scaling):
    model = tiny({"name": "attention", "num_heads": 2}, "rope")
    rows = evaluate_lengths(model, TOKENS, L, [1, 2, 4], scaling, "char", max_tokens=256)
    assert [r["length"] for r in rows] == [8, 16, 32]
    for row in rows:
        f = row["factor"]
        rope = None
        if f > 1:  # CAT Sec. 6.2: PI / YaRN with scale = test length / training length
            extra = {"original_len": L} if scaling == "yarn" else {}
            rope = Rotary(10000.0, scale=float(f), scaling=scaling, **extra)
        nll = direct(model, f, rope, 256)
        assert row["tokens"] == nll.size
        assert row["loss"] == pytest.approx(float(nll.mean()), rel=1e-6)
        assert row["bpc"] == pytest.approx(float(nll.mean()) / np.log(2), rel=1e-6)
        if f == 1:
            assert row["loss_beyond"] is None
        else:
            assert row["loss_beyond"] == pytest.approx(float(nll[:, L:].mean()), rel=1e-6)


def test_scaling_changes_the_numbers_only_past_the_training_length():
    model = tiny({"name": "attention", "num_heads": 2}, "rope")
    none = evaluate_lengths(model, TOKENS, L, [1, 4], "none", max_tokens=128)
    pi = evaluate_lengths(model, TOKENS, L, [1, 4], "pi", max_tokens=128)
    assert none[0]["loss"] == pi[0]["loss"]
    assert none[1]["loss"] != pytest.approx(pi[1]["loss"], rel=1e-6)
    unscaled = direct(model, 4, None, 128)
    assert none[1]["loss"] == pytest.approx(float(unscaled.mean()), rel=1e-6)


def test_a_model_without_positions_reads_every_length_the_same_way_for_any_scaling():
    model = tiny({"name": "cat", "num_heads": 2}, "none")  # CAT: no positional encoding (CAT Fig. 1)
    none = evaluate_lengths(model, TOKENS, L, [1, 2, 8], "none", max_tokens=128)
    yarn = evaluate_lengths(model, TOKENS, L, [1, 2, 8], "yarn", max_tokens=128)
    assert [r["loss"] for r in none] == [r["loss"] for r in yarn]
    assert all("no effect" in r["note"] for r in yarn)
    assert none[2]["loss"] == pytest.approx(float(direct(model, 8, None, 128).mean()), rel=1e-6)


def test_learned_positions_are_not_evaluable_past_max_len():
    model = tiny({"name": "attention", "num_heads": 2}, "learned")
    rows = evaluate_lengths(model, TOKENS, L, [1, 2], "none", max_tokens=64)
    assert rows[0]["loss"] is not None
    assert rows[1]["loss"] is None and rows[1]["bpc"] is None
    assert "max_len = 8" in rows[1]["note"]


def test_a_split_shorter_than_a_window_is_a_row_note_and_bad_arguments_are_errors():
    model = tiny({"name": "base_conv"}, "none")
    rows = evaluate_lengths(model, TOKENS[:40], L, [1, 8], "none", unit="token")
    assert rows[0]["ppl"] is not None and rows[1]["ppl"] is None
    assert "do not fill one window" in rows[1]["note"]
    with pytest.raises(ConfigError, match="allowed none, pi, yarn"):
        evaluate_lengths(model, TOKENS, L, [1], "ntk")
    with pytest.raises(ConfigError, match="positive integers"):
        evaluate_lengths(model, TOKENS, L, [0, 2])
