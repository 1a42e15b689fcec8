"""MAD's encoder-decoder for the compression task (Poli et al. 2024, arXiv 2403.17844;
MAD-lab ``mad/model/auto_encoder.py``, ``AutoEncoder`` with ``global_pool="last"``).

Shapes: ``input_ids`` (b, l) -> encoder features (b, l, d) -> code (b, d), the feature at the
last position (the compression token, the only position a causal encoder has read the whole
string at) -> decoder input (b, l, d) = code + sine-cosine position embedding -> decoder
features (b, l, d) -> logits (b, l, V).

The encoder is the architecture under test, a :class:`LanguageModel` backbone (its own LM head
is not used). The decoder is MAD's by default: a fixed two-layer MLP applied to every position
independently (norm, linear, GELU, norm, linear, GELU), then a norm and the unembedding, so
everything the reconstruction needs has to pass through the code. ``decoder="backbone"`` uses a
second backbone of the same configuration on the continuous decoder inputs instead (a stronger
decoder than MAD's; it must not read token ids, so mixers that do are refused there).

The model offers :class:`LanguageModel`'s training interface, ``features(x, rows=...)`` and a
bias-free ``lm_head`` (MAD's unembedding has a bias; dropping it lets the fused loss of
``training/train.py`` and ``evaluation/evaluate.py`` run unchanged), plus ``forward`` -> logits.
"""

from __future__ import annotations

import math
from typing import Literal

import torch
from torch import nn

from mixerzoo.model.config import ModelConfig
from mixerzoo.model.language_model import LanguageModel, make_norm
from mixerzoo.params import validate


def sincos_positions(length: int, d: int) -> torch.Tensor:
    """(length, d): ``[sin(t w_i), cos(t w_i)]`` with ``w_i = 10000^(-i/(d/2 - 1))``, zero-padded
    to odd ``d`` (the fairseq / MAD layout ``posemb_sincos_1d``)."""
    half = d // 2
    w = torch.exp(-math.log(10000.0) * torch.arange(half, dtype=torch.float64) / max(half - 1, 1))
    angle = torch.arange(length, dtype=torch.float64)[:, None] * w[None, :]
    zeros = torch.zeros(length, d - 2 * half, dtype=torch.float64)
    return torch.cat([angle.sin(), angle.cos(), zeros], dim=1).float()


class CompressionModel(nn.Module):
    """Token ids (b, l) -> reconstruction logits (b, l, V) through the encoding at the last position."""

    def __init__(self, cfg: ModelConfig | dict, decoder: Literal["mlp", "backbone"] = "mlp") -> None:
        super().__init__()
        cfg = validate(ModelConfig, cfg, where="model")
        if decoder not in ("mlp", "backbone"):
            raise ValueError(f"decoder = {decoder!r}: allowed: mlp, backbone")
        self.config = cfg
        d, V = cfg.d_model, cfg.vocab_size
        self.encoder = LanguageModel(cfg)
        self.register_buffer("dec_pos", sincos_positions(cfg.max_len, d), persistent=False)
        if decoder == "mlp":
            self.decoder = nn.Sequential(
                make_norm(cfg.norm, d, cfg.norm_bias),
                nn.Linear(d, d),
                nn.GELU(),
                make_norm(cfg.norm, d, cfg.norm_bias),
                nn.Linear(d, d),
                nn.GELU(),
                make_norm(cfg.norm, d, cfg.norm_bias),  # the unembedding's norm
            )
            self.lm_head = nn.Linear(d, V, bias=False)
            for m in [*self.decoder, self.lm_head]:
                if isinstance(m, nn.Linear):  # MAD's AutoEncoder._init_weights: N(0, 0.02), zero bias
                    nn.init.normal_(m.weight, std=0.02)
                    if m.bias is not None:
                        nn.init.zeros_(m.bias)
        else:
            dec = {**cfg.model_dump(), "input": "continuous", "input_dim": d, "tie_embeddings": False}
            self.decoder = LanguageModel(validate(ModelConfig, dec, where="model.decoder"))
            self.lm_head = self.decoder.lm_head

    def encode(self, input_ids: torch.Tensor) -> torch.Tensor:
        """(b, l) -> (b, d): the encoder's (final-normed) feature at the last position."""
        return self.encoder.features(input_ids)[:, -1]

    def decode(self, code: torch.Tensor, length: int) -> torch.Tensor:
        """(b, d) -> (b, length, d) decoder features, every position from the code and its index."""
        x = code[:, None, :] + self.dec_pos[:length].to(code.dtype)
        if isinstance(self.decoder, LanguageModel):
            return self.decoder.features(x)
        return self.decoder(x)

    def features(
        self, input_ids: torch.Tensor, rows: torch.Tensor | None = None, rope: object | None = None
    ) -> torch.Tensor:
        """(b, l) -> (b, l, d), or with ``rows`` (b, l) bool the selected rows (n_rows, d), as
        :meth:`LanguageModel.features`. ``rope`` (test-time position scaling) does not apply."""
        if rope is not None:
            raise ValueError("rope scaling does not apply to the compression model")
        h = self.decode(self.encode(input_ids), input_ids.shape[1])
        return h if rows is None else h[rows]

    def forward(self, input_ids: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """(b, l) -> (b, l, V) logits; ``mask`` is accepted for the backbone's signature, unused."""
        return self.lm_head(self.features(input_ids))
