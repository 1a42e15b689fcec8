"""The mixer a scorecard scores: a registered name, an import path ``pkg.mod:Class`` or a model
mapping, and what it holds in memory at inference (its state, for the recall-against-state figure).

State is counted as Zoology counts it for Fig. 2 (bottom): a mixer with a fixed recurrent state
holds that state (``model/accounting.py``: recurrent memory only, MAD's accounting); one without
(attention, long convolutions) must keep its history, ``2 d L`` floats per layer for a mixer with
keys and values (:data:`KV_CACHE`, or ``uses_positions``), ``d L`` for one that convolves its inputs.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from mixerzoo.registry import ConfigError, is_import_path, short_repr

#: how a row names a mapping given without ``name``
CUSTOM = "custom"
#: mixers without a fixed state that cache keys and values as attention does (beside every mixer
#: that declares ``uses_positions``): the attention of CAT and its variants, LaS, sparse attention
KV_CACHE = ("cat", "mh_cat", "landmark_cat", "lincat", "las_attention", "sparse_attention")


@dataclass(frozen=True)
class Candidate:
    """``label``: the row's name; ``model``: merged into each study's base model (``mixer`` and
    any other model fields given); ``given``: the spec as the user gave it (for the page)."""

    label: str
    model: dict[str, Any]
    given: Any

    def mixer_spec(self) -> Any:
        return self.model["mixer"]

    def modules(self) -> tuple[str, ...]:
        """The user modules its import path names (imported by spawned workers)."""
        spec = self.mixer_spec()
        name = spec.get("name") if isinstance(spec, dict) else spec
        return (name.split(":", 1)[0],) if isinstance(name, str) and is_import_path(name) else ()


def candidate(spec: Any, name: str | None = None) -> Candidate:
    """A :class:`Candidate` from a mixer name, an import path or a mapping: a model section
    (``{mixer: ..., d_model: ...}``) or a mixer spec (``{name: gla, num_heads: 4}``)."""
    from mixerzoo.mixers import SEQUENCE_MIXERS

    if isinstance(spec, str):
        SEQUENCE_MIXERS.get(spec)  # an unknown name or a bad import path: one ConfigError line
        label = spec.rsplit(":", 1)[-1] if is_import_path(spec) else spec
        return Candidate(name or label, {"mixer": spec}, spec)
    if not isinstance(spec, dict) or not spec:
        raise ConfigError(
            f"scorecard: expected a mixer name, an import path or a mapping (got {short_repr(spec)})"
        )
    model = copy.deepcopy(spec) if "mixer" in spec else {"mixer": copy.deepcopy(spec)}
    for layer in _layers(model["mixer"]):
        SEQUENCE_MIXERS.get(layer["name"] if isinstance(layer, dict) else layer)
    return Candidate(name or CUSTOM, model, spec)


def _layers(mixer: Any) -> list[Any]:
    layers = mixer if isinstance(mixer, list) else [mixer]
    for layer in layers:
        if not (isinstance(layer, str) or (isinstance(layer, dict) and isinstance(layer.get("name"), str))):
            raise ConfigError(f"scorecard: model.mixer {short_repr(layer)}: expected a name or {{name: ...}}")
    return layers


def mixer_fields(model: dict[str, Any]) -> set[str] | None:
    """The parameter names of the model's mixer (None for a hybrid: one per layer)."""
    from mixerzoo.mixers import SEQUENCE_MIXERS

    mixer = model.get("mixer")
    if isinstance(mixer, list):
        return None
    name = mixer.get("name") if isinstance(mixer, dict) else mixer
    return set(SEQUENCE_MIXERS.get(name).Params.model_fields)


def inference_state(model: dict[str, Any], seq_len: int) -> tuple[int, bool]:
    """(floats held per sequence after ``seq_len`` tokens, summed over layers; whether that is a
    fixed state, independent of the length)."""
    from mixerzoo.model.accounting import build_mixer, model_config, recurrent_state

    cfg = model_config(model)
    total, fixed = 0, True
    for spec in cfg.layer_mixers():
        mixer = build_mixer(spec, cfg.d_model)
        state = recurrent_state(mixer)
        if state is None:
            fixed = False
            kv = type(mixer).uses_positions or type(mixer).name in KV_CACHE
            state = (2 if kv else 1) * cfg.d_model * seq_len
        total += state
    return total, fixed
