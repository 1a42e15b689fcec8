"""``features(ids, rows=mask)`` equals ``features(ids)[mask]`` (values and gradients) for every mixer."""

from __future__ import annotations

import pytest
import torch

from mixerzoo import build_model
from mixerzoo.mixers import SEQUENCE_MIXERS

CASES = [(name, "mlp") for name in SEQUENCE_MIXERS.names()] + [
    ("attention", None),
    ({"name": "attention", "num_heads": 2}, "glu"),
    ({"name": "attention", "pattern": "sliding", "window": 4}, "mlp"),
]


@pytest.mark.parametrize("mixer,state", CASES, ids=[f"{m}-{s}" for m, s in CASES])
def test_rows_equal_full_features_then_select(mixer, state):
    torch.manual_seed(0)
    cfg = {"vocab_size": 20, "d_model": 16, "n_layers": 2, "mixer": mixer, "state_mixer": state}
    model = build_model(cfg).double()
    ids = torch.randint(1, 6, (3, 12))
    rows = torch.zeros(3, 12, dtype=torch.bool)
    rows[0, [2, 5, 11]] = True
    rows[2, [0, 7]] = True  # example 1 has no selected row

    full = model.features(ids)[rows]
    g_full = torch.autograd.grad(full.pow(2).sum(), [p for p in model.parameters()], allow_unused=True)
    part = model.features(ids, rows=rows)
    g_part = torch.autograd.grad(part.pow(2).sum(), [p for p in model.parameters()], allow_unused=True)

    torch.testing.assert_close(part, full)
    for a, b in zip(g_part, g_full):
        if a is None or b is None:
            assert a is None and b is None
        else:
            torch.testing.assert_close(a, b)


def test_rows_with_rope_and_ngram_bundles_fall_back_exactly():
    torch.manual_seed(0)
    model = build_model(
        {
            "vocab_size": 20,
            "d_model": 16,
            "n_layers": 2,
            "mixer": "attention",
            "position": "rope",
            "ngram_heads": [{"after_layer": 2, "orders": [1, 2]}],
        }
    ).double()
    ids = torch.randint(1, 6, (2, 10))
    rows = ids > 3
    torch.testing.assert_close(model.features(ids, rows=rows), model.features(ids)[rows])
