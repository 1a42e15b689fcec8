"""The backbone: token embedding -> [pre-norm (sequence mixer, state mixer)] x N -> norm -> head.

Shapes: ``input_ids`` (b, l) int64 -> ``features`` (b, l, d) -> ``logits`` (b, l, V).
Training computes the head only at supervised positions (see ``training/train.py``).
"""

from __future__ import annotations

import torch
from torch import nn

from mixerzoo.mixers import SEQUENCE_MIXERS, STATE_MIXERS
from mixerzoo.model.config import MixerSpec, ModelConfig
from mixerzoo.ops.rotary import Rotary
from mixerzoo.registry import ConfigError


class RMSNorm(nn.Module):
    def __init__(self, d: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def make_norm(kind: str, d: int) -> nn.Module:
    return nn.LayerNorm(d) if kind == "layernorm" else RMSNorm(d)


class Block(nn.Module):
    """``x + mixer(norm(x))`` then ``x + state_mixer(norm(x))`` (pre-norm residual block)."""

    def __init__(self, cfg: ModelConfig, mixer: MixerSpec, state: MixerSpec | None) -> None:
        super().__init__()
        d = cfg.d_model
        self.norm1 = make_norm(cfg.norm, d)
        self.mixer = SEQUENCE_MIXERS.get(mixer.name)(d, cfg.max_len, **mixer.params)
        self.state_mixer = None
        if state is not None:
            self.norm2 = make_norm(cfg.norm, d)
            self.state_mixer = STATE_MIXERS.get(state.name)(d, **state.params)
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x, input_ids=None, rope=None):
        x = x + self.drop(self.mixer(self.norm1(x), input_ids=input_ids, rope=rope))
        if self.state_mixer is not None:
            x = x + self.drop(self.state_mixer(self.norm2(x)))
        return x


class LanguageModel(nn.Module):
    """Token ids (b, l) -> logits (b, l, V)."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.config = cfg
        d = cfg.d_model
        self.position = cfg.resolved_position()
        self.embed = nn.Embedding(cfg.vocab_size, d)
        self.pos_embed = nn.Embedding(cfg.max_len, d) if self.position == "learned" else None
        self.rope = Rotary(cfg.rope_base, cfg.rope_scale) if self.position == "rope" else None
        self.blocks = nn.ModuleList(
            Block(cfg, m, s) for m, s in zip(cfg.layer_mixers(), cfg.layer_state_mixers())
        )
        self.norm_f = make_norm(cfg.norm, d)
        self.lm_head = nn.Linear(d, cfg.vocab_size, bias=False)
        self._needs_ids = any(b.mixer.needs_input_ids for b in self.blocks)
        self.apply(_init_weights)
        if cfg.tie_embeddings:
            self.lm_head.weight = self.embed.weight

    def features(self, input_ids: torch.Tensor) -> torch.Tensor:
        """input_ids (b, l) -> final-normed hidden states (b, l, d)."""
        b, l = input_ids.shape
        x = self.embed(input_ids)
        if self.pos_embed is not None:
            if l > self.config.max_len:
                raise ConfigError(
                    f"sequence length {l} exceeds model max_len = {self.config.max_len} "
                    "(learned positions); raise model.max_len"
                )
            x = x + self.pos_embed(torch.arange(l, device=input_ids.device))
        ids = input_ids if self._needs_ids else None
        for block in self.blocks:
            x = block(x, input_ids=ids, rope=self.rope)
        return self.norm_f(x)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.lm_head(self.features(input_ids))


def _init_weights(module: nn.Module) -> None:
    """GPT-2 style: N(0, 0.02) for linear and embedding weights, zero biases."""
    if isinstance(module, nn.Linear):
        nn.init.normal_(module.weight, std=0.02)
        if module.bias is not None:
            nn.init.zeros_(module.bias)
    elif isinstance(module, nn.Embedding):
        nn.init.normal_(module.weight, std=0.02)
