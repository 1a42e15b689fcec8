"""What a model holds: the recurrent state of its sequence mixers and its parameter count.

The accounting is the one under which the layer configs of MAD (Poli et al. 2024, *Mechanistic
Design and Scaling of Hybrid Architectures*; mad-lab's ``configs/layers/*.yml``) hold a total
state of 4096 floats at width 128:

* **state**: the recurrent memory only, summed over the sequence-mixer layers. Short-convolution
  and token-shift windows are left out, so Mamba holds ``(expand d) x d_state`` and a multi-head
  linear recurrence one ``e x e`` matrix per head (``e = d / heads``), where
  ``SequenceMixer.state_size()`` would count the window too. A mixer without a fixed state
  (attention's KV cache, Hyena's sequence-long filters) has None.
* **parameters**: the blocks and the final norm of the model built for real; the embeddings and
  the head are left out, and every expert of a mixture counts (total, not active).

The MAD protocol's iso-state / iso-parameter normalisation (``studies/mad/normalise.py``)
is built on these counts.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mixerzoo.model.config import MixerSpec, ModelConfig
from mixerzoo.params import validate


def _expanded_state(m) -> int:
    return m.inner * m.p.d_state  # (expand d) x d_state; the conv window is not recurrent memory


def _heads_state(m) -> int:
    e = m.d_model // m.p.num_heads
    return m.p.num_heads * e * e  # one e x e matrix per head; linear attention's normaliser left out


#: mixers whose recurrent memory differs from ``SequenceMixer.state_size()`` (a window counted there)
MEMORY_ONLY: dict[str, Callable[[Any], int]] = {
    "mamba": _expanded_state,
    "rwkv6": _heads_state,
    "linear_attention": _heads_state,
}


def recurrent_state(mixer) -> int | None:
    """A built sequence mixer's recurrent memory in floats per sequence (None: no fixed state)."""
    if type(mixer).name in MEMORY_ONLY:
        return MEMORY_ONLY[type(mixer).name](mixer)
    return mixer.state_size()


def model_config(model: dict[str, Any]) -> ModelConfig:
    """A model section validated; the vocabulary defaults to 16, as it sizes only the embeddings
    and the head, which the counts leave out."""
    return validate(ModelConfig, {**model, "vocab_size": model.get("vocab_size") or 16}, where="model")


def build_mixer(spec: MixerSpec, d_model: int):
    """The sequence mixer of ``spec`` at width ``d_model`` (a bad parameter: ConfigError)."""
    from mixerzoo.mixers import SEQUENCE_MIXERS

    return SEQUENCE_MIXERS.get(spec.name)(d_model, **spec.params)


def total_state(model: dict[str, Any]) -> int | None:
    """Recurrent state summed over a model section's layers; None when a layer has no fixed state
    (then the model is not a fixed-state model)."""
    cfg = model_config(model)
    sizes = [recurrent_state(build_mixer(spec, cfg.d_model)) for spec in cfg.layer_mixers()]
    return None if any(s is None for s in sizes) else sum(sizes)


def count_params(model: dict[str, Any]) -> int:
    """Parameters of a model section built for real, embeddings and head left out."""
    from mixerzoo.model.language_model import LanguageModel

    net = LanguageModel(model_config(model))
    return sum(p.numel() for p in net.blocks.parameters()) + sum(p.numel() for p in net.norm_f.parameters())


def state_mixer_params(spec: MixerSpec, d_model: int, **over: Any) -> int:
    """Parameters of one state mixer (channel mixer) of ``spec`` at width ``d_model``, with ``over``
    replacing some of its parameters."""
    from mixerzoo.mixers import STATE_MIXERS

    net = STATE_MIXERS.get(spec.name)(d_model, **{**spec.params, **over})
    return sum(p.numel() for p in net.parameters())


def state_knob(spec: MixerSpec, d_model: int) -> tuple[str, list[int]] | None:
    """The parameter that sets a fixed-state mixer's state, with its allowed values: ``d_state``
    (state per channel) or else ``num_heads`` (heads of e x e matrices, e = d / heads); None when
    the mixer has neither."""
    from mixerzoo.mixers import SEQUENCE_MIXERS

    fields = SEQUENCE_MIXERS.get(spec.name).Params.model_fields
    if "d_state" in fields:
        return "d_state", list(range(1, 4 * d_model + 1))
    if "num_heads" in fields:
        return "num_heads", [h for h in range(1, d_model + 1) if d_model % h == 0]
    return None
