"""Model backbone and the public ``build_model`` entry point."""

from __future__ import annotations

from typing import Any

from mixerzoo.model.config import MixerSpec, ModelConfig
from mixerzoo.model.language_model import LanguageModel
from mixerzoo.params import validate


def build_model(config: ModelConfig | dict[str, Any]) -> LanguageModel:
    """Build a model from a :class:`ModelConfig` or a plain dict (validated; bad input -> ConfigError)."""
    cfg = validate(ModelConfig, config, where="model")
    if cfg.backbone == "compression":
        from mixerzoo.model.compression import CompressionModel

        return CompressionModel(cfg, decoder=cfg.compression_decoder)
    return LanguageModel(cfg)


def count_parameters(model) -> int:
    return sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())


__all__ = ["LanguageModel", "MixerSpec", "ModelConfig", "build_model", "count_parameters"]
