"""Thm. 1 for N-gram keys (CAT Sec. 4; proof CAT-ws App. E.1): one CAT layer solves MQNAR.

Statement: with a causal filter ``F in R^N``, ``X_q = norm(X * F_q)`` (rows normalized to unit
l2 norm, same for ``X_k``), ``F_q = F``, ``W_k = W_q = sqrt(c) I`` and the *key delay* form
``F_k = D_1 * F_q``, ``F_v = D_0``, ``W_v = I``, "for almost all choices of F, there is a scalar
c_0 > 0 depending on F such that, setting c = c_0 log(4L/eps), CAT layer solves the NAR problem".
The proof (App. E.1) gives ``c >= Delta^-1 log(2 (L - 1) / eps_0)``, ``eps_0 = eps / 2``, with
``Delta = 1 - max a . b`` over distinct normalized N-gram signatures ``s(Z) = norm(sum_i F_i
z_(N-1-i))`` and ``eps`` the minimum l2 distance of two token embeddings. Every query of MQNAR
(CAT Def. 5) is an NAR instance: its N-gram occurs once before it, so the same layer solves MQNAR.

The layer is the real ``cat`` mixer (filters written as lag taps, ``conv_width = N + 1``) with the
theorem's ``norm(.)`` of the filtered queries and keys, which ``cat`` does not have:
:class:`NormedCAT` adds it and nothing else. The value-delay form (``F_v = D_-1``) reads the token
after a key, which a causal layer cannot do at the query's own position (docs/theory.md).

``Delta`` (a project choice): over all ``|V|^N`` N-grams it is out of reach at V = 8,192, so it is
computed where the proof's Eq. 3 uses it, between each query's signature and the other
signatures of its own sequence, minimised over the test set. That is at least the all-N-gram
``Delta``, so the ``c`` used is at most the theorem's: a pass is a pass at the theorem's ``c`` too
(a larger ``c`` only sharpens the softmax).

The sequence start (a finding, and a project choice): a causal filter reads zeros before the first
token, and ``norm`` removes scale, so the partial window ``(0, a)`` and the N-gram ``(a, a)`` have
the same signature ``a`` (the proof's uniqueness argument assumes N unit-norm tokens). A query
``(a, a)`` in a sequence that starts with ``a`` then ties with position 1, and no ``c`` separates
them. The paper states no padding; we put ``N - 1`` pad tokens (0, a vocabulary token that no MQNAR
key uses) before each sequence, so that every window read at a real token is an N-gram.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from pydantic import Field

from mixerzoo.analysis.outcome import Outcome
from mixerzoo.evaluation import evaluate_tokens
from mixerzoo.mixers.cat import CAT
from mixerzoo.params import Params
from mixerzoo.tasks import IGNORE, build_task
from mixerzoo.tasks.base import TaskData
from mixerzoo.theory.constructed import (
    build_one_layer,
    max_cosine,
    random_unit_embeddings,
    rms_scale,
    write_weights,
)

STATEMENT = (
    "Thm. 1 (key delay): with X_q = norm(X * F), X_k = norm(X * D_1 * F), F_v = D_0, "
    "W_k = W_q = sqrt(c) I, W_v = I and c >= Delta^-1 log(2(L-1)/eps_0), one CAT layer solves "
    "N-gram AR for almost all F; each MQNAR query is an NAR instance."
)

#: the import path by which a model config names :class:`NormedCAT`
NORMED_CAT = "mixerzoo.theory.thm1_ngram_recall:NormedCAT"


class NormedCAT(CAT):
    """``cat`` with Thm. 1's ``norm(X * F)``: each head's filtered query and key rows are scaled to
    l2 norm ``qk_scale`` (a zero row stays zero); values and everything else as ``cat``."""

    class Params(CAT.Params):
        qk_scale: float = Field(1.0, gt=0, description="l2 norm of each filtered query / key row")

    def convolve(self, x: torch.Tensor, which: str) -> torch.Tensor:
        y = super().convolve(x, which)
        if which == "v":
            return y
        b, l, _ = y.shape
        heads = y.reshape(b, l, self.p.num_heads, -1)
        return (F.normalize(heads, dim=-1) * self.p.qk_scale).reshape(b, l, self.d_model)


class Thm1NgramParams(Params):
    ns: list[int] = Field([1, 2, 3], min_length=1, description="N-gram lengths N")
    vocab_sizes: list[int] = Field([512, 8192], min_length=1, description="vocabulary sizes V")
    seq_lens: list[int] = Field([64, 256, 1024], min_length=1, description="sequence lengths L")
    d_model: int = Field(64, ge=2, description="embedding width d")
    key_vocab_size: int = Field(
        16, ge=1, description="MQNAR key alphabet (raised per cell to the least A with A^N >= k)"
    )
    c: float | None = Field(None, gt=0, description="inverse temperature (None: the proof's bound)")
    out_scale: float | None = Field(None, gt=0, description="W_o = s I (None: 2 (1+mu)/(1-mu) + 1)")
    filter_seed: int = Field(0, ge=0, description="seed of the random filter F (taps uniform in [0.5, 1.5))")
    n_test: int = Field(64, ge=1, description="test examples per cell (at most max_tokens / L)")
    max_tokens: int = Field(65536, ge=1, description="token budget per cell")
    seed: int = Field(0, ge=0, description="embedding and data seed")


def random_filter(n: int, seed: int) -> list[float]:
    """A generic causal filter ``F in R^N`` (lag taps uniform in [0.5, 1.5)): "almost all F"."""
    g = torch.Generator().manual_seed(seed + 7919 * n)
    return (0.5 + torch.rand(n, generator=g, dtype=torch.float64)).tolist()


def key_alphabet(p: Thm1NgramParams, n: int, seq_len: int) -> int:
    """The least alphabet ``A >= key_vocab_size`` with ``A^N >= k`` (k: MQNAR's default key count)."""
    k = max(1, (30 * seq_len) // (64 * (n + 1)))
    a = p.key_vocab_size
    while a**n < k:
        a += 1
    return a


def signatures(emb: torch.Tensor, inputs: np.ndarray, taps: list[float]) -> torch.Tensor:
    """(n, L) tokens -> (n, L, d) normalized signatures ``norm(sum_i F_i x_(t-i))`` (zero before the
    start; a zero row stays zero)."""
    x = emb[torch.from_numpy(inputs)]
    out = torch.zeros_like(x)
    for lag, f in enumerate(taps):
        out[:, lag:] += f * x[:, : x.shape[1] - lag]
    return F.normalize(out, dim=-1)


def window_ids(row: np.ndarray, n: int) -> np.ndarray:
    """(L,) tokens -> (L,) an id per position of the N-gram ending there (windows cut by the start
    padded with -1), equal ids for equal windows."""
    padded = np.concatenate([np.full(n - 1, -1, dtype=row.dtype), row])
    windows = np.lib.stride_tricks.sliding_window_view(padded, n)
    return np.unique(windows, axis=0, return_inverse=True)[1].reshape(-1)


def signature_delta(sig: torch.Tensor, inputs: np.ndarray, labels: np.ndarray, n: int) -> float:
    """``1 - max q_t . s_j`` over supervised queries t, the keys a query sees (``s_j``, j < t, and the
    zero key at position 0) that are not its own N-gram: the proof's Delta on these sequences."""
    worst = 0.0
    for i in range(inputs.shape[0]):
        ids = window_ids(inputs[i], n)
        for chunk in np.array_split(np.flatnonzero(labels[i] != IGNORE), max(1, len(labels[i]) // 512)):
            if len(chunk) == 0:
                continue
            cos = sig[i, chunk] @ sig[i].T  # (queries, L)
            t = torch.from_numpy(chunk)[:, None]
            j = torch.arange(sig.shape[1])[None, :]
            same = torch.from_numpy(ids[chunk][:, None] == ids[None, :])
            cos = cos.masked_fill((j >= t) | same, -2.0)
            worst = max(worst, float(cos.max()))
    return 1.0 - worst


def theorem_c(delta: float, mu: float, seq_len: int) -> float:
    """The bound of CAT-ws App. E.1 (key delay): ``c = Delta^-1 log(2 (L-1) / eps_0)``, ``eps_0 =
    eps / 2``, ``eps = sqrt(2 (1 - mu))`` the minimum l2 distance of unit embeddings."""
    eps0 = math.sqrt(2.0 * (1.0 - mu)) / 2.0
    return math.log(2.0 * max(seq_len - 1, 1) / eps0) / delta


PARAMS = Thm1NgramParams


def with_pad_prefix(data: TaskData, n: int) -> TaskData:
    """``data`` with ``N - 1`` pad tokens (0) before every sequence, so that every window the
    filters read at a real token is an N-gram of vocabulary tokens (a project choice: see the
    module's last paragraph)."""
    pad = np.zeros((data.inputs.shape[0], n - 1), dtype=data.inputs.dtype)
    inputs = np.concatenate([pad, data.inputs], axis=1)
    labels = np.concatenate([np.full_like(pad, IGNORE), data.labels], axis=1)
    return TaskData(inputs, labels)


def construct(p: Thm1NgramParams, n: int, vocab: int, data) -> tuple[torch.nn.Module, dict]:
    """The key-delay model for N-gram length ``n`` whose ``c`` is the proof's on ``data``:
    (model, {"c", "delta", "mu", "filter"})."""
    d = p.d_model
    emb = random_unit_embeddings(vocab, d, p.seed)
    mu = max_cosine(emb)
    taps = random_filter(n, p.filter_seed)
    delta = signature_delta(signatures(emb, data.inputs, taps), data.inputs, data.labels, n)
    c = p.c if p.c is not None else theorem_c(delta, mu, data.inputs.shape[1])
    # score = a^2 q.k / sqrt(d) = c q.k for unit rows (SDPA divides by sqrt(e), e = d with one head)
    a = math.sqrt(c * math.sqrt(d))
    mixer = {"name": NORMED_CAT, "conv_width": n + 1, "conv_on": "qkv", "qk_scale": a}
    model = build_one_layer(vocab, d, mixer)
    eye = torch.eye(d, dtype=torch.float64)
    s = p.out_scale if p.out_scale is not None else 2.0 * (1.0 + mu) / (1.0 - mu) + 1.0
    filters = {"q": [*taps, 0.0], "k": [0.0, *taps], "v": [1.0] + [0.0] * n}  # F, D_1 * F, D_0
    write_weights(model, emb, eye, eye, eye / rms_scale(model, 1.0), s, filters)
    return model, {"c": c, "delta": delta, "mu": mu, "filter": taps}


def score_cell(p: Thm1NgramParams, n: int, vocab: int, seq_len: int) -> dict:
    """Build the MQNAR test set of one (N, V, L), the construction, and its accuracy on every query."""
    alphabet = key_alphabet(p, n, seq_len)
    task = build_task("mqnar", vocab_size=vocab, seq_len=seq_len, n=n, key_vocab_size=alphabet)
    data = with_pad_prefix(task.make(max(1, min(p.n_test, p.max_tokens // seq_len)), p.seed, "test"), n)
    model, info = construct(p, n, vocab, data)
    m = evaluate_tokens(
        model,
        torch.from_numpy(data.inputs),
        torch.from_numpy(data.labels),
        batch_size=max(1, 16384 // seq_len),
    )
    return {
        "n": n,
        "vocab_size": vocab,
        "seq_len": seq_len,
        "accuracy_per_query": m["accuracy_per_query"],
        "accuracy_per_example": m["accuracy_per_example"],
        "n_supervised": m["n_supervised"],
        "c": info["c"],
        "signature_delta": info["delta"],
        "max_cosine": info["mu"],
        "key_vocab_size": alphabet,
        "filter": info["filter"],
    }


def run(p: Thm1NgramParams, log=print) -> Outcome:
    out = Outcome(axes=["n", "vocab_size", "seq_len"], metric="accuracy_per_query")
    for n in p.ns:
        for vocab in p.vocab_sizes:
            for seq_len in p.seq_lens:
                cell = score_cell(p, n, vocab, seq_len)
                out.cells.append(cell)
                keys = f"keys over {cell['key_vocab_size']} tokens"
                out.add_line(
                    f"mqnar N={n} V={vocab} L={seq_len} d={p.d_model} ({keys})",
                    f"accuracy 1 (c = {cell['c']:.1f}, signature Delta = {cell['signature_delta']:.3f})",
                    f"accuracy {cell['accuracy_per_query']:.4f} over {cell['n_supervised']} queries",
                    log,
                )
    return out
