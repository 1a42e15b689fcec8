"""In-context n-gram counts: how often each token followed the current context in the prefix.

Shared by the n-gram baseline (ICLL App. C.1), LNW's features (App. D, Eq. 95-96) and the probe
targets (App. E). Dimension names: ``n`` instances, ``l`` positions, ``v`` vocabulary.

For an instance ``x`` and order ``m``, the *context before position u* is the ``m - 1`` tokens
``x[u-m+1 : u]``. ``counts[t, w]`` counts the positions ``u <= t`` (targets inside the prefix
``x[:t+1]``) whose context equals the context before ``t + 1`` (the one the next token will
follow) and whose token is ``w``::

    counts[t, w] = #{u <= t : ctx(u) = ctx(t + 1), x[u] = w}

With ``string_padding`` (App. C.1, Alg. 1 line 4: the prefix is split at separators and each
string padded on the left), a context never reaches across a separator: the missing tokens are
a padding symbol, so the first symbol of every string follows the all-padding context, and the
separator is the *end-of-string* token that follows a string's last symbol. Without it the
prefix is one stream (App. D: "contexts matching the last 1 and 2 tokens of the input"), padded
only before the first token.
"""

from __future__ import annotations

import numpy as np
import torch


def context_keys(inputs: np.ndarray, order: int, separator: int, string_padding: bool = True) -> np.ndarray:
    """int64 ``[n, l + 1]``: an integer naming the context before each position ``u = 0..l``.

    Equal contexts give equal keys; padding symbols are 0 and token ``x`` is ``x + 1``
    (base ``max token + 2``), so a padded context never equals a real one.
    """
    x = np.asarray(inputs, dtype=np.int64)
    n, l = x.shape
    base = int(x.max(initial=separator)) + 2
    u = np.arange(l + 1)
    if string_padding:
        # run[u]: how many tokens before u belong to u's string (back to the last separator)
        sep_pos = np.where(x == separator, np.arange(l)[None, :], -1)
        last_sep = np.maximum.accumulate(sep_pos, axis=1)  # [n, l]: last separator at or before j
        last_before = np.concatenate([np.full((n, 1), -1), last_sep], axis=1)  # before u
        run = u[None, :] - 1 - last_before
    else:
        run = np.broadcast_to(u[None, :], (n, l + 1))
    keys = np.zeros((n, l + 1), dtype=np.int64)
    padded = np.concatenate([np.zeros((n, order), dtype=np.int64), x], axis=1)  # x[j] at j + order
    for k in range(1, order):
        tok = padded[:, order - k : order - k + l + 1]  # x[u - k] for u = 0..l
        keys += np.where(k <= run, tok + 1, 0) * base ** (k - 1)
    return keys


def ngram_counts(
    inputs: np.ndarray,
    order: int,
    vocab_size: int,
    separator: int,
    string_padding: bool = True,
    chunk: int = 16,
) -> torch.Tensor:
    """float32 ``[n, l, v]`` in-context counts of order ``order`` (see the module docstring).

    A causal match matrix ``M[t, u] = 1[ctx(t+1) = ctx(u)] 1[u <= t]`` times the one-hot
    tokens, ``chunk`` instances at a time (exact: counts stay far below 2**24).
    """
    x = np.asarray(inputs, dtype=np.int64)
    n, l = x.shape
    keys = torch.from_numpy(context_keys(x, order, separator, string_padding))
    xt = torch.from_numpy(x)
    causal = torch.ones(l, l, dtype=torch.bool).tril()
    out = torch.empty((n, l, vocab_size), dtype=torch.float32)
    for s in range(0, n, chunk):
        k = keys[s : s + chunk]
        match = (k[:, 1:, None] == k[:, None, :-1]) & causal
        onehot = torch.nn.functional.one_hot(xt[s : s + chunk], vocab_size).float()
        out[s : s + chunk] = torch.bmm(match.float(), onehot)
    return out


def context_occurrences(inputs: np.ndarray, order: int, separator: int, chunk: int = 16) -> torch.Tensor:
    """float32 ``[n, l]``: how often the current context ended at a symbol of the prefix.

    ``out[t] = #{j <= t : x[j] is a symbol, ctx(j + 1) = ctx(t + 1)}`` with string padding: the
    occurrences of the ``order - 1`` tokens before ``t + 1`` as a substring of the prefix's
    strings that ends at a symbol (the n-gram model's ``c(h)``, whether or not a symbol follows).
    """
    x = np.asarray(inputs, dtype=np.int64)
    n, l = x.shape
    keys = torch.from_numpy(context_keys(x, order, separator, True))
    symbol = torch.from_numpy((x > 0) & (x != separator)).float()
    causal = torch.ones(l, l, dtype=torch.bool).tril()
    out = torch.empty((n, l), dtype=torch.float32)
    for s in range(0, n, chunk):
        k = keys[s : s + chunk, 1:]
        match = (k[:, :, None] == k[:, None, :]) & causal
        out[s : s + chunk] = torch.bmm(match.float(), symbol[s : s + chunk, :, None])[..., 0]
    return out
