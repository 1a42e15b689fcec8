"""NGH_m^(1,2,3) bundles in the backbone (ICLL Sec. 6): placement, structure, token ids."""

from __future__ import annotations

import pytest
import torch

from mixerzoo import build_model
from mixerzoo.mixers.ngram_block import NgramBlock, NgramBundleLayer
from mixerzoo.registry import ConfigError


def layout(model):
    """'B' for a backbone block, the order n for an inserted n-gram layer."""
    return [b.mixer.p.order if isinstance(b, NgramBundleLayer) else "B" for b in model.blocks]


def model(n_layers=4, **extra):
    cfg = {"vocab_size": 30, "d_model": 16, "n_layers": n_layers, "mixer": "base_conv", **extra}
    return build_model(cfg)


@pytest.mark.parametrize(
    "after, expected",
    [
        (1, ["B", 1, 2, 3, "B", "B", "B"]),  # NGH_1: after the first layer
        (-2, ["B", "B", 1, 2, 3, "B", "B"]),  # NGH_{-2}: two original layers above it
        (0, [1, 2, 3, "B", "B", "B", "B"]),
        (4, ["B", "B", "B", "B", 1, 2, 3]),
        (-4, [1, 2, 3, "B", "B", "B", "B"]),
    ],
)
def test_bundle_placement(after, expected):
    assert layout(model(ngram_heads=[{"after_layer": after}])) == expected


def test_paper_table_2_layout_and_custom_orders():
    m = model(6, ngram_heads=[{"after_layer": 1}, {"after_layer": -2, "orders": [1, 1, 1]}])
    assert layout(m) == ["B", 1, 2, 3, "B", "B", "B", 1, 1, 1, "B", "B"]


def test_bundle_parameters_are_three_fig_8_blocks():
    d = 16
    plain, bundled = model(), model(ngram_heads=[{"after_layer": 1}])
    extra = sum(p.numel() for p in bundled.parameters()) - sum(p.numel() for p in plain.parameters())
    per_block = 4 * d * d + 4 * d + 2 * d  # 4 linear d x d weights and biases, 2 RMSNorm weights
    assert extra == 3 * per_block  # Sec. 6: three NGH layers with MLPs make 12 d^2


def test_bare_ngh_layers_without_mlp():
    m = model(ngram_heads=[{"after_layer": 2, "orders": [2], "mlp": False}])
    (layer,) = [b for b in m.blocks if isinstance(b, NgramBundleLayer)]
    assert not hasattr(layer.mixer, "mlp")


def test_layers_sit_bare_in_the_residual_stream_and_get_token_ids():
    torch.manual_seed(0)
    m = model(ngram_heads=[{"after_layer": 1, "orders": [2]}]).double()
    layer = m.blocks[1]
    seen = {}

    def hook(module, args, kwargs, out):
        seen["x"], seen["ids"], seen["out"] = args[0], kwargs["input_ids"], out

    handle = layer.register_forward_hook(hook, with_kwargs=True)
    ids = torch.randint(0, 30, (2, 10))
    m(ids)
    handle.remove()
    assert torch.equal(seen["ids"], ids)  # the backbone passes ids although base_conv needs none
    expected = NgramBlock.forward(layer.mixer, seen["x"], input_ids=ids)  # no extra norm / residual
    torch.testing.assert_close(seen["out"], expected)


def test_gradient_reaches_bundle_parameters():
    m = model(ngram_heads=[{"after_layer": -1}])
    ids = torch.randint(0, 5, (2, 16))  # small vocab: n-gram matches occur
    m(ids).logsumexp(-1).sum().backward()
    for name, p in m.named_parameters():
        assert p.grad is not None, name


@pytest.mark.parametrize("after", [5, -5])
def test_out_of_range_layer_is_a_config_error(after):
    with pytest.raises(ConfigError, match="after_layer"):
        model(ngram_heads=[{"after_layer": after}])


def test_unknown_bundle_field_is_a_config_error():
    with pytest.raises(ConfigError, match="layer"):
        model(ngram_heads=[{"layer": 1}])
