"""MAD's iso-state / iso-parameter normalisation (MAD: Poli et al. 2024, *Mechanistic Design and
Scaling of Hybrid Architectures*).

The protocol (mad-lab README, "The MAD Protocol" item 2): "Fixed-state architectures need to be
normalized to an iso-state and iso-parameter setting, including models featuring sparsely
activated layers such as Mixture-of-Experts." The paper (Sec. 3.2) fixes the target: a common
total state dimension of 4096 at width 128. States and parameters are counted as
``model/accounting.py`` does, the accounting under which mad-lab's own layer configs
(``configs/layers/*.yml``) land on 4096:

    mamba.yml (4 Mamba layers, no channel mixer, MAD App. B.3): 4 x (2 x 128) x 4        = 4096
    mh-gated-linear-attention.yml (8 heads, expand_k = expand_v = 1): 2 x 8 x 16 x 16  = 4096
    rwkv6-time-mixer.yml (head size 16 -> 8 heads): 2 x 8 x 16 x 16                   = 4096

(counting Mamba's 3-tap window as ``SequenceMixer.state_size()`` does would put mad-lab's own
Mamba at 7168). Parameters exclude the embeddings (MAD App. B.3 as a transcript gives it), and
every MoE expert counts.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from typing import Any

from mixerzoo.config_paths import deep_merge, set_path
from mixerzoo.model.accounting import (
    build_mixer,
    count_params,
    model_config,
    recurrent_state,
    state_knob,
    state_mixer_params,
    total_state,
)
from mixerzoo.model.config import MixerSpec
from mixerzoo.params import validate
from mixerzoo.registry import ConfigError, short_repr
from mixerzoo.studies.sweep.config import VARIANT, ExperimentConfig, matches

#: MAD Sec. 3.2, as two secondary transcripts quote it (see docs/peers.md): "Here, we normalize
#: all fixed-state architectures to a common total state dimension of 4096" (at width 128)
MAD_TOTAL_STATE = 4096
#: relative tolerance of the iso-state match (a knob takes integer values; 0 for MAD's primitives)
ISO_STATE_RTOL = 0.02
#: relative tolerance of the iso-parameter match: a variant within it keeps its state-mixer width
ISO_PARAM_RTOL = 0.10
#: the architecture every variant's parameter count is matched to (MHA + SwiGLU, the Transformer)
REFERENCE_VARIANT = "attention"


@dataclass
class Normalised:
    """One variant after :func:`normalise_variant`: its model section and what was matched."""

    model: dict[str, Any]
    state: int | None  # total recurrent state (None: not a fixed-state model)
    params: int  # non-embedding parameters
    target_state: int
    target_params: int | None
    changed: dict[str, tuple[Any, Any]] = field(default_factory=dict)  # knob -> (before, after)


def _with_layer_spec(model: dict[str, Any], key: str, spec: dict[str, Any], n: int) -> dict[str, Any]:
    """``model`` with every layer's ``key`` (mixer / state_mixer) set to ``spec``, in its own form."""
    out = copy.deepcopy(model)
    out[key] = [copy.deepcopy(spec) for _ in range(n)] if isinstance(model.get(key), list) else spec
    return out


def _same(specs) -> bool:
    """Every layer has the same spec (None included)."""
    return len({json.dumps(s.flat() if s else None, sort_keys=True) for s in specs}) == 1


def normalise_variant(
    model: dict[str, Any],
    target_state: int = MAD_TOTAL_STATE,
    target_params: int | None = None,
    state_rtol: float = ISO_STATE_RTOL,
    param_rtol: float = ISO_PARAM_RTOL,
) -> Normalised:
    """Bring a model section to MAD's iso-state / iso-parameter setting at its own width.

    1. Iso-state: a *fixed-state* model (every layer the same sequence mixer, with a recurrent
       state) gets the value of its ``state_knob`` whose ``total_state`` is nearest
       ``target_state`` (ties: the value nearest the given one); a ConfigError names the model
       when that is still more than ``state_rtol`` off. A mixer with a state but neither knob
       keeps it (the result reports it). Hybrids with attention and models without
       a fixed state (Hyena, attention) keep their per-layer settings, as mad-lab composes its
       per-layer configs into hybrids.
    2. Iso-parameter: when ``target_params`` is given and the non-embedding parameter count
       (``count_params``) is off by more than ``param_rtol``, the state mixer's hidden width
       (``hidden_mult``, every layer alike) becomes the integer width whose count is nearest the
       target; inside the tolerance MAD's widths are kept. A model without a state mixer (MAD's
       Mamba) keeps its count, which the result reports.
    """
    cfg = model_config(model)
    out = copy.deepcopy(model)
    changed: dict[str, tuple[Any, Any]] = {}
    state = total_state(out)
    if state is not None and _same(cfg.layer_mixers()):
        out, state = _match_state(model, out, cfg, state, target_state, state_rtol, changed)
    params = count_params(out)
    if target_params is not None and abs(params - target_params) > param_rtol * target_params:
        out, params = _match_params(out, cfg, target_params, params, changed)
    return Normalised(out, state, params, target_state, target_params, changed)


def _match_state(
    model, out, cfg, state: int, target: int, rtol: float, changed
) -> tuple[dict[str, Any], int]:
    """Set a fixed-state model's state knob (every layer alike) so its total is nearest ``target``."""
    spec, d, n = cfg.layer_mixers()[0], cfg.d_model, cfg.n_layers
    knob = state_knob(spec, d)
    if knob is not None and state != target:
        name, values = knob
        current = getattr(build_mixer(spec, d).p, name)
        totals = {}
        for v in values:  # a value the mixer rejects (heads not dividing a width) is skipped
            try:
                mixer = build_mixer(MixerSpec(name=spec.name, params={**spec.params, name: v}), d)
            except ConfigError:
                continue
            totals[v] = n * recurrent_state(mixer)
        best = min(totals, key=lambda v: (abs(totals[v] - target), abs(v - current)))
        if best != current:
            out = _with_layer_spec(out, "mixer", {**spec.flat(), name: best}, n)
            changed[f"mixer.{name}"] = (current, best)
        state = totals[best]
    if knob is not None and abs(state - target) > rtol * target:
        raise ConfigError(
            f"model.mixer = {short_repr(model.get('mixer'))}: total state {state} cannot come within "
            f"{rtol:.0%} of {target} by {knob[0]}"
        )
    return out, state


def _match_params(out, cfg, target: int, params: int, changed) -> tuple[dict[str, Any], int]:
    """Set the state mixer's hidden width (every layer alike) so the count is nearest ``target``."""
    from mixerzoo.mixers import STATE_MIXERS

    mixers = cfg.layer_state_mixers()
    if mixers[0] is None or not _same(mixers):
        return out, params
    spec, d, n = mixers[0], cfg.d_model, len(mixers)
    if "hidden_mult" not in STATE_MIXERS.get(spec.name).Params.model_fields:
        return out, params

    def count(**over: Any) -> int:
        return state_mixer_params(spec, d, **over)

    rest = params - n * count()  # everything but the state mixers
    one, per_width = count(hidden_mult=1 / d), count(hidden_mult=2 / d) - count(hidden_mult=1 / d)
    guess = max(1, round(((target - rest) / n - one) / per_width) + 1)  # the count is affine in width
    width = min(
        (w for w in (guess - 1, guess, guess + 1) if w >= 1),
        key=lambda w: abs(rest + n * count(hidden_mult=w / d) - target),
    )
    changed["state_mixer.hidden_mult"] = (spec.params.get("hidden_mult"), width / d)
    out = _with_layer_spec(out, "state_mixer", {**spec.flat(), "hidden_mult": width / d}, n)
    return out, rest + n * count(hidden_mult=width / d)


def variant_models(exp: ExperimentConfig) -> dict[str, dict[str, Any]]:
    """Variant -> its model section: base, the variant, then the rules that hold for it."""
    out = {}
    for name, variant in (exp.variants or {exp.name: {}}).items():
        raw = deep_merge(copy.deepcopy(exp.base), copy.deepcopy(variant))
        point = {VARIANT: name} if exp.variants else {}
        for rule in exp.rules:
            if matches(point, rule.when, exp.name, raw):
                for path, value in rule.set.items():
                    set_path(raw, path, copy.deepcopy(value))
        out[name] = raw.get("model", {})
    return out


def normalise_experiment(
    exp: ExperimentConfig, target_params: int | None = None, target_state: int = MAD_TOTAL_STATE
) -> tuple[ExperimentConfig, dict[str, Normalised]]:
    """Every variant through :func:`normalise_variant`; what changed is appended as rules
    (``when: {variant: v}``), after the file's and the ``--set`` rules."""
    result = {v: normalise_variant(m, target_state, target_params) for v, m in variant_models(exp).items()}
    out = exp.model_dump(mode="json")
    for v, norm in result.items():
        keys = {k.split(".")[0] for k in norm.changed}
        if keys:
            when = {VARIANT: v} if exp.variants else {}
            out["rules"].append({"when": when, "set": {f"model.{k}": norm.model[k] for k in sorted(keys)}})
    return validate(ExperimentConfig, out), result
