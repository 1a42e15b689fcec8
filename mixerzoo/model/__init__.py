"""Model backbone and the public ``build_model`` entry point."""

from __future__ import annotations

from typing import Any

from mixerzoo.model.config import MixerSpec, ModelConfig
from mixerzoo.model.language_model import LanguageModel
from mixerzoo.params import validate


def build_model(config: ModelConfig | dict[str, Any]) -> LanguageModel:
    """Build a model from a :class:`ModelConfig` or a plain dict (validated; bad input -> ConfigError)."""
    return LanguageModel(validate(ModelConfig, config, where="model"))


def count_parameters(model) -> int:
    return sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())


__all__ = ["LanguageModel", "MixerSpec", "ModelConfig", "build_model", "count_parameters"]
