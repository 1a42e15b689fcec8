"""Model accounting: recurrent state and parameter counts, against numbers worked out by hand.

States: Mamba holds an (expand d) x d_state SSM state per layer (its conv window is not recurrent
memory); linear attention one e x e matrix per head, e = d / heads (its normaliser left out).
Parameters: a block is norm1 + sequence mixer + norm2 + state mixer, plus the final norm; an
RMSNorm of width d has d weights, ``nn.Linear(i, o)`` i*o weights and o biases.
"""

from __future__ import annotations

import pytest

from mixerzoo.mixers import SEQUENCE_MIXERS
from mixerzoo.model.accounting import (
    count_params,
    recurrent_state,
    state_knob,
    state_mixer_params,
    total_state,
)
from mixerzoo.model.config import MixerSpec

LINEAR = {"name": "linear_attention", "num_heads": 2}


def test_recurrent_state_counts_the_memory_not_the_window():
    mamba = SEQUENCE_MIXERS.get("mamba")(8, d_state=4, expand=2)
    assert recurrent_state(mamba) == (2 * 8) * 4  # 64
    assert mamba.state_size() == (2 * 8) * (4 + 4 - 1)  # the 3-tap conv window counted there
    linear = SEQUENCE_MIXERS.get("linear_attention")(8, num_heads=2)
    assert recurrent_state(linear) == 2 * 4 * 4  # 32: two 4 x 4 matrices
    assert recurrent_state(SEQUENCE_MIXERS.get("attention")(8, num_heads=2)) is None  # a KV cache


def test_total_state_sums_layers_and_is_none_for_a_layer_without_fixed_state():
    assert total_state({"d_model": 8, "n_layers": 3, "mixer": LINEAR}) == 3 * 32
    hybrid = {"d_model": 8, "n_layers": 2, "mixer": [LINEAR, {"name": "attention", "num_heads": 2}]}
    assert total_state(hybrid) is None


def test_count_params_of_a_one_block_model_by_hand():
    model = {
        "d_model": 4,
        "n_layers": 1,
        "norm": "rmsnorm",
        "position": "none",
        "mixer": {"name": "linear_attention"},
        "state_mixer": {"name": "mlp", "hidden_mult": 2},
    }
    mixer = (4 * 12 + 12) + (4 * 4 + 4)  # qkv and out projections: 80
    mlp = (4 * 8 + 8) + (8 * 4 + 4)  # fc1 and fc2 at hidden width 8: 76
    norms = 3 * 4  # norm1, norm2, final norm
    assert count_params(model) == mixer + mlp + norms == 168
    assert count_params({**model, "vocab_size": 1000}) == 168  # embeddings and head left out


def test_state_mixer_params_with_an_override():
    spec = MixerSpec(name="mlp", params={"hidden_mult": 2})
    assert state_mixer_params(spec, 4) == (4 * 8 + 8) + (8 * 4 + 4)
    assert state_mixer_params(spec, 4, hidden_mult=1) == 2 * (4 * 4 + 4)


@pytest.mark.parametrize(
    ("name", "d", "expected"),
    [
        ("mamba", 4, ("d_state", list(range(1, 17)))),  # d_state up to 4 d
        ("linear_attention", 6, ("num_heads", [1, 2, 3, 6])),  # heads dividing the width
        ("long_conv", 6, None),  # no state knob
    ],
)
def test_state_knob(name, d, expected):
    assert state_knob(MixerSpec(name=name), d) == expected
