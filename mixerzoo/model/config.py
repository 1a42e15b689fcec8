"""The model configuration: a validated, declarative description of a backbone.

The minimal form ``{"vocab_size": V, "d_model": D, "n_layers": N, "mixer": NAME}`` works
for every registered sequence mixer; ``mixer`` may also be ``{"name": NAME, **params}`` or a
list with one entry per layer (hybrids). ``state_mixer`` takes the same forms, or ``None``.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from mixerzoo.params import validate


class MixerSpec(BaseModel):
    """A registry name plus that entry's parameters, written flat: ``{"name": "cat", "conv_width": 3}``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    params: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _flat(cls, data: Any) -> Any:
        if isinstance(data, str):
            return {"name": data}
        if isinstance(data, dict) and "params" not in data:
            data = dict(data)
            name = data.pop("name", None)
            return {"name": name, "params": data}
        return data

    def flat(self) -> dict[str, Any]:
        return {"name": self.name, **self.params}


def _as_list(value: Any, n: int, what: str) -> list[Any]:
    if isinstance(value, list):
        if len(value) != n:
            raise ValueError(f"{what} lists {len(value)} entries but n_layers = {n}")
        return value
    return [value] * n


class ModelConfig(BaseModel):
    """Backbone: embedding, optional positions, ``n_layers`` pre-norm blocks, final norm, head."""

    model_config = ConfigDict(extra="forbid")

    vocab_size: int = Field(ge=2, description="token vocabulary size V")
    d_model: int = Field(64, ge=1, description="model width d")
    n_layers: int = Field(2, ge=1, description="number of blocks")
    mixer: MixerSpec | list[MixerSpec] = Field(
        default_factory=lambda: MixerSpec(name="attention"),
        description="sequence mixer for every layer, or one per layer",
    )
    state_mixer: MixerSpec | None | list[MixerSpec | None] = Field(
        default_factory=lambda: MixerSpec(name="mlp"),
        description="state mixer (mlp / glu / swiglu) for every layer, one per layer, or null",
    )
    position: Literal["auto", "none", "learned", "rope"] = Field(
        "auto",
        description="auto: learned positions when any layer is attention-like, else none "
        "(paper 002 App. E.2: positions for attention runs only)",
    )
    max_len: int = Field(2048, ge=1, description="longest sequence (learned positions, explicit filters)")
    rope_base: float = Field(10000.0, gt=0)
    rope_scale: float = Field(1.0, gt=0, description="RoPE position interpolation factor")
    norm: Literal["layernorm", "rmsnorm"] = "layernorm"
    tie_embeddings: bool = Field(True, description="LM head shares the token embedding (as zoology)")
    dropout: float = Field(0.0, ge=0.0, lt=1.0, description="dropout on the residual branches")

    @model_validator(mode="after")
    def _check_names(self) -> ModelConfig:
        from mixerzoo.mixers import SEQUENCE_MIXERS, STATE_MIXERS

        for spec in self.layer_mixers():
            cls = SEQUENCE_MIXERS.get(spec.name)
            validate(cls.Params, spec.params, where=f"mixer[{spec.name}]")
        for spec in self.layer_state_mixers():
            if spec is not None:
                validate(STATE_MIXERS.get(spec.name).Params, spec.params, where=f"state_mixer[{spec.name}]")
        return self

    def layer_mixers(self) -> list[MixerSpec]:
        return _as_list(self.mixer, self.n_layers, "mixer")

    def layer_state_mixers(self) -> list[MixerSpec | None]:
        return _as_list(self.state_mixer, self.n_layers, "state_mixer")

    def resolved_position(self) -> str:
        if self.position != "auto":
            return self.position
        from mixerzoo.mixers import SEQUENCE_MIXERS

        attn = any(SEQUENCE_MIXERS.get(s.name).uses_positions for s in self.layer_mixers())
        return "learned" if attn else "none"
