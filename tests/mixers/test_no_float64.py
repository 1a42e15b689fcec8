"""No float64 tensor is created in a float32 forward or backward, for every registered mixer.

float64 runs at 1/32 to 1/64 of float32's speed on most GPUs and not at all on Apple's MPS. Every
op's outputs are checked under a ``TorchDispatchMode`` (factories, casts and arithmetic alike).
The n-gram prefix sums keep float64 on the CPU only (exact there, and cheap); the check runs them
as on an accelerator.
"""

from __future__ import annotations

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from mixerzoo import build_model
from mixerzoo.mixers import SEQUENCE_MIXERS, STATE_MIXERS, StateMixer
from mixerzoo.ops import ngram

D, L, B, VOCAB = 16, 24, 2, 5


class Float64Ops(TorchDispatchMode):
    """Records the ops that return a float64 tensor."""

    def __init__(self):
        super().__init__()
        self.ops: set[str] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if any(isinstance(t, torch.Tensor) and t.dtype == torch.float64 for t in tree_flatten(out)[0]):
            self.ops.add(str(func))
        return out


@pytest.fixture(autouse=True)
def as_on_an_accelerator(monkeypatch):
    monkeypatch.setattr(ngram, "FLOAT64_PREFIX_DEVICES", frozenset())


CASES = [
    pytest.param("sequence", name, ex, id=f"{name}-{i}")
    for name in SEQUENCE_MIXERS.names()
    for i, ex in enumerate(SEQUENCE_MIXERS.get(name).examples)
] + [pytest.param("state", name, {}, id=name) for name in STATE_MIXERS.names()]


@pytest.mark.parametrize("kind,name,params", CASES)
def test_float32_layer_creates_no_float64(kind, name, params):
    torch.manual_seed(0)
    registry = SEQUENCE_MIXERS if kind == "sequence" else STATE_MIXERS
    mixer = registry.get(name)(D, 64, **params) if kind == "sequence" else registry.get(name)(D)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(B, L, D, generator=g, requires_grad=True)
    ids = torch.randint(1, VOCAB, (B, L), generator=g)
    with Float64Ops() as mode:
        y = mixer(x) if isinstance(mixer, StateMixer) else mixer(x, input_ids=ids)
        y.square().sum().backward()
    assert mode.ops == set(), f"float64 from {sorted(mode.ops)}"


@pytest.mark.parametrize("scaling,scale", [("none", 1.0), ("pi", 2.0), ("yarn", 2.0)])
def test_rope_model_creates_no_float64(scaling, scale):
    config = {"vocab_size": 11, "d_model": D, "n_layers": 1, "mixer": "attention", "position": "rope"}
    config |= {"rope_scaling": scaling, "rope_scale": scale, "rope_original_len": 16}
    model = build_model(config)
    with Float64Ops() as mode:
        model(torch.randint(0, 11, (B, L))).sum().backward()
    assert mode.ops == set(), f"float64 from {sorted(mode.ops)}"


def test_the_check_sees_float64():
    with Float64Ops() as mode:
        torch.ones(2).double()
    assert mode.ops
