"""Zoology App. H.3 primitives on the real base_conv mixer, against the operations computed directly."""

from __future__ import annotations

import torch

from mixerzoo.theory.zoology_primitives import ZoologyParams, primitives, run


def test_each_primitive_is_exact():
    out = run(ZoologyParams(seq_len=64, d_model=8, shift=5), log=lambda *_: None)
    assert len(out.cells) == 3
    for cell in out.cells:
        assert cell["max_rel_error"] < 1e-12, cell


def test_a_shift_with_the_wrong_filter_is_caught():
    layers = primitives(8, 64, 5)
    wrong_layer, _ = primitives(8, 64, 6)["shift_down(u, 6) (Prop. H.8)"]
    _, reference = layers["shift_down(u, 5) (Prop. H.8)"]
    u = torch.randn(2, 64, 8, dtype=torch.float64)
    with torch.no_grad():
        assert (wrong_layer(u) - reference(u)).abs().max() > 0.5
