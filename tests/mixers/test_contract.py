"""The shared contract every sequence mixer passes, for each of its ``examples`` parameter sets.

Causality, shape and dtype, determinism under a seed, gradient to every parameter, and
(for ``recurrent`` mixers) step-by-step decoding equal to the parallel form.
"""

from __future__ import annotations

import pytest
import torch

from mixerzoo import build_model
from mixerzoo.mixers import SEQUENCE_MIXERS

D, L, B, VOCAB = 16, 24, 2, 5  # small vocab so n-gram/token-match mixers see repeats

CASES = [
    pytest.param(name, i, ex, id=f"{name}-{i}")
    for name in SEQUENCE_MIXERS.names()
    for i, ex in enumerate(SEQUENCE_MIXERS.get(name).examples)
]


def make(name, params, seed=0, dtype=torch.float32):
    torch.manual_seed(seed)
    return SEQUENCE_MIXERS.get(name)(D, 64, **params).to(dtype)


def inputs(seed=1, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(B, L, D, generator=g, dtype=dtype)
    ids = torch.randint(1, VOCAB, (B, L), generator=g)
    return x, ids


def run(mixer, x, ids):
    return mixer(x, input_ids=ids if mixer.needs_input_ids else None)


@pytest.mark.parametrize("name,i,params", CASES)
def test_shape_and_dtype(name, i, params):
    for dtype in (torch.float32, torch.float64):
        m = make(name, params, dtype=dtype).eval()
        x, ids = inputs(dtype=dtype)
        y = run(m, x, ids)
        assert y.shape == (B, L, D)
        assert y.dtype == dtype
        assert torch.isfinite(y).all()


@pytest.mark.parametrize("name,i,params", CASES)
def test_causality(name, i, params):
    m = make(name, params, dtype=torch.float64).eval()
    x, ids = inputs(dtype=torch.float64)
    y = run(m, x, ids)
    for t in (0, L // 3, L - 2):
        x2, ids2 = x.clone(), ids.clone()
        x2[:, t + 1 :] = torch.randn_like(x2[:, t + 1 :]) * 3
        ids2[:, t + 1 :] = torch.randint(1, VOCAB, ids2[:, t + 1 :].shape)
        y2 = run(m, x2, ids2)
        torch.testing.assert_close(y2[:, : t + 1], y[:, : t + 1], atol=1e-9, rtol=1e-7)


@pytest.mark.parametrize("name,i,params", CASES)
def test_determinism(name, i, params):
    x, ids = inputs()
    y1 = run(make(name, params, seed=3).eval(), x, ids)
    y2 = run(make(name, params, seed=3).eval(), x, ids)
    assert torch.equal(y1, y2)


@pytest.mark.parametrize("name,i,params", CASES)
def test_gradient_reaches_every_parameter(name, i, params):
    m = make(name, params)
    x, ids = inputs()
    x.requires_grad_(True)
    run(m, x, ids).pow(2).sum().backward()
    assert x.grad is not None and torch.isfinite(x.grad).all()
    for pname, p in m.named_parameters():
        assert p.grad is not None, f"no gradient reaches {pname}"
        assert torch.isfinite(p.grad).all(), pname


RECURRENT = [c for c in CASES if SEQUENCE_MIXERS.get(c.values[0]).recurrent]


@pytest.mark.parametrize(
    "name,i,params", RECURRENT or [pytest.param(None, None, None, marks=pytest.mark.skip)]
)
def test_recurrent_matches_parallel(name, i, params):
    m = make(name, params).eval()
    x, ids = inputs()
    with torch.no_grad():
        y = run(m, x, ids)
        state = m.init_state(B, device=x.device, dtype=x.dtype)
        steps = []
        for t in range(L):
            y_t, state = m.step(x[:, t], state)
            steps.append(y_t)
    torch.testing.assert_close(torch.stack(steps, dim=1), y, atol=1e-5, rtol=1e-5)


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
