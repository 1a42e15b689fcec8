"""The backbone: token embedding -> [pre-norm (sequence mixer, state mixer)] x N -> norm -> head.

Shapes: ``input_ids`` (b, l) int64 -> ``features`` (b, l, d) -> ``logits`` (b, l, V).
Training computes the head only at supervised positions (see ``training/train.py``).

Other input and output kinds (``ModelConfig.input`` / ``head``), for tasks scored on real
values or one class per sequence:
  * ``input = continuous``: inputs (b, l, c) float -> a linear projection replaces the embedding;
  * ``head = regression``: ``regression_head`` maps features to (b, l, k) reals;
  * ``head = classification``: features are pooled over the real tokens (``mask``; mean or
    last) and ``classifier`` maps them to (b, num_classes) logits.
"""

from __future__ import annotations

import torch
from torch import nn

from mixerzoo.mixers import SEQUENCE_MIXERS, STATE_MIXERS
from mixerzoo.mixers.ngram_block import insert_ngram_bundles
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

    def forward(self, x, input_ids=None, rope=None, rows=None):
        """x (b, l, d) -> (b, l, d); with ``rows`` (b, l) bool -> (n_rows, d), the rows only.

        Only the selected rows' outputs are computed past the sequence mixer (which still reads
        every position): the state mixer runs on n_rows instead of b*l positions.
        """
        h = self.norm1(x)
        if rows is None:
            x = x + self.drop(self.mixer(h, input_ids=input_ids, rope=rope))
        else:
            x = x[rows] + self.drop(self.mixer.forward_rows(h, rows, input_ids=input_ids, rope=rope))
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
        # token input: embedding; continuous input: a linear projection of the c channels
        self.embed = nn.Embedding(cfg.vocab_size, d) if cfg.input == "tokens" else None
        self.input_proj = nn.Linear(cfg.input_dim, d) if cfg.input == "continuous" else None
        self.pos_embed = nn.Embedding(cfg.max_len, d) if self.position == "learned" else None
        self.rope = make_rotary(cfg) if self.position == "rope" else None
        self.blocks = nn.ModuleList(
            Block(cfg, m, s) for m, s in zip(cfg.layer_mixers(), cfg.layer_state_mixers())
        )
        if cfg.ngram_heads:  # paper 004 Sec. 6: NGH_m bundles sit between the backbone's blocks
            self.blocks = insert_ngram_bundles(self.blocks, cfg.ngram_heads, d, cfg.max_len)
        self.norm_f = make_norm(cfg.norm, d)
        self.lm_head = nn.Linear(d, cfg.vocab_size, bias=False) if cfg.head == "lm" else None
        self.regression_head = nn.Linear(d, cfg.output_dim) if cfg.head == "regression" else None
        self.classifier = nn.Linear(d, cfg.num_classes) if cfg.head == "classification" else None
        self._needs_ids = any(b.mixer.needs_input_ids for b in self.blocks)
        if self._needs_ids and self.embed is None:
            names = sorted({b.mixer.name for b in self.blocks if b.mixer.needs_input_ids})
            raise ConfigError(
                f"mixer(s) {', '.join(names)} read token ids and cannot take input = continuous"
            )
        self.apply(_init_weights)  # GPT-2 init, except what a mixer marked as its own (_no_reinit)
        if cfg.tie_embeddings and self.lm_head is not None and self.embed is not None:
            self.lm_head.weight = self.embed.weight

    def features(
        self, input_ids: torch.Tensor, rows: torch.Tensor | None = None, rope: Rotary | None = None
    ) -> torch.Tensor:
        """input_ids (b, l) -> final-normed hidden states (b, l, d).

        With ``input = continuous`` the argument is the real-valued input (b, l, c) instead.
        With ``rows`` (b, l) bool, returns only those positions, (n_rows, d) in row-major order,
        equal to ``features(input_ids)[rows]``: the last block computes its outputs (and the
        final norm runs) only there, as only supervised positions reach the loss.
        ``rope`` replaces the model's rotary embedding for this call (test-time scaling, see
        :meth:`rope_for_length`); the model itself is not changed.
        """
        if rope is not None and self.rope is None:
            raise ValueError("rope given, but this model has no rotary positions (position != rope)")
        rope = self.rope if rope is None else rope
        b, l = input_ids.shape[:2]
        x = self.embed(input_ids) if self.embed is not None else self.input_proj(input_ids)
        if self.pos_embed is not None:
            if l > self.config.max_len:
                raise ConfigError(
                    f"sequence length {l} exceeds model max_len = {self.config.max_len} "
                    "(learned positions); raise model.max_len"
                )
            x = x + self.pos_embed(torch.arange(l, device=input_ids.device))
        ids = input_ids if self._needs_ids else None
        blocks = list(self.blocks)
        last = blocks.pop() if rows is not None and isinstance(blocks[-1], Block) else None
        for block in blocks:
            x = block(x, input_ids=ids, rope=rope)
        if last is not None:
            x = last(x, input_ids=ids, rope=rope, rows=rows)
        elif rows is not None:
            x = x[rows]
        return self.norm_f(x)

    def rope_for_length(self, length: int, train_len: int, scaling: str) -> Rotary | None:
        """The rotary embedding to evaluate at ``length`` after training at ``train_len``.

        ``scaling`` "pi" (position interpolation) or "yarn" with scale ``length / train_len``
        (paper 001 App. D.2) when the model uses RoPE and ``length > train_len``; None (keep the
        trained one) otherwise or for ``scaling = "none"``. Pass the result as ``features(rope=...)``.
        """
        if scaling == "none" or self.rope is None or length <= train_len:
            return None
        return make_rotary(self.config, scale=length / train_len, scaling=scaling, original_len=train_len)

    def pool(self, h: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """h (b, l, d), mask (b, l) bool of real tokens (None: all) -> (b, d), by ``config.pooling``."""
        if self.config.pooling == "mean":
            if mask is None:
                return h.mean(dim=1)
            m = mask.to(h.dtype).unsqueeze(-1)
            return (h * m).sum(dim=1) / m.sum(dim=1).clamp_min(1.0)
        if mask is None:
            return h[:, -1]
        pos = torch.arange(h.shape[1], device=h.device)
        last = torch.where(mask, pos, -1).amax(dim=1).clamp_min(0)
        return h[torch.arange(h.shape[0], device=h.device), last]

    def forward(self, input_ids: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """lm: (b, l, V) logits; regression: (b, l, k) reals; classification: (b, num_classes) logits.

        ``mask`` (b, l) bool is used by the classification head only (the real tokens to pool).
        """
        h = self.features(input_ids)
        if self.lm_head is not None:
            return self.lm_head(h)
        if self.regression_head is not None:
            return self.regression_head(h)
        return self.classifier(self.pool(h, mask))


def make_rotary(cfg: ModelConfig, **overrides) -> Rotary:
    """The model's RoPE from its ``rope_*`` fields (``overrides``: ``scale``, ``scaling``,
    ``original_len`` for test-time scaling); an inconsistent combination is a ConfigError."""
    args = {
        "scale": cfg.rope_scale,
        "scaling": cfg.rope_scaling,
        "original_len": cfg.rope_original_len,
        "yarn_alpha": cfg.rope_yarn_alpha,
        "yarn_beta": cfg.rope_yarn_beta,
        **overrides,
    }
    try:
        return Rotary(cfg.rope_base, **args)
    except ValueError as err:
        raise ConfigError(f"model: {err}") from None


def _init_weights(module: nn.Module) -> None:
    """GPT-2 style: N(0, 0.02) for linear and embedding weights, zero biases.

    A mixer owns the initialisation of what it marks ``_no_reinit = True`` (a module or one
    parameter, as zoology does): e.g. Mamba's ``dt_proj``, whose bias sets the initial step
    sizes Delta in [dt_min, dt_max] (the Mamba reference init); the backbone leaves those alone.
    """
    if getattr(module, "_no_reinit", False):
        return
    if isinstance(module, nn.Linear):
        if not getattr(module.weight, "_no_reinit", False):
            nn.init.normal_(module.weight, std=0.02)
        if module.bias is not None and not getattr(module.bias, "_no_reinit", False):
            nn.init.zeros_(module.bias)
    elif isinstance(module, nn.Embedding):
        if not getattr(module.weight, "_no_reinit", False):
            nn.init.normal_(module.weight, std=0.02)
