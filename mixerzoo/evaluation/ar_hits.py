"""AR hits: the tokens an LM can predict by recalling its context (Zoology Sec. 3, App. C.1).

Zoology stratifies validation tokens with a heuristic (Zoology Sec. 3): a token is an **AR hit**
when the bigram ending at it "previously appeared in context, but <= 1250x during training";
every other token ("did not previously appear in context or it appeared > 1,250 times during
training") is *other*. Frequent bigrams are left out because they "could have been memorized
during training" (App. C.1 step 1). Table 1 reports perplexity per slice, Fig. 1 plots it
against the bigram's training frequency, and App. D.1.2 / Fig. 3 the distance from an AR hit
to the bigram's prior occurrence. This module labels tokens, scores models per slice, and
computes App. C.1's share of a gap due to AR hits.

Glossary: w windows, l predicted positions per window (a window holds l + 1 tokens: inputs
``window[:, :-1]``, targets ``window[:, 1:]``), V vocabulary size, n the n-gram order (the
paper's bigram: n = 2; Sec. 3 phrases the heuristic for any n-gram).

Labels are aligned with the targets: the n-gram ending at target i is ``window[i+2-n : i+2]``.
It is *repeated* when the same n-gram ends at an earlier target j < i of the same window, so
the whole prior occurrence lies in the context the model reads when it predicts target i.
Example (characters, n = 2): window ``"xabyab"`` -> targets ``a b y a b`` with bigrams
``xa ab by ya ab``; only the last target (``b`` of the second ``ab``) is repeated, at distance
3 (targets 1 -> 4). With the training split's bigram counts it is an AR hit when ``ab``
occurred at most ``max_train_count`` times there.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from mixerzoo.evaluation.clustered import ratio_error
from mixerzoo.registry import ConfigError

#: Zoology Sec. 3 / App. C.1: bigrams seen more often in training may be memorized (10B Pile tokens)
PAPER_MAX_TRAIN_COUNT = 1250
_DENSE_CODES = 1 << 24  # n-gram spaces up to this size are counted with a dense bincount


# -- n-grams ------------------------------------------------------------------------------
def ngram_codes(tokens: np.ndarray, n: int, vocab_size: int) -> np.ndarray:
    """tokens (..., m) -> (..., m - n + 1) int64: one code per n-gram, indexed by its first token.

    ``code = sum_k tokens[k] * V^(n-1-k)``, unique per n-gram while ``V^n < 2^63``.
    """
    if n < 1:
        raise ConfigError(f"ngram = {n}: must be >= 1")
    if vocab_size**n >= 2**63:
        raise ConfigError(f"ngram = {n} with a vocabulary of {vocab_size:,}: V^n exceeds int64; lower ngram")
    t = np.asarray(tokens).astype(np.int64, copy=False)
    m = t.shape[-1]
    if m < n:
        return np.zeros((*t.shape[:-1], 0), dtype=np.int64)
    code = np.zeros((*t.shape[:-1], m - n + 1), dtype=np.int64)
    for k in range(n):
        code = code * vocab_size + t[..., k : m - n + 1 + k]
    return code


@dataclass
class NgramCounts:
    """How often each n-gram occurs in a token stream (the training split): sorted codes, counts."""

    n: int
    vocab_size: int
    codes: np.ndarray  # (k,) int64, sorted, unique
    counts: np.ndarray  # (k,) int64, >= 1
    total: int  # n-grams counted

    def lookup(self, codes: np.ndarray) -> np.ndarray:
        """codes (...) -> occurrences (...) int64 (0 for an n-gram never seen)."""
        codes = np.asarray(codes, dtype=np.int64)
        if self.codes.size == 0:
            return np.zeros(codes.shape, dtype=np.int64)
        idx = np.minimum(np.searchsorted(self.codes, codes), self.codes.size - 1)
        return np.where(self.codes[idx] == codes, self.counts[idx], 0)


def count_ngrams(tokens: np.ndarray, vocab_size: int, n: int = 2, chunk: int = 1 << 22) -> NgramCounts:
    """Occurrences of every n-gram of ``tokens`` (1-D; a memmap is read ``chunk`` tokens at a time)."""
    total = max(len(tokens) - n + 1, 0)
    dense = vocab_size**n <= _DENSE_CODES
    acc = np.zeros(vocab_size**n if dense else 0, dtype=np.int64)
    parts: list[tuple[np.ndarray, np.ndarray]] = []
    for start in range(0, total, chunk):
        codes = ngram_codes(np.asarray(tokens[start : start + chunk + n - 1]), n, vocab_size)
        if dense:
            acc += np.bincount(codes, minlength=acc.size)
        else:
            parts.append(np.unique(codes, return_counts=True))
    if dense:
        nz = np.flatnonzero(acc)
        return NgramCounts(n, vocab_size, nz.astype(np.int64), acc[nz], total)
    if not parts:
        return NgramCounts(n, vocab_size, np.zeros(0, np.int64), np.zeros(0, np.int64), 0)
    codes, inverse = np.unique(np.concatenate([p[0] for p in parts]), return_inverse=True)
    counts = np.bincount(inverse, weights=np.concatenate([p[1] for p in parts])).astype(np.int64)
    return NgramCounts(n, vocab_size, codes, counts, total)


# -- labels -------------------------------------------------------------------------------
@dataclass
class ARLabels:
    """Per-target labels of w windows of l targets (see the module docstring)."""

    repeated: np.ndarray  # (w, l) bool: the n-gram ending here ended earlier in the window
    distance: np.ndarray  # (w, l) int64: targets since its most recent prior occurrence; -1 if none
    train_count: np.ndarray  # (w, l) int64: its occurrences in training; -1 without counts / n-gram
    position: np.ndarray  # (w, l) int64: target index i (the model has read i + 1 tokens)
    n: int
    max_train_count: int | None  # None: no memorization filter (every repeated n-gram is a hit)

    @property
    def ar_hit(self) -> np.ndarray:
        """(w, l) bool: repeated in context and seen at most ``max_train_count`` times in training."""
        if self.max_train_count is None:
            return self.repeated
        return self.repeated & (self.train_count <= self.max_train_count)


def label_windows(
    windows: np.ndarray,
    vocab_size: int,
    counts: NgramCounts | None = None,
    max_train_count: int | None = PAPER_MAX_TRAIN_COUNT,
    n: int = 2,
) -> ARLabels:
    """Label every target of ``windows`` (w, l + 1): repeated n-gram, distance, training count.

    ``counts`` (from :func:`count_ngrams` on the training split) supplies the training
    frequencies; without it ``max_train_count`` must be None (AR hit = repeated in context).
    """
    windows = np.asarray(windows)
    if windows.ndim != 2 or windows.shape[1] < 2:
        raise ConfigError(f"windows of shape {windows.shape}: need (w, l + 1) with l >= 1")
    if counts is None and max_train_count is not None:
        raise ConfigError("max_train_count needs the training split's n-gram counts (counts=...)")
    if n < 2:
        raise ConfigError(f"ngram = {n}: an AR hit ends an n-gram of n >= 2 tokens (the paper's bigram: 2)")
    if counts is not None and counts.n != n:
        raise ConfigError(f"counts are of {counts.n}-grams, labels asked for ngram = {n}")
    w, l = windows.shape[0], windows.shape[1] - 1
    position = np.broadcast_to(np.arange(l, dtype=np.int64), (w, l)).copy()
    repeated = np.zeros((w, l), dtype=bool)
    distance = np.full((w, l), -1, dtype=np.int64)
    train_count = np.full((w, l), -1, dtype=np.int64)
    first = n - 2  # the first target with a whole n-gram ending at it
    codes = ngram_codes(windows, n, vocab_size)  # code k: the n-gram ending at target first + k
    m = codes.shape[1]  # targets first .. l - 1
    if m > 0:
        # sort by (window, code, target): each element's predecessor in that order, when it has
        # the same window and code, is the most recent prior occurrence of the same n-gram
        rows = np.repeat(np.arange(w), m)
        cols = np.tile(np.arange(m), w)
        flat = codes.reshape(-1)
        order = np.lexsort((cols, flat, rows))
        same = (flat[order][1:] == flat[order][:-1]) & (rows[order][1:] == rows[order][:-1])
        prev = np.full(w * m, -1, dtype=np.int64)
        prev[order[1:]] = np.where(same, cols[order][:-1], -1)
        prev = prev.reshape(w, m)
        repeated[:, first:] = prev >= 0
        distance[:, first:] = np.where(prev >= 0, np.arange(m) - prev, -1)
        if counts is not None:
            train_count[:, first:] = counts.lookup(codes)
    return ARLabels(repeated, distance, train_count, position, n, max_train_count)


# -- evaluation windows and per-token losses -----------------------------------------------
def contiguous_windows(tokens: np.ndarray, length: int, max_windows: int | None = None) -> np.ndarray:
    """Consecutive windows of ``length + 1`` tokens, stride ``length`` (each token predicted once).

    Returns (w, length + 1) int64, from the start of ``tokens``; at most ``max_windows``.
    """
    if length < 1:
        raise ConfigError(f"window length = {length}: must be >= 1")
    w = (len(tokens) - 1) // length
    if max_windows is not None:
        w = min(w, max_windows)
    if w < 1:
        raise ConfigError(f"{len(tokens):,} tokens do not fill one window of {length + 1}")
    idx = np.arange(w)[:, None] * length + np.arange(length + 1)
    return np.asarray(tokens[: w * length + 1])[idx].astype(np.int64)


@torch.no_grad()
def token_losses(
    model: torch.nn.Module,
    windows: np.ndarray,
    batch_size: int = 16,
    device: torch.device | str | None = None,
    rope=None,
) -> np.ndarray:
    """Next-token loss (nats) of an LM at every target of ``windows`` (w, l + 1) -> (w, l) float64.

    ``rope``: a test-time rotary embedding (``LanguageModel.rope_for_length``), else the model's.
    """
    device = torch.device(device) if device is not None else next(model.parameters()).device
    was_training = model.training
    model.eval()
    out = []
    data = torch.from_numpy(np.asarray(windows, dtype=np.int64))
    for start in range(0, data.shape[0], batch_size):
        chunk = data[start : start + batch_size].to(device)
        x, y = chunk[:, :-1], chunk[:, 1:]
        h = model.features(x, rope=rope)
        logits = model.lm_head(h).float()
        nll = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1), reduction="none")
        out.append(nll.reshape(y.shape).double().cpu().numpy())
    model.train(was_training)
    return np.concatenate(out, axis=0)


def window_error(window_losses: np.ndarray) -> float | None:
    """Standard error of a mean loss from its windows: their spread / sqrt(windows) (None for one).

    Windows of one split are taken as independent samples of the text; positions inside a
    window are not (they share its context), so the window, not the token, is the unit."""
    w = len(window_losses)
    return float(np.std(window_losses, ddof=1) / math.sqrt(w)) if w > 1 else None


def unigram_losses(train_tokens: np.ndarray, windows: np.ndarray, vocab_size: int, alpha: float = 1.0):
    """Loss (nats) of the training split's unigram distribution (add-``alpha`` smoothing) at every
    target of ``windows`` (w, l + 1) -> (w, l) float64: the reference a context-free model reaches."""
    counts = np.zeros(vocab_size, dtype=np.float64)
    for start in range(0, len(train_tokens), 1 << 22):
        counts += np.bincount(np.asarray(train_tokens[start : start + (1 << 22)]), minlength=vocab_size)
    logp = np.log(counts + alpha) - math.log(counts.sum() + alpha * vocab_size)
    return -logp[np.asarray(windows)[:, 1:]]


# -- slices ---------------------------------------------------------------------------------
def loss_metrics(loss: float | None, unit: str) -> dict[str, float | None]:
    """Nats per token -> ``bpc`` (char / byte corpora: bits per character or byte) or ``ppl``."""
    if loss is None:
        return {"bpc": None} if unit in ("char", "byte") else {"ppl": None}
    if unit in ("char", "byte"):
        return {"bpc": loss / math.log(2)}
    return {"ppl": math.exp(min(loss, 700.0))}


def log_buckets(max_value: int, base: int = 10) -> list[tuple[int, int]]:
    """[(0, 0), (1, base - 1), (base, base^2 - 1), ...] covering 0 .. max_value (inclusive bounds)."""
    out = [(0, 0)]
    lo = 1
    while lo <= max_value:
        out.append((lo, lo * base - 1))
        lo *= base
    return out


def _bucket_name(lo: int, hi: int) -> str:
    return str(lo) if lo == hi else f"{lo}-{hi}"


def slice_masks(labels: ARLabels) -> list[tuple[str, str, np.ndarray]]:
    """``(group, slice, mask (w, l))`` for every slice reported (empty bucket slices left out).

    Groups: ``all``; ``ar`` (AR hits / other tokens, Zoology Table 1); ``frequency`` (repeated and
    not-repeated n-grams by training count, log10 buckets, Zoology Fig. 1); ``distance`` (AR hits by
    distance to the prior occurrence, powers of 2, Zoology Fig. 3); ``position`` (AR hits and other
    tokens by target position, powers of 2).
    """
    hit = labels.ar_hit
    everything = np.ones_like(hit)
    out = [("all", "all tokens", everything), ("ar", "AR hits", hit), ("ar", "other tokens", ~hit)]
    counted = labels.train_count >= 0
    if counted.any():
        for lo, hi in log_buckets(int(labels.train_count.max())):
            in_bucket = counted & (labels.train_count >= lo) & (labels.train_count <= hi)
            for name, rep in (("repeated", labels.repeated), ("not repeated", ~labels.repeated)):
                mask = in_bucket & rep
                if mask.any():
                    out.append(("frequency", f"{name}, train count {_bucket_name(lo, hi)}", mask))
    max_distance = int(labels.distance.max()) if labels.distance.size else -1
    for lo, hi in log_buckets(max(max_distance, 0), base=2)[1:]:
        mask = hit & (labels.distance >= lo) & (labels.distance <= hi)
        if mask.any():
            out.append(("distance", f"AR hits, distance {_bucket_name(lo, hi)}", mask))
    for lo, hi in log_buckets(int(labels.position.max()), base=2):
        in_bucket = (labels.position >= lo) & (labels.position <= hi)
        for name, sel in (("AR hits", hit), ("other tokens", ~hit)):
            mask = in_bucket & sel
            if mask.any():
                out.append(("position", f"{name}, position {_bucket_name(lo, hi)}", mask))
    return out


def clustered_error(values: np.ndarray, mask: np.ndarray) -> float | None:
    """Standard error of the mean of ``values[mask]`` (both (w, l)) with the windows as the units.

    Tokens of one window share its context and are not independent; windows are. The mean over
    the masked tokens is a ratio ``sum_i S_i / sum_i n_i`` of per-window sums, and its error is the
    cluster-robust one (:func:`mixerzoo.evaluation.clustered.ratio_error`) over the windows that
    hold a masked token (None when fewer than two do)."""
    return ratio_error(np.where(mask, values, 0.0).sum(axis=1), mask.sum(axis=1))


def slice_table(
    losses: dict[str, np.ndarray], labels: ARLabels, unit: str, reference: str | None = None
) -> list[dict]:
    """Per-slice mean loss of each model: one row per slice of :func:`slice_masks`.

    ``losses``: model name -> (w, l) nats (from :func:`token_losses` / :func:`unigram_losses`).
    Row: ``{"group", "slice", "n_tokens", "fraction", "models": {name: {"loss", "bpc" | "ppl",
    "loss_se", "gap_se", "unigram_gap_se"}}}`` (a slice without tokens has None values), where
    ``loss_se`` is the loss's standard error (:func:`clustered_error`), ``gap_se`` that of the
    token-by-token difference to ``reference`` and ``unigram_gap_se`` to the model ``unigram``
    (paired on the same tokens; absent for the model itself or when there is no such model).
    """
    total = labels.repeated.size
    rows = []
    for group, name, mask in slice_masks(labels):
        k = int(mask.sum())
        models = {}
        for model, loss in losses.items():
            if loss.shape != mask.shape:
                raise ConfigError(f"losses of {model!r} have shape {loss.shape}, labels {mask.shape}")
            mean = float(loss[mask].mean()) if k else None
            models[model] = {"loss": mean, **loss_metrics(mean, unit), "loss_se": clustered_error(loss, mask)}
            for key, other in (("gap_se", reference), ("unigram_gap_se", "unigram")):
                if other in losses and other != model:
                    models[model][key] = clustered_error(loss - losses[other], mask)
        rows.append({"group": group, "slice": name, "n_tokens": k, "fraction": k / total, "models": models})
    return rows


def ar_gap_fraction(reference: np.ndarray, model: np.ndarray, ar_hit: np.ndarray) -> float | None:
    """Share of ``model``'s loss gap to ``reference`` (attention) due to AR hits (Zoology App. C.1).

    ``min((l_H^m - l_H^M) p_H / (l^m - l^M), 1)`` with l mean losses (nats; App. C.1 writes
    log-probabilities, whose signs cancel in the ratio), ``_H`` over AR hits and ``p_H`` their
    share of tokens; equal to Sec. 3's ``Delta log(phi_AR) |T_AR| / (Delta log(phi) |T|)``.
    "If m is better than attention (M) overall and M is better than m at AR, we ascribe 100% of
    the gap to AR." None when there is no AR hit, or no gap and none on AR hits.
    """
    if not ar_hit.any():
        return None
    gap = float(model.mean() - reference.mean())
    gap_hits = float(model[ar_hit].mean() - reference[ar_hit].mean())
    p_hits = float(ar_hit.mean())
    if gap <= 0:
        return 1.0 if gap_hits > 0 else None
    return min(gap_hits * p_hits / gap, 1.0)


# -- figure ---------------------------------------------------------------------------------
def plot_ar_slices(rows: list[dict], reference: str, model: str, path: Path, unit: str = "char") -> Path:
    """Zoology Figs. 1 / 3 for two models: loss by training frequency, and ``model - reference`` gap
    per slice (AR hits vs other tokens, by distance, by position). Writes ``path`` (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    key = "bpc" if unit in ("char", "byte") else "loss"
    label = "bits per character" if key == "bpc" else "loss (nats / token)"

    def value(row: dict, name: str) -> float | None:
        return row["models"][name][key]

    fig, axes = plt.subplots(1, 2, figsize=(13, 4.8))
    ax = axes[0]
    freq = [r for r in rows if r["group"] == "frequency"]
    buckets = sorted({r["slice"].split("train count ")[1] for r in freq}, key=lambda b: int(b.split("-")[0]))
    for rep, style in (("repeated", "-"), ("not repeated", "--")):
        sel = {r["slice"].split("train count ")[1]: r for r in freq if r["slice"].startswith(rep + ",")}
        xs = [i for i, b in enumerate(buckets) if b in sel]
        for name, color in ((reference, "C0"), (model, "C3")):
            ys = [value(sel[buckets[i]], name) for i in xs]
            ax.plot(xs, ys, style, marker="o", color=color, label=f"{name}, {rep} in context")
    ax.set_xticks(range(len(buckets)), buckets, rotation=30)
    ax.set_xlabel("n-gram occurrences in the training split")
    ax.set_ylabel(label)
    ax.set_title("loss by training frequency (Zoology Fig. 1)")
    ax.legend(fontsize=7)
    ax = axes[1]
    sel = [r for r in rows if r["group"] in ("ar", "distance", "position") and r["n_tokens"]]
    gaps = [(value(r, model) - value(r, reference)) if value(r, model) is not None else 0.0 for r in sel]
    colors = ["C3" if r["slice"].startswith("AR hits") else "C7" for r in sel]
    ax.barh(range(len(sel)), gaps, color=colors)
    ax.set_yticks(range(len(sel)), [f"{r['slice']} ({r['n_tokens']})" for r in sel], fontsize=6)
    ax.invert_yaxis()
    ax.axvline(0.0, color="k", lw=0.5)
    ax.set_xlabel(f"{model} - {reference} ({label})")
    ax.set_title("gap by slice (AR hits red; Zoology Table 1, Fig. 3 distances)")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


# -- everything at once -------------------------------------------------------------------
def evaluate_ar_slices(
    models: dict[str, torch.nn.Module],
    corpus,
    block_size: int,
    max_windows: int | None = 200,
    split: str = "val",
    n: int = 2,
    max_train_count: int | None = PAPER_MAX_TRAIN_COUNT,
    unigram: bool = True,
    batch_size: int = 16,
) -> dict:
    """Label ``corpus.splits[split]`` (windows of ``block_size + 1`` tokens) and score each model.

    ``models``: name -> LM (the first is the reference of the gaps, e.g. attention);
    ``unigram`` adds the training split's unigram distribution as the model ``"unigram"``.
    Returns ``{"split", "block_size", "windows", "tokens", "ngram", "max_train_count", "unit",
    "reference", "models", "slices" (:func:`slice_table`), "ar_gap_fraction" (each model vs the
    reference, :func:`ar_gap_fraction`)}``.
    """
    if split not in corpus.splits:
        raise ConfigError(f"split = {split!r}: corpus {corpus.name!r} has {', '.join(corpus.splits)}")
    if not models and not unigram:
        raise ConfigError("no model to evaluate")
    windows = contiguous_windows(corpus.splits[split], block_size, max_windows)
    counts = (
        count_ngrams(corpus.splits["train"], corpus.vocab_size, n) if max_train_count is not None else None
    )
    labels = label_windows(windows, corpus.vocab_size, counts, max_train_count, n)
    losses = {name: token_losses(model, windows, batch_size) for name, model in models.items()}
    if unigram:
        losses["unigram"] = unigram_losses(corpus.splits["train"], windows, corpus.vocab_size)
    reference = next(iter(losses))
    hits = labels.ar_hit
    fractions = {
        name: ar_gap_fraction(losses[reference], loss, hits)
        for name, loss in losses.items()
        if name != reference
    }
    return {
        "split": split,
        "block_size": block_size,
        "windows": int(windows.shape[0]),
        "tokens": int(labels.repeated.size),
        "ngram": n,
        "max_train_count": max_train_count,
        "unit": corpus.unit,
        "reference": reference,
        "models": list(losses),
        "slices": slice_table(losses, labels, corpus.unit, reference),
        "ar_gap_fraction": fractions,
    }
