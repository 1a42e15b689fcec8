"""Thm. 3 (CAT Sec. 4; Thm. 4, first case, proof in CAT-ws App. E.4): CAT solves unique selective copying.

Statement: a 1-layer CAT with exponential-decay query convolution ``F_{q,i} = rho^i`` and
``d = |S| + 3`` dimensional embeddings outputs all signal tokens in order, for every input whose
signal tokens are distinct.

The construction of the proof (long filter ``W = infinity``, no positional encoding):
  * embeddings ``x = [x', s]``: signal tokens and ``⊥`` get orthonormal base vectors x' and
    indicator s = 1; all noise tokens share one base direction (``D_noisy = 1``) and s = 0. That
    is |S| + 1 + 1 + 1 = |S| + 3 dimensions. (We give noise tokens base norm sqrt(2) so that every
    token has the same norm and RMSNorm is one common scale; noise only scores lower for it.)
  * query filter ``rho = 2^(-1/T)`` over the whole context T (so ``rho^T = 1/2``), keys and
    values unfiltered, attention ``W = diag(-alpha I, beta)`` (Eq. 82 without the PE entry):
    the score of key x_i is ``-alpha <z*^s, x'_i> + beta s s_i`` (Eq. 84). With beta >> alpha the
    winner is a signal token; among them the smallest coefficient in z* wins, i.e. the leftmost
    signal token not yet copied (Eq. 83: copied tokens carry an extra, larger coefficient).
  * the scores are scaled by ``lam`` so that softmax saturates: the smallest coefficient gap is
    ``rho^T (1 - rho)`` (App. E.4: ``rho^i - rho^(i+1) >= c/T``), and ``lam`` times it is 40.

Written into the real ``cat`` mixer (``conv_on = "q"``, ``conv_width = T``) and scored on the
project's ``selective_copy`` task with ``unique = True`` (teacher-forced outputs after ``⊥``).
"""

from __future__ import annotations

import math
from typing import Literal

import torch
from pydantic import Field

from mixerzoo.analysis.outcome import Outcome
from mixerzoo.evaluation import evaluate_tokens
from mixerzoo.params import Params
from mixerzoo.tasks import build_task
from mixerzoo.theory.constructed import build_one_layer, delay, rms_scale, write_weights

STATEMENT = (
    "Thm. 3: a 1-layer CAT with query filter F_q,i = rho^i and d = |S| + 3 outputs all signal "
    "tokens in order whenever they are distinct (unique selective copying)."
)


class Thm3Params(Params):
    seq_lens: list[int] = Field([64, 256], min_length=1, description="sequence lengths (one model for all)")
    num_tokens_to_copy: int = Field(16, ge=1, description="signal tokens per example (CAT-ws App. D.3: 16)")
    num_signal_tokens: int | None = Field(None, ge=1, description="|S| (None: num_tokens_to_copy)")
    num_noise_tokens: int = Field(1, ge=1, description="|N|")
    query_filter: Literal["exponential", "identity"] = Field(
        "exponential", description="F_q: rho^i (the theorem) or D_0 (a broken construction)"
    )
    alpha: float = Field(1.0, gt=0, description="weight of the base-embedding term (Eq. 82)")
    beta: float = Field(8.0, gt=0, description="weight of the signal indicator (Eq. 82)")
    saturation: float = Field(40.0, gt=0, description="lam times the smallest score gap")
    out_scale: float = Field(4.0, gt=1, description="W_o = s I (s > 1 decodes the copied token)")
    n_test: int = Field(200, ge=1, description="test examples per length")
    seed: int = Field(0, ge=0, description="data seed")


def selective_copy_embeddings(n_signal: int, n_noise: int) -> torch.Tensor:
    """(V, |S| + 3) float64 rows in the task's token order: noise, signal, ⊥ (App. E.4)."""
    d = n_signal + 3
    vocab = n_noise + n_signal + 1
    emb = torch.zeros(vocab, d, dtype=torch.float64)
    emb[:n_noise, n_signal + 1] = math.sqrt(2.0)  # shared noise direction, norm sqrt(2)
    emb[n_noise : n_noise + n_signal, :n_signal] = torch.eye(n_signal, dtype=torch.float64)
    emb[n_noise + n_signal, n_signal] = 1.0  # ⊥
    emb[n_noise:, d - 1] = 1.0  # signal indicator s_i (signal tokens and ⊥)
    return emb


def construct(p: Thm3Params, context: int):
    """The Thm. 3 model for inputs of length <= ``context``: (model, {"rho", "lam", "vocab"})."""
    n_signal = p.num_signal_tokens or p.num_tokens_to_copy
    emb = selective_copy_embeddings(n_signal, p.num_noise_tokens)
    vocab, d = emb.shape
    rho = 2.0 ** (-1.0 / context)
    lam = p.saturation / (rho**context * (1.0 - rho))
    model = build_one_layer(vocab, d, {"name": "cat", "conv_on": "q", "conv_width": context}, torch.float64)
    r = rms_scale(model, math.sqrt(2.0))
    w = torch.diag(torch.tensor([-p.alpha] * (d - 1) + [p.beta], dtype=torch.float64))
    eye = torch.eye(d, dtype=torch.float64)
    # score = r^2 (W_q z*) . x / sqrt(d) = lam x^T W z*
    w_q = lam * math.sqrt(d) / r**2 * w
    if p.query_filter == "exponential":
        taps = [rho**i for i in range(context)]
    else:
        taps = delay(0, context)
    write_weights(model, emb, w_q, eye, eye / r, p.out_scale, {"q": taps})
    return model, {"rho": rho, "lam": lam, "vocab": vocab, "d": d}


PARAMS = Thm3Params


def run(p: Thm3Params, log=print) -> Outcome:
    out = Outcome(axes=["seq_len"], metric="accuracy_per_query")
    model, info = construct(p, max(p.seq_lens))
    for seq_len in p.seq_lens:
        task = build_task(
            "selective_copy",
            vocab_size=info["vocab"],
            seq_len=seq_len,
            num_tokens_to_copy=p.num_tokens_to_copy,
            num_noise_tokens=p.num_noise_tokens,
            unique=True,
        )
        data = task.make(p.n_test, p.seed, "test")
        m = evaluate_tokens(
            model, torch.from_numpy(data.inputs), torch.from_numpy(data.labels), batch_size=64
        )
        out.cells.append(
            {
                "seq_len": seq_len,
                "accuracy_per_query": m["accuracy_per_query"],
                "accuracy_per_example": m["accuracy_per_example"],
                "n_supervised": m["n_supervised"],
                "d_model": info["d"],
            }
        )
        out.add_line(
            f"unique selective copy L={seq_len} K={p.num_tokens_to_copy} "
            f"|S|={info['vocab'] - 1 - p.num_noise_tokens} d={info['d']}",
            f"every token copied in order (F_q = {p.query_filter}, rho = {info['rho']:.5f})",
            f"accuracy per token {m['accuracy_per_query']:.4f}, per example {m['accuracy_per_example']:.4f}",
            log,
        )
    return out
