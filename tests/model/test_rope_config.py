import pytest
import torch

from mixerzoo import build_model
from mixerzoo.registry import ConfigError


def test_rope_scaling_fields_reach_the_rotary():
    m = build_model(
        {
            "vocab_size": 20,
            "d_model": 16,
            "n_layers": 1,
            "mixer": "attention",
            "position": "rope",
            "rope_scaling": "yarn",
            "rope_scale": 4.0,
            "rope_original_len": 32,
        }
    )
    assert m.rope.scaling == "yarn" and m.rope.scale == 4.0
    assert m(torch.randint(0, 20, (1, 64))).shape == (1, 64, 20)


def test_plain_rope_is_default_and_yarn_needs_original_len():
    m = build_model({"vocab_size": 20, "d_model": 16, "n_layers": 1, "mixer": "cat", "position": "rope"})
    assert m.rope.scale == 1.0
    with pytest.raises(ConfigError, match="original_len"):
        build_model(
            {"vocab_size": 20, "d_model": 16, "n_layers": 1, "position": "rope", "rope_scaling": "yarn"}
        )
