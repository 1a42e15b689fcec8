"""``mixerzoo.testing.check_mixer``: the contract on any class, each failure named with numbers."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from mixerzoo.mixers import SequenceMixer
from mixerzoo.registry import ConfigError
from mixerzoo.testing import MixerContractError, check_mixer


class Linear(SequenceMixer):
    """Position-wise: causal, deterministic, every parameter trained."""

    def __init__(self, d_model, max_len=2048, **params):
        super().__init__(d_model, max_len, **params)
        self.proj = nn.Linear(d_model, d_model)

    def forward(self, x, input_ids=None, rope=None):
        return self.proj(x)


class Leaky(Linear):
    """Output 3 reads input 7: a future token."""

    def forward(self, x, input_ids=None, rope=None):
        y = self.proj(x).clone()
        y[:, 3] = y[:, 3] + 0.5 * x[:, 7]
        return y


class Unused(Linear):
    def __init__(self, d_model, max_len=2048, **params):
        super().__init__(d_model, max_len, **params)
        self.spare = nn.Parameter(torch.zeros(d_model))


class BadStep(Linear):
    """Claims a recurrent form whose step is wrong from position 0."""

    recurrent = True

    def init_state(self, batch, device=None, dtype=None):
        return None

    def step(self, x_t, state):
        return self.proj(x_t) + 1.0, state


def test_a_causal_mixer_passes_and_the_report_says_what_was_checked():
    report = check_mixer(Linear)
    assert report.passed and report.checked == ["shape", "causality", "determinism", "gradient"]


def test_a_non_causal_mixer_fails_and_the_message_names_the_leak():
    with pytest.raises(MixerContractError) as err:
        check_mixer(Leaky)
    lines = str(err.value).splitlines()
    assert lines[0] == "Leaky: 1 failed"
    assert lines[1].strip().startswith("causality: output at position 3 changed by ")
    assert lines[1].endswith("when the input at position 7 changed")


def test_each_failed_property_is_reported():
    report = check_mixer(Unused, raise_errors=False)
    assert report.failures == ["gradient: no gradient reaches parameter spare"]
    report = check_mixer(BadStep, raise_errors=False)
    assert report.failures == ["recurrent: step output at position 0 differs from the parallel form by 1"]


def test_not_a_mixer_or_not_buildable_is_one_line():
    with pytest.raises(ConfigError, match="not a sequence mixer \\(class dict; expected a class deriving"):
        check_mixer(dict)
    with pytest.raises(ConfigError, match="cannot be built with"):
        check_mixer("cat", no_such_param=1)
