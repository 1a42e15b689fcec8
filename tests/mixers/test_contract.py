"""The shared contract every sequence mixer passes, for each of its ``examples`` parameter sets.

Causality, shape and dtype, determinism under a seed, gradient to every parameter, and
(for ``recurrent`` mixers) step-by-step decoding equal to the parallel form: the properties of
``mixerzoo.testing`` (``check_mixer`` runs them on any class), each a test here.
"""

from __future__ import annotations

import pytest
import torch

from mixerzoo import build_model
from mixerzoo.mixers import SEQUENCE_MIXERS
from mixerzoo.testing import PROPERTIES, Setup

CASES = [
    pytest.param(name, i, ex, id=f"{name}-{i}")
    for name in SEQUENCE_MIXERS.names()
    for i, ex in enumerate(SEQUENCE_MIXERS.get(name).examples)
]


def failures(prop, name, params):
    """The property's failures for a registered mixer (``mixerzoo.testing``, which users run too)."""
    return PROPERTIES[prop](Setup(SEQUENCE_MIXERS.get(name), params))


@pytest.mark.parametrize("name,i,params", CASES)
def test_shape_and_dtype(name, i, params):
    assert not failures("shape", name, params)


@pytest.mark.parametrize("name,i,params", CASES)
def test_causality(name, i, params):
    assert not failures("causality", name, params)


@pytest.mark.parametrize("name,i,params", CASES)
def test_determinism(name, i, params):
    assert not failures("determinism", name, params)


@pytest.mark.parametrize("name,i,params", CASES)
def test_gradient_reaches_every_parameter(name, i, params):
    assert not failures("gradient", name, params)


RECURRENT = [c for c in CASES if SEQUENCE_MIXERS.get(c.values[0]).recurrent]


@pytest.mark.parametrize(
    "name,i,params", RECURRENT or [pytest.param(None, None, None, marks=pytest.mark.skip)]
)
def test_recurrent_matches_parallel(name, i, params):
    assert not failures("recurrent", name, params)


@pytest.mark.parametrize("name", SEQUENCE_MIXERS.names())
def test_minimal_model_dict_builds_and_runs(name):
    model = build_model({"vocab_size": 50, "d_model": 16, "n_layers": 2, "mixer": name})
    logits = model(torch.randint(0, 50, (2, 12)))
    assert logits.shape == (2, 12, 50)
    model2 = build_model({"vocab_size": 50, "d_model": 16, "n_layers": 1, "mixer": {"name": name}})
    assert model2(torch.randint(0, 50, (1, 5))).shape == (1, 5, 50)


HEADED = [n for n in SEQUENCE_MIXERS.names() if "num_heads" in SEQUENCE_MIXERS.get(n).Params.model_fields]


@pytest.mark.parametrize("name", HEADED)
def test_heads_that_do_not_divide_d_model_are_a_config_error(name):
    from mixerzoo.registry import ConfigError

    with pytest.raises(ConfigError, match=rf"mixer\[{name}\]\.num_heads = 3: must divide"):
        SEQUENCE_MIXERS.get(name)(16, 64, num_heads=3)
