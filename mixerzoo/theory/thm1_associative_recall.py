"""Thm. 1 / Cor. 1 (CAT Sec. 4; proof CAT-ws App. E.1): one CAT layer solves AR and MQAR.

Corollary 1: a CAT layer with the key filter ``F_k = D_1`` (the delay ``[0 1 0 ... 0]``) and
``F_q = F_v = D_0`` solves AR; Thm. 1 ("key delay") sets ``W_k = W_q = sqrt(c) I``, ``W_v = I``
and, with ``Delta = 1 - max_{a != b} a . b`` the minimum cosine distance of the unit-norm token
embeddings and ``eps`` their minimum l2 distance, needs (CAT-ws App. E.1, after Eq. 3)

    c >= Delta^-1 log(2 (L - 1) / eps_0),  eps_0 = eps / 2,

for nearest-neighbour decoding to return the value for every input of length <= L. Every
query position of MQAR is such an AR instance (its key occurs once before it), so the same
layer solves MQAR.

The construction is written into the real ``cat`` mixer (``conv_width = 3``, filters on q, k, v)
of a model from ``build_model`` (see :mod:`mixerzoo.theory.constructed`) and scored by the
project's ``evaluate_tokens`` on the ``mqar_cat`` (or ``ar``) task.
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
from mixerzoo.theory.constructed import (
    build_one_layer,
    delay,
    max_cosine,
    random_unit_embeddings,
    rms_scale,
    write_weights,
)

STATEMENT = (
    "Cor. 1: a CAT layer with key filter D_1 and F_q = F_v = D_0 solves AR (Thm. 1, key delay: "
    "W_k = W_q = sqrt(c) I, c >= Delta^-1 log(2(L-1)/eps_0)); each MQAR query is an AR instance."
)


class Thm1Params(Params):
    task: Literal["mqar_cat", "ar"] = Field("mqar_cat", description="task the construction is scored on")
    seq_lens: list[int] = Field([64, 1024, 65536], min_length=1, description="sequence lengths L")
    d_model: int = Field(64, ge=2, description="embedding width d")
    vocab_size: int | None = Field(
        None, ge=6, description="V (None: mqar_cat max(8192, L/4 + 4096) so that L/4 keys fit; ar 40)"
    )
    c: float | None = Field(None, gt=0, description="inverse temperature (None: the theorem's bound)")
    out_scale: float | None = Field(None, gt=0, description="W_o = s I (None: 2 (1+mu)/(1-mu) + 1)")
    key_filter: list[float] = Field(
        default_factory=lambda: delay(1, 3), min_length=3, max_length=3, description="F_k lag taps (D_1)"
    )
    n_test: int = Field(64, ge=1, description="test examples per length (at most max_tokens / L)")
    max_tokens: int = Field(131072, ge=1, description="token budget per length (memory at large L)")
    seed: int = Field(0, ge=0, description="embedding and data seed")


def task_vocab(p: Thm1Params, seq_len: int) -> int:
    if p.vocab_size is not None:
        return p.vocab_size
    return max(8192, seq_len // 4 + 4096) if p.task == "mqar_cat" else 40


def theorem_c(mu: float, seq_len: int) -> float:
    """The bound of CAT-ws App. E.1 (key delay): c = Delta^-1 log(2 (L-1) / eps_0)."""
    delta = 1.0 - mu
    eps0 = math.sqrt(2.0 * delta) / 2.0  # half the minimum l2 distance of unit vectors
    return math.log(2.0 * max(seq_len - 1, 1) / eps0) / delta


def construct(p: Thm1Params, seq_len: int):
    """The Cor. 1 model for length ``seq_len``: (model, {"c", "mu", "vocab"})."""
    vocab = task_vocab(p, seq_len)
    d = p.d_model
    emb = random_unit_embeddings(vocab, d, p.seed)
    mu = max_cosine(emb)
    c = p.c if p.c is not None else theorem_c(mu, seq_len)
    model = build_one_layer(vocab, d, {"name": "cat", "conv_width": 3, "conv_on": "qkv"})
    r = rms_scale(model, 1.0)
    eye = torch.eye(d, dtype=torch.float64)
    # score = (a r)^2 x.x' / sqrt(d) = c x.x'  (SDPA divides by sqrt(e), e = d with one head)
    a = math.sqrt(c * math.sqrt(d)) / r
    s = p.out_scale if p.out_scale is not None else 2.0 * (1.0 + mu) / (1.0 - mu) + 1.0
    filters = {"q": delay(0, 3), "k": list(p.key_filter), "v": delay(0, 3)}
    write_weights(model, emb, a * eye, a * eye, eye / r, s, filters)
    return model, {"c": c, "mu": mu, "vocab": vocab}


PARAMS = Thm1Params


def run(p: Thm1Params, log=print) -> Outcome:
    out = Outcome(axes=["seq_len"], metric="accuracy_per_query")
    for seq_len in p.seq_lens:
        model, info = construct(p, seq_len)
        task = build_task(p.task, vocab_size=info["vocab"], seq_len=seq_len)
        n = max(1, min(p.n_test, p.max_tokens // seq_len))
        data = task.make(n, p.seed, "test")
        m = evaluate_tokens(
            model,
            torch.from_numpy(data.inputs),
            torch.from_numpy(data.labels),
            batch_size=max(1, 16384 // seq_len),
        )
        cell = {
            "seq_len": seq_len,
            "accuracy_per_query": m["accuracy_per_query"],
            "accuracy_per_example": m["accuracy_per_example"],
            "n_supervised": m["n_supervised"],
            "c": info["c"],
            "max_cosine": info["mu"],
            "vocab_size": info["vocab"],
        }
        out.cells.append(cell)
        out.add_line(
            f"{p.task} L={seq_len} V={info['vocab']} d={p.d_model}",
            f"accuracy 1 (c = {info['c']:.1f}, Delta = {1 - info['mu']:.3f})",
            f"accuracy {m['accuracy_per_query']:.4f} over {m['n_supervised']} queries",
            log,
        )
    return out
