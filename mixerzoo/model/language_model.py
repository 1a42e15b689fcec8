"""The backbone: token embedding -> [(sequence mixer, state mixer) blocks] x N -> norm -> head.

Shapes: ``input_ids`` (b, l) int64 -> ``features`` (b, l, d) -> ``logits`` (b, l, V).
Training computes the head only at supervised positions (see ``training/train.py``).

Other input and output kinds (``ModelConfig.input`` / ``head``), for tasks scored on real
values or one class per sequence:
  * ``input = continuous``: inputs (b, l, c) float -> a linear projection replaces the embedding;
  * ``head = regression``: ``regression_head`` maps features to (b, l, k) reals;
  * ``head = classification``: features are pooled over the real tokens (``mask``; mean,
    last, or a CLS token) and ``classifier`` maps them to (b, num_classes) logits.

Block options of LaS Table 9 (the LRA recipes of the S4 repository it trains with):
  * ``norm_position``: ``pre`` (default) ``x + f(norm(x))`` then a final norm; ``post``
    ``norm(x + f(x))`` and no final norm (the S4 repository's ``prenorm: false``).
  * ``norm = batchnorm``: per channel, statistics over the batch's real tokens (``mask``) in
    training, running averages in eval. It mixes examples and positions (a position's output
    depends on later tokens through the batch mean), so it is allowed with the
    classification head only, which reads one pooled vector per sequence.
  * ``pooling = cls``: a learned vector is inserted right after each sequence's last real token
    (or appended when there is no mask); the sequence grows by one (learned positions and
    mixers get room for ``max_len + 1``) and the classifier reads that position's output. In a
    causal model only this last position has read the whole sequence (LaS App. B
    assumes such an extra token "similar to classification token" at the end).
  * ``dropout``: on every residual branch (LaS App. A sets it to 0 in all experiments).
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


class BatchNorm(nn.Module):
    """Batch normalization of each channel over the real tokens of the batch (Ioffe & Szegedy 2015).

    x (..., d), mask (...) bool or None -> (..., d). Training: mean and biased variance over
    the positions where ``mask`` is true (all positions without a mask), so padding neither
    shifts the statistics nor counts in them; the running averages (momentum 0.1, unbiased
    variance) are what eval mode uses, as ``nn.BatchNorm1d``. Padded positions are normalized
    with the same statistics (their outputs are never pooled).
    """

    def __init__(self, d: int, eps: float = 1e-5, momentum: float = 0.1) -> None:
        super().__init__()
        self.eps, self.momentum = eps, momentum
        self.weight = nn.Parameter(torch.ones(d))
        self.bias = nn.Parameter(torch.zeros(d))
        self.register_buffer("running_mean", torch.zeros(d))
        self.register_buffer("running_var", torch.ones(d))

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        rows = None
        if self.training:
            rows = x.reshape(-1, x.shape[-1]) if mask is None else x[mask]
        if rows is not None and rows.shape[0] > 0:  # no real token in the batch: the running statistics
            n = rows.shape[0]
            mean = rows.mean(dim=0)
            var = rows.var(dim=0, unbiased=False)
            with torch.no_grad():
                m = self.momentum
                self.running_mean.mul_(1 - m).add_(m * mean.to(self.running_mean.dtype))
                unbiased = var * (n / max(n - 1, 1))
                self.running_var.mul_(1 - m).add_(m * unbiased.to(self.running_var.dtype))
        else:
            mean, var = self.running_mean.to(x.dtype), self.running_var.to(x.dtype)
        return (x - mean) * torch.rsqrt(var + self.eps) * self.weight + self.bias


def make_norm(kind: str, d: int, bias: bool = True) -> nn.Module:
    """A norm of width d; ``bias`` is the LayerNorm's additive bias (RMSNorm has none)."""
    if kind == "batchnorm":
        return BatchNorm(d)
    return nn.LayerNorm(d, bias=bias) if kind == "layernorm" else RMSNorm(d)


def apply_norm(norm: nn.Module, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """``norm(x)``; a :class:`BatchNorm` also gets the mask of real tokens (its statistics' rows)."""
    return norm(x, mask) if isinstance(norm, BatchNorm) else norm(x)


class Block(nn.Module):
    """One residual block: sequence mixer, then state mixer, each with a norm (pre or post).

    pre (default): ``x + mixer(norm1(x))`` then ``x + state_mixer(norm2(x))``;
    post: ``norm1(x + mixer(x))`` then ``norm2(x + state_mixer(x))``.
    """

    def __init__(
        self, cfg: ModelConfig, mixer: MixerSpec, state: MixerSpec | None, max_len: int | None = None
    ) -> None:
        super().__init__()
        d = cfg.d_model
        self.post_norm = cfg.norm_position == "post"
        self.norm1 = make_norm(cfg.norm, d, cfg.norm_bias)
        self.mixer = SEQUENCE_MIXERS.get(mixer.name)(d, max_len or cfg.max_len, **mixer.params)
        self.state_mixer = None
        if state is not None:
            self.norm2 = make_norm(cfg.norm, d, cfg.norm_bias)
            self.state_mixer = STATE_MIXERS.get(state.name)(d, **state.params)
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x, input_ids=None, rope=None, rows=None, mask=None):
        """x (b, l, d) -> (b, l, d); with ``rows`` (b, l) bool -> (n_rows, d), the rows only.

        Only the selected rows' outputs are computed past the sequence mixer (which still reads
        every position): the state mixer runs on n_rows instead of b*l positions. ``mask``
        (b, l) bool: the real tokens, for batch normalization's statistics.
        """
        h = x if self.post_norm else apply_norm(self.norm1, x, mask)
        if rows is None:
            x = x + self.drop(self.mixer(h, input_ids=input_ids, rope=rope))
        else:
            x = x[rows] + self.drop(self.mixer.forward_rows(h, rows, input_ids=input_ids, rope=rope))
            mask = None if mask is None else mask[rows]
        if self.post_norm:
            x = apply_norm(self.norm1, x, mask)
        if self.state_mixer is not None:
            if self.post_norm:
                x = apply_norm(self.norm2, x + self.drop(self.state_mixer(x)), mask)
            else:
                x = x + self.drop(self.state_mixer(apply_norm(self.norm2, x, mask)))
        return x


class LanguageModel(nn.Module):
    """Token ids (b, l) -> logits (b, l, V)."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.config = cfg
        d = cfg.d_model
        self.position = cfg.resolved_position()
        # a CLS token makes every sequence one longer: positions and mixers get room for it
        self.use_cls = cfg.head == "classification" and cfg.pooling == "cls"
        self.max_len = cfg.max_len + (1 if self.use_cls else 0)
        # token input: embedding; continuous input: a linear projection of the c channels
        self.embed = nn.Embedding(cfg.vocab_size, d) if cfg.input == "tokens" else None
        self.input_proj = nn.Linear(cfg.input_dim, d) if cfg.input == "continuous" else None
        self.pos_embed = nn.Embedding(self.max_len, d) if self.position == "learned" else None
        self.rope = make_rotary(cfg) if self.position == "rope" else None
        self.blocks = nn.ModuleList(
            Block(cfg, m, s, self.max_len) for m, s in zip(cfg.layer_mixers(), cfg.layer_state_mixers())
        )
        if cfg.ngram_heads:  # ICLL Sec. 6: NGH_m bundles sit between the backbone's blocks
            self.blocks = insert_ngram_bundles(self.blocks, cfg.ngram_heads, d, self.max_len)
        # post-norm blocks end in a norm already (the S4 repository has no final norm then)
        self.norm_f = make_norm(cfg.norm, d, cfg.norm_bias) if cfg.norm_position == "pre" else nn.Identity()
        self.cls_token = nn.Parameter(torch.empty(d)) if self.use_cls else None
        self.lm_head = nn.Linear(d, cfg.vocab_size, bias=False) if cfg.head == "lm" else None
        self.regression_head = nn.Linear(d, cfg.output_dim) if cfg.head == "regression" else None
        self.classifier = nn.Linear(d, cfg.num_classes) if cfg.head == "classification" else None
        self._needs_ids = any(b.mixer.needs_input_ids for b in self.blocks)
        if self._needs_ids and self.embed is None:
            names = sorted({b.mixer.name for b in self.blocks if b.mixer.needs_input_ids})
            raise ConfigError(
                f"mixer(s) {', '.join(names)} read token ids and cannot take input = continuous"
            )
        if self._needs_ids and self.use_cls:
            names = sorted({b.mixer.name for b in self.blocks if b.mixer.needs_input_ids})
            raise ConfigError(
                f"model.pooling = cls: mixer(s) {', '.join(names)} read token ids and the CLS token has "
                "none; allowed poolings for them: mean, last"
            )
        self.apply(_init_weights)  # GPT-2 init, except what a mixer marked as its own (_no_reinit)
        if self.cls_token is not None:
            nn.init.normal_(self.cls_token, std=0.02)
        if cfg.tie_embeddings and self.lm_head is not None and self.embed is not None:
            self.lm_head.weight = self.embed.weight

    def features(
        self,
        input_ids: torch.Tensor,
        rows: torch.Tensor | None = None,
        rope: Rotary | None = None,
        mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """input_ids (b, l) -> final-normed hidden states (b, l, d).

        With ``input = continuous`` the argument is the real-valued input (b, l, c) instead.
        With ``rows`` (b, l) bool, returns only those positions, (n_rows, d) in row-major order,
        equal to ``features(input_ids)[rows]``: the last block computes its outputs (and the
        final norm runs) only there, as only supervised positions reach the loss.
        ``rope`` replaces the model's rotary embedding for this call (test-time scaling, see
        :meth:`rope_for_length`); the model itself is not changed. ``mask`` (b, l) bool marks
        the real tokens (batch normalization's statistics); no CLS token is inserted here.
        """
        x = self._embed(input_ids)
        ids = input_ids if self._needs_ids else None
        return self._backbone(x, ids, rows=rows, rope=rope, mask=mask)

    def _embed(self, input_ids: torch.Tensor) -> torch.Tensor:
        """Token ids (b, l) or real inputs (b, l, c) -> (b, l, d), before positions."""
        return self.embed(input_ids) if self.embed is not None else self.input_proj(input_ids)

    def _backbone(self, x, ids, rows=None, rope=None, mask=None) -> torch.Tensor:
        """Embedded inputs (b, l, d) -> positions added, blocks, final norm -> (b, l, d) or (n_rows, d)."""
        if rope is not None and self.rope is None:
            raise ValueError("rope given, but this model has no rotary positions (position != rope)")
        rope = self.rope if rope is None else rope
        l = x.shape[1]
        if self.pos_embed is not None:
            if l > self.max_len:
                raise ConfigError(
                    f"sequence length {l - (self.max_len - self.config.max_len)} exceeds model max_len = "
                    f"{self.config.max_len} (learned positions); raise model.max_len"
                )
            x = x + self.pos_embed(torch.arange(l, device=x.device))
        blocks = list(self.blocks)
        last = blocks.pop() if rows is not None and isinstance(blocks[-1], Block) else None
        for block in blocks:
            if isinstance(block, Block):
                x = block(x, input_ids=ids, rope=rope, mask=mask)
            else:
                x = block(x, input_ids=ids, rope=rope)
        if last is not None:
            x = last(x, input_ids=ids, rope=rope, rows=rows, mask=mask)
        elif rows is not None:
            x = x[rows]
        if rows is not None and mask is not None:
            mask = mask[rows]
        return apply_norm(self.norm_f, x, mask)

    def insert_cls(
        self, x: torch.Tensor, mask: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """x (b, l, d), mask (b, l) -> x (b, l+1, d) with the CLS vector after each last real token.

        Returns the new inputs, the new mask (real tokens plus the CLS position) and ``at`` (b,),
        the CLS positions. Tokens after the last real one (padding) move one place right.
        """
        b, l, _ = x.shape
        pos = torch.arange(l + 1, device=x.device)
        if mask is None:
            at = torch.full((b,), l, dtype=torch.long, device=x.device)
            mask = torch.ones(b, l, dtype=torch.bool, device=x.device)
        else:
            at = torch.where(mask, pos[:l], -1).amax(dim=1) + 1  # after the last real token (0 if none)
        src = (pos.unsqueeze(0) - (pos.unsqueeze(0) > at.unsqueeze(1)).long()).clamp(max=l - 1)  # (b, l+1)
        is_cls = pos.unsqueeze(0) == at.unsqueeze(1)
        moved = torch.gather(x, 1, src.unsqueeze(-1).expand(b, l + 1, x.shape[-1]))
        x = torch.where(is_cls.unsqueeze(-1), self.cls_token.to(x.dtype), moved)
        mask = torch.gather(mask, 1, src) | is_cls
        return x, mask, at

    def rope_for_length(self, length: int, train_len: int, scaling: str) -> Rotary | None:
        """The rotary embedding to evaluate at ``length`` after training at ``train_len``.

        ``scaling`` "pi" (position interpolation) or "yarn" with scale ``length / train_len``
        (CAT-ws App. D.2) when the model uses RoPE and ``length > train_len``; None (keep the
        trained one) otherwise or for ``scaling = "none"``. Pass the result as ``features(rope=...)``.
        """
        if scaling == "none" or self.rope is None or length <= train_len:
            return None
        return make_rotary(self.config, scale=length / train_len, scaling=scaling, original_len=train_len)

    def pool(self, h: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """h (b, l, d), mask (b, l) bool of real tokens (None: all) -> (b, d), by ``config.pooling``.

        ``cls`` is pooled in :meth:`forward` (the CLS position is known there).
        """
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

        ``mask`` (b, l) bool is used by the classification head only (the real tokens to pool
        over, and batch normalization's statistics).
        """
        if self.use_cls:
            x, mask, at = self.insert_cls(self._embed(input_ids), mask)
            h = self._backbone(x, None, mask=mask)
            return self.classifier(h[torch.arange(h.shape[0], device=h.device), at])
        h = self.features(input_ids, mask=mask if self.classifier is not None else None)
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
