"""Writing a theorem's weights into a real one-layer model built by ``mixerzoo.build_model``.

The constructions of CAT (Thm. 1 / Cor. 1, Thm. 3, Prop. 1) are stated for a bare layer
``f(X) = (X_v W_v)^T S(X_k W_k W_q^T q)`` on unit-norm token embeddings, decoded by nearest
neighbour (CAT Sec. 4, first paragraph). Our model wraps the mixer in a backbone: embedding ->
RMSNorm -> mixer -> residual -> RMSNorm -> tied LM head, and attention scales scores by
1/sqrt(e). Each of these is undone exactly, not approximated:

  * embeddings of equal norm ``n``: RMSNorm multiplies every token by the same ``r =
    1/sqrt(n^2/d + eps)`` (``norm = rmsnorm``; no state mixer, no positions), so ``W_q, W_k``
    carry ``1/r`` and the 1/sqrt(e) of SDPA is folded into ``W_q``;
  * the residual adds the query token itself to the output: ``W_o = s I`` with ``s`` large
    enough that the retrieved value dominates, and the tied head then scores every token by
    ``e_j . (x_t + s y)``, i.e. nearest-neighbour decoding of ``y`` (the theorems' decoder).

Shapes: embeddings ``E`` (V, d); ``W`` matrices (d, d) in ``nn.Linear`` convention (y = W x).
"""

from __future__ import annotations

import math
from typing import Any

import torch

from mixerzoo.model import build_model


def random_unit_embeddings(vocab: int, d: int, seed: int) -> torch.Tensor:
    """(V, d) float64 rows drawn uniformly on the unit sphere (Gaussian, normalized)."""
    g = torch.Generator().manual_seed(seed)
    e = torch.randn(vocab, d, generator=g, dtype=torch.float64)
    return e / e.norm(dim=1, keepdim=True)


def orthonormal_embeddings(vocab: int, d: int, seed: int) -> torch.Tensor:
    """(V, d) float64 orthonormal rows (needs V <= d): a random rotation of the first V axes."""
    if vocab > d:
        raise ValueError(f"orthonormal embeddings need vocab_size <= d_model, got {vocab} > {d}")
    g = torch.Generator().manual_seed(seed)
    q, _ = torch.linalg.qr(torch.randn(d, d, generator=g, dtype=torch.float64))
    return q[:vocab].contiguous()


def max_cosine(emb: torch.Tensor, chunk: int = 1024) -> float:
    """``max_{a != b} a . b`` over the rows of a unit-norm embedding (chunked: O(chunk V) memory)."""
    best = -1.0
    n = emb.shape[0]
    for start in range(0, n, chunk):
        block = emb[start : start + chunk] @ emb.T
        rows = torch.arange(block.shape[0])
        block[rows, rows + start] = -2.0  # not a token with itself
        best = max(best, float(block.max()))
    return best


def build_one_layer(vocab: int, d: int, mixer: dict[str, Any], dtype=torch.float32):
    """A one-layer model around ``mixer``: RMSNorm, no positions, no state mixer, tied head."""
    model = build_model(
        {
            "vocab_size": vocab,
            "d_model": d,
            "n_layers": 1,
            "mixer": mixer,
            "state_mixer": None,
            "position": "none",
            "norm": "rmsnorm",
        }
    )
    return model.to(dtype).eval()


def rms_scale(model, norm: float) -> float:
    """The factor RMSNorm applies to a vector of Euclidean norm ``norm`` (block 0's ``norm1``)."""
    d = model.config.d_model
    return 1.0 / math.sqrt(norm**2 / d + model.blocks[0].norm1.eps)


@torch.no_grad()
def write_weights(
    model,
    emb: torch.Tensor,
    w_q: torch.Tensor,
    w_k: torch.Tensor,
    w_v: torch.Tensor,
    out_scale: float,
    filters: dict[str, list[float]] | None = None,
) -> None:
    """Set the embedding (tied head), ``qkv = [W_q; W_k; W_v]``, ``W_o = out_scale I``, zero biases,
    unit norm gains and the mixer's convolution taps (``filters[c]``: lag taps of embedding c)."""
    mixer = model.blocks[0].mixer
    dtype = model.embed.weight.dtype
    d = model.config.d_model
    model.embed.weight.copy_(emb.to(dtype))
    mixer.qkv.weight.copy_(torch.cat([w_q, w_k, w_v]).to(dtype))
    mixer.out.weight.copy_(out_scale * torch.eye(d, dtype=dtype))
    for lin in (mixer.qkv, mixer.out):
        if lin.bias is not None:
            lin.bias.zero_()
    for norm in (model.blocks[0].norm1, model.norm_f):
        norm.weight.fill_(1.0)
    for name, taps in (filters or {}).items():
        f = mixer.filters[name]
        f.zero_()
        f[..., : len(taps)] = torch.tensor(taps, dtype=dtype)


def delay(shift: int, width: int) -> list[float]:
    """The delay filter ``D_shift`` (CAT Cor. 1: ``D_1 = [0 1 0 ... 0]``) as ``width`` lag taps."""
    return [1.0 if i == shift else 0.0 for i in range(width)]
