"""Prop. 1's Landmark-CAT construction (CAT Sec. 5; proof CAT-ws App. F.1), on the real mixer.

Prop. 1 sets ``W_v = 2 I``, ``F_v = D_-1``, ``W_k = W_q = sqrt(c) I`` with c -> infinity and the
uniform key filter ``F_{k,i} = 1, i < B``: hard attention picks the block whose landmark (block
mean) correlates most with the query, local attention over the query's block and that block
puts half its mass on the earlier copy of the query and half on the query itself, and ``F_v =
D_-1`` turns these into the value after the copy and zero (the query's own "next" token does not
exist yet), so ``2 * (v / 2) = v`` (CAT-ws App. E.1, value delay). The alternative "key delay" form
(``key_delay = 1``, ``F_v = D_0``, ``W_v = I``) is the Cor. 1 variant of the same layer.

Here the weights are written into the ``landmark_cat`` mixer (options ``value_filter = "next"``
or ``key_delay = 1``) of a model from ``build_model`` and scored on the project's ``ar`` task
(or ``mqar_cat``, where every key occurs exactly once, so the answer is only reachable through
the retrieved block).
With orthonormal embeddings (d >= V) the landmark scores are exact counts, so retrieval cannot
fail and the accuracy must be 1; with random embeddings (d < V) success needs d above Prop. 1's
threshold ``2 sigma^2 B log(L/B)`` (measured by :mod:`mixerzoo.theory.props_monte_carlo`).
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
    orthonormal_embeddings,
    random_unit_embeddings,
    rms_scale,
    write_weights,
)

STATEMENT = (
    "Prop. 1: Landmark CAT with W_v = 2I, F_v = D_-1, W_k = W_q = sqrt(c) I (c -> inf) and the "
    "uniform key filter of length B solves AR once the correct block is retrieved."
)


class Prop1Params(Params):
    task: Literal["ar", "mqar_cat"] = Field("ar", description="task (mqar_cat: every key occurs once)")
    seq_lens: list[int] = Field([128, 1024], min_length=1, description="sequence lengths of the ar task")
    block_size: int = Field(16, ge=1, description="block size B")
    d_model: int = Field(64, ge=2, description="embedding width d")
    vocab_size: int = Field(40, ge=6, description="ar vocabulary (orthonormal embeddings when <= d)")
    variant: Literal["value_delay", "key_delay", "broken"] = Field(
        "value_delay",
        description="value_delay (Prop. 1), key_delay (Cor. 1 form) or broken (F_v = D_0 with W_v = 2I)",
    )
    key_filter: Literal["uniform", "exponential"] = Field(
        "uniform", description="landmark filter: uniform (Prop. 1) or exponential (Prop. 2)"
    )
    c: float = Field(30.0, gt=0, description="inverse temperature of the local attention")
    out_scale: float = Field(4.0, gt=1, description="W_o = s I")
    n_test: int = Field(200, ge=1, description="test examples per length")
    seed: int = Field(0, ge=0, description="embedding and data seed")


def construct(p: Prop1Params, max_len: int):
    d, vocab = p.d_model, p.vocab_size
    if vocab <= d:
        emb = orthonormal_embeddings(vocab, d, p.seed)
    else:
        emb = random_unit_embeddings(vocab, d, p.seed)
    mixer = {
        "name": "landmark_cat",
        "block_size": p.block_size,
        "key_filter": p.key_filter,
        "value_filter": "next" if p.variant == "value_delay" else "identity",
        "key_delay": 1 if p.variant == "key_delay" else 0,
    }
    model = build_one_layer(vocab, d, mixer)
    r = rms_scale(model, 1.0)
    eye = torch.eye(d, dtype=torch.float64)
    a = math.sqrt(p.c * math.sqrt(d)) / r  # local score = c x.x' after RMSNorm and 1/sqrt(e)
    w_v = (1.0 if p.variant == "key_delay" else 2.0) * eye / r
    write_weights(model, emb, a * eye, a * eye, w_v, p.out_scale)
    return model


PARAMS = Prop1Params


def run(p: Prop1Params, log=print) -> Outcome:
    out = Outcome(axes=["seq_len"], metric="accuracy_per_query")
    model = construct(p, max(p.seq_lens))
    for seq_len in p.seq_lens:
        task = build_task(p.task, vocab_size=p.vocab_size, seq_len=seq_len)
        data = task.make(p.n_test, p.seed, "test")
        m = evaluate_tokens(
            model, torch.from_numpy(data.inputs), torch.from_numpy(data.labels), batch_size=32
        )
        out.cells.append(
            {
                "seq_len": seq_len,
                "accuracy_per_query": m["accuracy_per_query"],
                "n_supervised": m["n_supervised"],
            }
        )
        n_blocks = math.ceil(seq_len / p.block_size)
        out.add_line(
            f"{p.task} L={seq_len} B={p.block_size} blocks={n_blocks} d={p.d_model} V={p.vocab_size} "
            f"{p.variant}",
            "accuracy 1" if p.variant != "broken" else "failure (the value filter is wrong)",
            f"accuracy {m['accuracy_per_query']:.4f} over {m['n_supervised']} queries",
            log,
        )
    return out
