"""Probes of the model build: a mixer's own initialisation survives the backbone's.

Before the fix ``LanguageModel`` re-initialized every ``nn.Linear`` after the mixers were built,
so Mamba's ``dt_proj`` bias became 0 and every step size Delta = softplus(0) = 0.69 instead of
lying in [dt_min, dt_max] = [1e-3, 0.1] (the Mamba reference initialisation).
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import mixerzoo.model.language_model as lm
from mixerzoo.mixers import SEQUENCE_MIXERS
from mixerzoo.model import build_model


def mamba_deltas(model) -> torch.Tensor:
    """Delta at initialisation for a zero low-rank input: softplus(dt_proj bias), every layer."""
    return torch.cat([F.softplus(b.mixer.dt_proj.bias.detach()) for b in model.blocks])


@pytest.mark.parametrize("params", [{}, {"dt_min": 0.01, "dt_max": 0.02}])
def test_mamba_delta_init_survives_build_model(params):
    torch.manual_seed(0)
    model = build_model(
        {"vocab_size": 50, "d_model": 32, "n_layers": 2, "mixer": {"name": "mamba", **params}}
    )
    lo, hi = params.get("dt_min", 1e-3), params.get("dt_max", 0.1)
    delta = mamba_deltas(model)
    assert delta.min() >= lo * (1 - 1e-4) and delta.max() <= hi * (1 + 1e-4)
    # log-uniform over [lo, hi]: the median of log Delta is near the middle of the log range
    assert (
        abs(delta.log().median().item() - (math.log(lo) + math.log(hi)) / 2) < 0.25 * math.log(hi / lo) + 1e-3
    )
    std = (
        model.blocks[0].mixer.dt_rank ** -0.5
    )  # dt_proj weight: U(-dt_rank^-0.5, dt_rank^-0.5), not N(0, 0.02)
    w = model.blocks[0].mixer.dt_proj.weight
    assert w.abs().max() <= std and w.abs().max() > 0.5 * std


def owned_by_backbone(module: nn.Module, pname: str) -> bool:
    """The GPT-2 init owns weights and biases of nn.Linear / nn.Embedding not marked _no_reinit."""
    if getattr(module, "_no_reinit", False):
        return False
    return isinstance(module, (nn.Linear, nn.Embedding)) and not getattr(
        getattr(module, pname), "_no_reinit", False
    )


@pytest.mark.parametrize("name", SEQUENCE_MIXERS.names())
def test_every_mixer_keeps_its_own_init_through_build_model(name, monkeypatch):
    """Snapshot each mixer right after its constructor; after build_model, every parameter the
    backbone does not own (direct parameters: S4D's log_dt, RWKV's time_decay, Hyena's filter
    frequencies, ...; and anything marked ``_no_reinit``) is unchanged."""
    snapshots: list[tuple[nn.Module, dict[str, torch.Tensor]]] = []
    real = SEQUENCE_MIXERS

    class Recording:
        def get(self, mixer_name):
            cls = real.get(mixer_name)

            def build(*args, **kwargs):
                m = cls(*args, **kwargs)
                snapshots.append((m, {k: v.detach().clone() for k, v in m.named_parameters()}))
                return m

            return build

    monkeypatch.setattr(lm, "SEQUENCE_MIXERS", Recording())
    cls = real.get(name)
    torch.manual_seed(0)
    spec = {"name": name, **cls.examples[0]}  # the first example: the mixer's defaults
    build_model({"vocab_size": 40, "d_model": 16, "n_layers": 2, "max_len": 32, "mixer": spec})
    assert len(snapshots) == 2
    checked = 0
    for mixer, before in snapshots:
        for mod_name, module in mixer.named_modules():
            for pname, p in module.named_parameters(recurse=False):
                if owned_by_backbone(module, pname):
                    continue
                key = f"{mod_name}.{pname}" if mod_name else pname
                assert torch.equal(p.detach(), before[key]), f"{name}: {key} was re-initialized"
                checked += 1
    if name == "mamba":
        assert checked >= 2 * 6  # dt_proj weight and bias, conv, A_log, D per layer


def test_backbone_still_inits_what_it_owns():
    torch.manual_seed(0)
    model = build_model({"vocab_size": 50, "d_model": 64, "n_layers": 1, "mixer": "mamba"})
    mixer = model.blocks[0].mixer
    assert abs(mixer.in_proj.weight.std().item() - 0.02) < 0.002  # GPT-2 N(0, 0.02)
    assert abs(model.embed.weight.std().item() - 0.02) < 0.002


def test_test_time_rope_is_passed_not_swapped():
    """Length generalization scales RoPE per call (features(rope=...)); the model is not mutated."""
    torch.manual_seed(0)
    model = build_model(
        {"vocab_size": 20, "d_model": 16, "n_layers": 1, "mixer": "attention", "position": "rope"}
    )
    trained = model.rope
    x = torch.randint(0, 20, (2, 32))
    assert model.rope_for_length(32, 8, "none") is None
    assert model.rope_for_length(8, 8, "pi") is None
    scaled = model.rope_for_length(32, 8, "pi")
    assert scaled.scale == 4.0 and scaled.scaling == "pi"
    with torch.no_grad():
        plain = model.features(x)
        passed = model.features(x, rope=scaled)
        model.rope = scaled  # the old way, for an independent reference
        swapped = model.features(x)
        model.rope = trained
    assert torch.equal(passed, swapped) and not torch.allclose(passed, plain)
    assert model.rope is trained and model.rope.scale == 1.0
    yarn = model.rope_for_length(32, 8, "yarn")
    assert yarn.scaling == "yarn" and yarn.original_len == 8


def test_rope_for_a_model_without_rope_is_refused():
    model = build_model({"vocab_size": 20, "d_model": 16, "n_layers": 1, "mixer": "attention"})
    assert model.rope_for_length(32, 8, "pi") is None
    rope = build_model(
        {"vocab_size": 20, "d_model": 16, "n_layers": 1, "mixer": "attention", "position": "rope"}
    ).rope
    with pytest.raises(ValueError, match="no rotary"):
        model.features(torch.zeros(1, 4, dtype=torch.long), rope=rope)
