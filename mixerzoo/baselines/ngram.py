"""In-context n-gram language model with backoff (ICLL, App. C.1, Alg. 1, Eq. 93-94).

At every position the prefix ``x[:t+1]`` is the corpus: split at separators, each string padded
on the left, n-grams of every order ``1..n`` counted, and the next symbol predicted from the
current string's last ``n - 1`` symbols with backoff to lower orders::

    P_m(w | h) = c(h w) / c(h)                        if c(h w) > 0          (Alg. 1 line 11)
               = alpha(h) P_{m-1}(w | h')             otherwise              (line 14)
    beta(h)  = 1 - sum_{w: c(h w) > 0} c(h w) / c(h)                         (Eq. 93)
    alpha(h) = beta(h) / sum_{w: c(h w) = 0} P_{m-1}(w | h')                 (Eq. 94)

with ``h'`` the context ``h`` less its first symbol. Two forms, chosen by ``form``:

``authors`` (the default) gives exactly what the authors' script gives (``ngram.py`` in
berlino/seq_icl, ``predict_with_n_gram_back_off`` with its defaults, which their evaluation calls
with ``N = 3`` for the figures): each string of the prefix is padded with ``n - 1`` padding
characters and *every* substring of length ``1..n`` is counted, padding included. So
``c(h)`` counts ``h`` wherever it occurs (also at the end of a string, where nothing follows it,
and inside the padding), the unigram ``P_1(w) = c(w) / (symbols + (n - 1) * strings)`` spends
mass on the padding character, ``w`` ranges over the symbols seen in the prefix (an unseen
symbol gets 0), and the rows are *not* renormalized: a row can sum to less than 1, and the
authors' L1 distances use it as it is. A context whose symbols were never followed backs off
entirely, ``P_m = P_{m-1} / sum P_{m-1}`` over the seen symbols. (Their script fails at
``n = 1``; here ``n = 1`` is the plain unigram without padding.)

``renormalized`` (App. C.1 read literally, every row a distribution): the separator plays the
end token ``w`` of App. C.1, ``c(h)`` sums the counts of the symbols and the end token after
``h`` (``c*`` with ``add_k`` added to every count; 0, no smoothing, is the paper's choice);
order 1 is the prefix's symbol frequencies without padding (uniform before any symbol is seen);
a context never seen backs off entirely (``P_m = P_{m-1}``); when every symbol the lower order
allows has been seen the seen estimates are renormalized. Every row sums to 1.

Counting is shared with LNW and the probes (:mod:`mixerzoo.baselines.counts`), vectorised over
positions. Output: zero probability for padding and separator (the true distributions give the
separator none, see :mod:`mixerzoo.tasks.regbench`).
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import torch
from pydantic import Field, model_validator

from mixerzoo.baselines import BASELINES, Baseline
from mixerzoo.baselines.counts import context_occurrences, ngram_counts
from mixerzoo.tasks.base import TaskData
from mixerzoo.tasks.regbench import PAD


def regbench_layout(data: TaskData) -> tuple[int, int]:
    """``(num_symbols, separator)``: token layout pad 0, symbols 1..A, separator A + 1."""
    if "transitions" in data.extras:
        a = int(data.extras["transitions"].shape[2])
    else:
        a = int(data.inputs.max()) - 1
    return a, a + 1


def backoff(counts: list[torch.Tensor], num_symbols: int, add_k: float = 0.0) -> torch.Tensor:
    """float64 ``[..., num_symbols]`` rows of the ``renormalized`` form from counts of orders 1..n.

    counts[m - 1]: ``[..., v]`` order-``m`` counts over the token layout (pad 0, symbols
    ``1..A``, end token ``A + 1``).
    """
    a = num_symbols
    uni = counts[0][..., 1 : a + 1].double() + add_k
    total = uni.sum(-1, keepdim=True)
    p = torch.where(total > 0, uni / total.clamp_min(1e-300), torch.full_like(uni, 1.0 / a))
    for c in counts[1:]:
        c = c[..., 1 : a + 2].double()  # symbols and the end token
        seen = c[..., :a] > 0
        smoothed = c + add_k
        denom = smoothed.sum(-1, keepdim=True).clamp_min(1e-300)
        ml = torch.where(seen, smoothed[..., :a] / denom, torch.zeros_like(p))
        beta = (1.0 - ml.sum(-1, keepdim=True)).clamp_min(0.0)  # Eq. 93
        unseen = torch.where(seen, torch.zeros_like(p), p).sum(-1, keepdim=True)
        spread = ml + torch.where(seen, torch.zeros_like(p), p) * (beta / unseen.clamp_min(1e-300))  # Eq. 94
        renorm = ml / ml.sum(-1, keepdim=True).clamp_min(1e-300)
        new = torch.where(unseen > 1e-12, spread, renorm)
        p = torch.where(c.sum(-1, keepdim=True) > 0, new, p)
    return p


def authors_backoff(x: np.ndarray, n: int, num_symbols: int, chunk: int = 16) -> torch.Tensor:
    """float64 ``[b, l, num_symbols]`` rows of the ``authors`` form for the instances ``x`` ``[b, l]``."""
    a, sep = num_symbols, num_symbols + 1
    xt = torch.from_numpy(np.asarray(x, dtype=np.int64))
    is_sep = xt == sep
    strings = 1.0 + is_sep.double().cumsum(-1)[..., None]  # strings in the prefix (the last may be empty)
    symbols = ((xt >= 1) & (xt <= a)).double().cumsum(-1)[..., None]
    uni = ngram_counts(x, 1, a + 2, sep, True, chunk)[..., 1 : a + 1].double()
    in_vocab = uni > 0
    p = uni / (symbols + (n - 1) * strings).clamp_min(1.0)
    for m in range(2, n + 1):
        c = ngram_counts(x, m, a + 2, sep, True, chunk)[..., 1 : a + 1].double()
        # c(h): h ending at a symbol of the prefix, or (h all padding, after a separator) in the
        # padding of every string, n - m + 1 times each
        c_h = context_occurrences(x, m, sep, chunk).double()[..., None]
        c_h = c_h + (n - m + 1) * strings * is_sep[..., None]
        seen = c > 0
        ml = c / c_h.clamp_min(1.0)
        beta = 1.0 - ml.sum(-1, keepdim=True)  # Eq. 93 (> 0: h also ends the current string)
        lower = torch.where(in_vocab & ~seen, p, torch.zeros_like(p))
        mass = lower.sum(-1, keepdim=True)
        alpha = torch.where(mass > 0, beta / mass.clamp_min(1e-300), torch.zeros_like(mass))  # Eq. 94
        p = torch.where(seen, ml, lower * alpha)
    return p


@BASELINES.register("ngram")
class NGram(Baseline):
    """In-context n-gram with backoff over orders 1..n (ICLL App. C.1; default: the authors' script)."""

    class Params(Baseline.Params):
        n: int = Field(3, ge=1, le=8, description="n-gram order (the paper uses 1..4)")
        form: Literal["authors", "renormalized"] = Field(
            "authors",
            description="authors: as berlino/seq_icl ngram.py (padding counted, rows not renormalized); "
            "renormalized: every row a distribution (App. C.1 read literally)",
        )
        add_k: float = Field(
            0.0, ge=0.0, description="add-k smoothing of the counts, renormalized form only (0: none)"
        )
        chunk: int = Field(16, ge=1, description="instances per counting batch (memory ~ chunk * l^2)")

        @model_validator(mode="after")
        def _smoothing_needs_renormalized(self):
            if self.add_k > 0 and self.form == "authors":
                raise ValueError("add_k > 0 needs form=renormalized (the authors' form has no smoothing)")
            return self

    @property
    def rows_sum_to_one(self) -> bool:
        """False for the authors' form: its rows may sum to less than 1."""
        return self.p.form == "renormalized"

    def distributions(self, data: TaskData) -> np.ndarray:
        a, sep = regbench_layout(data)
        n, l = data.inputs.shape
        out = np.zeros((n, l, a + 2), dtype=np.float32)
        out[:, :, 1 : a + 1] = 1.0 / a  # padding rows; real rows are overwritten below
        lengths = (data.inputs != PAD).sum(axis=1)
        order = np.argsort(lengths, kind="stable")  # similar lengths together: trim the padding
        for s in range(0, n, self.p.chunk):
            rows = order[s : s + self.p.chunk]
            width = max(int(lengths[rows].max()), 1)
            out[rows, :width, 1 : a + 1] = self._rows(data.inputs[rows, :width], a).float().numpy()
            for i in rows:  # padding inside the chunk's width: uniform rows
                out[i, lengths[i] : width, 1 : a + 1] = 1.0 / a
        return out

    def _rows(self, x: np.ndarray, a: int) -> torch.Tensor:
        if self.p.form == "authors":
            return authors_backoff(x, self.p.n, a, self.p.chunk)
        counts = [ngram_counts(x, m, a + 2, a + 1, True, self.p.chunk) for m in range(1, self.p.n + 1)]
        return backoff(counts, a, self.p.add_k)


@BASELINES.register("true")
class TrueDistribution(Baseline):
    """The instance's own PFA (ICLL Sec. 3): the reference every Eq. 8-9 score is taken against."""

    def distributions(self, data: TaskData) -> np.ndarray:
        from mixerzoo.tasks.regbench import true_distributions

        out = true_distributions(data)
        a = out.shape[2] - 2
        empty = out.sum(-1) == 0  # padding rows: uniform over the symbols, so every row is a distribution
        out[empty, 1 : a + 1] = 1.0 / a
        return out
