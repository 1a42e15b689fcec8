"""The model configuration: a validated, declarative description of a backbone.

The minimal form ``{"vocab_size": V, "d_model": D, "n_layers": N, "mixer": NAME}`` works
for every registered sequence mixer; ``mixer`` may also be ``{"name": NAME, **params}`` or a
list with one entry per layer (hybrids). ``state_mixer`` takes the same forms, or ``None``.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field, model_validator

from mixerzoo.params import MAX_REPEATS, StrictModel, validate


class MixerSpec(StrictModel):
    """A registry name plus that entry's parameters, written flat: ``{"name": "cat", "conv_width": 3}``."""

    model_config = ConfigDict(frozen=True)

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


class NgramHeadsSpec(StrictModel):
    """One NGH_m^(orders) bundle (ICLL Sec. 6): ``ngram_block`` layers, one per order, in sequence.

    ``after_layer`` m counts backbone layers below the bundle (m < 0: -m layers above it, as
    NGH_{-2}); ``mlp`` false gives bare NGH layers (ICLL, Table 1) instead of NGH + MLP blocks.
    """

    model_config = ConfigDict(frozen=True)

    after_layer: int = Field(description="insert after this layer; negative counts from the output")
    orders: list[int] = Field(default_factory=lambda: [1, 2, 3], min_length=1, description="n of each head")
    mlp: bool = Field(True, description="each NGH layer followed by RMSNorm + MLP (App. F Fig. 8)")


class ModelConfig(StrictModel):
    """Backbone: embedding, optional positions, ``n_layers`` pre- or post-norm blocks, final norm, head."""

    vocab_size: int | None = Field(
        None, ge=2, description="token vocabulary size V (required for token input or the LM head)"
    )
    d_model: int = Field(64, ge=1, description="model width d")
    n_layers: int = Field(2, ge=1, le=MAX_REPEATS, description="number of blocks")
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
        "(Zoology App. E.2: positions for attention runs only)",
    )
    max_len: int = Field(2048, ge=1, description="longest sequence (learned positions, explicit filters)")
    rope_base: float = Field(10000.0, gt=0)
    rope_scale: float = Field(1.0, gt=0, description="RoPE context extension factor s (pi / yarn)")
    rope_scaling: Literal["none", "pi", "yarn"] = Field(
        "pi", description="RoPE length extrapolation: position interpolation or YaRN (CAT Sec. 6.2)"
    )
    rope_original_len: int | None = Field(None, ge=1, description="training context length (yarn)")
    rope_yarn_alpha: float = Field(1.0, ge=0, description="YaRN ramp lower bound")
    rope_yarn_beta: float = Field(32.0, gt=0, description="YaRN ramp upper bound")
    norm: Literal["layernorm", "rmsnorm", "batchnorm"] = Field(
        "layernorm",
        description="layernorm / rmsnorm per position; batchnorm per channel over the batch's real "
        "tokens (LaS Table 9 'BN'; classification head only: it mixes positions and examples)",
    )
    norm_bias: bool = Field(
        True, description="layernorm: an additive bias after the scale (nanoGPT's bias=False has none)"
    )
    norm_position: Literal["pre", "post"] = Field(
        "pre",
        description="pre: x + f(norm(x)) and a final norm; post: norm(x + f(x)), no final norm "
        "(LaS Table 9 'Pre-norm' True / False, as the S4 repository's residual blocks)",
    )
    tie_embeddings: bool = Field(True, description="LM head shares the token embedding (as zoology)")
    dropout: float = Field(0.0, ge=0.0, lt=1.0, description="dropout on the residual branches")
    ngram_heads: list[NgramHeadsSpec] = Field(
        default_factory=list, description="NGH_m^(1,2,3) n-gram head bundles inserted between layers"
    )
    input: Literal["tokens", "continuous"] = Field(
        "tokens", description="tokens: embedding of ids; continuous: linear projection of real-valued inputs"
    )
    input_dim: int | None = Field(None, ge=1, description="channels c of continuous inputs (b, l, c)")
    head: Literal["lm", "regression", "classification"] = Field(
        "lm",
        description="lm: next-token logits per position; regression: output_dim reals per position; "
        "classification: num_classes logits per sequence (pooled features)",
    )
    output_dim: int = Field(1, ge=1, description="real outputs per position (regression head)")
    num_classes: int | None = Field(None, ge=2, description="classes (classification head)")
    backbone: Literal["language_model", "compression"] = Field(
        "language_model",
        description="language_model: the backbone above; compression: MAD's encoder-decoder (the "
        "backbone encodes, its last position's features alone feed a decoder that reconstructs "
        "the input; mixerzoo/model/compression.py), for the mad_compression task",
    )
    compression_decoder: Literal["mlp", "backbone"] = Field(
        "mlp", description="compression: MAD's per-position MLP decoder, or a second backbone"
    )
    pooling: Literal["mean", "last", "cls"] = Field(
        "mean",
        description="classification: mean over real tokens, the last real token, or cls: a learned "
        "token inserted after the last real token, whose output (it reads the whole sequence in a "
        "causal model) is classified (LaS App. B: an extra 'classification token' at the end)",
    )

    @model_validator(mode="after")
    def _check_input_and_head(self) -> ModelConfig:
        if self.vocab_size is None and (self.input == "tokens" or self.head == "lm"):
            raise ValueError("vocab_size is required for input = tokens or head = lm")
        if self.input == "continuous" and self.input_dim is None:
            raise ValueError("input_dim is required for input = continuous")
        if self.head == "classification" and self.num_classes is None:
            raise ValueError("num_classes is required for head = classification")
        if self.norm == "batchnorm" and self.head != "classification":
            raise ValueError(
                f"norm = batchnorm needs head = classification (head = {self.head}): batch statistics "
                "mix positions, so a per-position output would see later inputs; allowed norms: "
                "layernorm, rmsnorm"
            )
        if not self.norm_bias and self.norm != "layernorm":
            raise ValueError(
                f"norm_bias = false applies to norm = layernorm only (norm = {self.norm}: rmsnorm has "
                "no bias, batchnorm keeps its own)"
            )
        if self.pooling == "cls" and self.head != "classification":
            raise ValueError(f"pooling = cls needs head = classification (head = {self.head})")
        return self

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
