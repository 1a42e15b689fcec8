"""How far back a repeated bigram's earlier occurrence lies: Zoology App. D, Figs. 3 and 5.

Zoology measures, in sequences of 2,048 tokens, "the distances between AR hits and its prior
bigram (key-value) occurrence" and finds they "follow a power law distribution where most AR hits
are within 100 token positions from the prior bigram occurrence, and a long tail of AR hits
requires long-range interactions" (App. D, Fig. 3 on the Pile, Fig. 5 per RedPajama source,
bigrams with NLTK stop words or punctuation excluded). The same distribution grounds the alpha
of MQAR's generator (Algorithm 1, step 5).

Here a source is split into words and punctuation marks (the Pile's BPE tokens and NLTK's list
are not available offline: a project stand-in), cut into windows of ``seq_len`` tokens; a
token is a hit when the bigram ending at it occurred earlier in its window, and its distance is
the positions back to the most recent such occurrence (``evaluation/ar_hits.label_windows``).
Bigrams holding a punctuation mark or one of the source's ``stop_words`` most frequent words are
left out (the stand-in for NLTK's stop words). The power law is fitted as a line through the log
of the hit rate (hits per target position at which the distance can occur, in log-spaced bins)
against the log of the distance, over the decay (:func:`power_law_fit`); the cell reports its
slope, its R^2, and the share of hits within 100 positions with a standard error that takes
windows as the independent units.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import Field

from mixerzoo.analysis.outcome import Outcome
from mixerzoo.evaluation.ar_hits import clustered_error, label_windows
from mixerzoo.params import Params
from mixerzoo.registry import ConfigError

STATEMENT = (
    "Zoology App. D, Figs. 3 and 5: the distances between AR hits (repeated bigrams) and the prior "
    "occurrence of their bigram follow a power law; most lie within 100 positions."
)
WORD = re.compile(r"[A-Za-z0-9]+(?:'[A-Za-z]+)?|[^\sA-Za-z0-9]")
NEAR = 100  # "most AR hits are within 100 token positions"


class RepeatParams(Params):
    sources: list[str] = Field(
        ["kjv"], min_length=1, description="'kjv' (bundled) or paths of UTF-8 text files, one cell each"
    )
    seq_len: int = Field(2048, ge=16, description="window length in tokens (App. D: 2,048)")
    max_windows: int | None = Field(None, ge=1, description="at most this many windows per source")
    stop_words: int = Field(
        50, ge=0, description="leave out bigrams holding one of the N most frequent words"
    )
    bins_per_decade: int = Field(5, ge=1, description="log-spaced distance bins per factor of 10")


PARAMS = RepeatParams


def source_text(source: str) -> str:
    """The text of a source: the bundled King James Bible, or a file."""
    if source == "kjv":
        from mixerzoo.corpora.kjv import kjv_text

        return kjv_text()
    path = Path(source).expanduser()
    if not path.is_file():
        raise ConfigError(f"source {source!r}: not 'kjv' and not a text file")
    return path.read_text(encoding="utf-8", errors="replace")


def tokenize(text: str) -> tuple[np.ndarray, list[str]]:
    """Lower-cased words and punctuation marks -> (ids, vocabulary), ids by first appearance."""
    vocab: dict[str, int] = {}
    ids = [vocab.setdefault(t, len(vocab)) for t in WORD.findall(text.lower())]
    return np.asarray(ids, dtype=np.int64), list(vocab)


def excluded_ids(ids: np.ndarray, vocab: list[str], stop_words: int) -> np.ndarray:
    """Bool per id: a punctuation mark or one of the ``stop_words`` most frequent words."""
    counts = np.bincount(ids, minlength=len(vocab))
    out = np.array([not t[0].isalnum() for t in vocab], dtype=bool)
    words = np.flatnonzero(~out)
    out[words[np.argsort(-counts[words], kind="stable")[:stop_words]]] = True
    return out


def hit_distances(ids: np.ndarray, excluded: np.ndarray, seq_len: int, max_windows: int | None):
    """(distances of every counted hit, (w, l) distance array, (w, l) hit mask)."""
    w = len(ids) // (seq_len + 1)
    if max_windows is not None:
        w = min(w, max_windows)
    if w == 0:
        raise ConfigError(f"the source holds {len(ids)} tokens: fewer than one window of {seq_len + 1}")
    windows = ids[: w * (seq_len + 1)].reshape(w, seq_len + 1)
    labels = label_windows(windows, int(ids.max()) + 1, counts=None, max_train_count=None)
    targets = windows[:, 1:]  # label (i) is of the bigram (window[i], window[i + 1])
    clean = ~excluded[windows[:, :-1]] & ~excluded[targets]
    hit = labels.repeated & clean
    return labels.distance[hit], labels.distance, hit


def power_law_fit(distances: np.ndarray, seq_len: int, per_decade: int) -> dict[str, Any]:
    """Slope and R^2 of log(hit rate) against log(distance) over log-spaced bins, on the decay.

    The rate of a bin is its hits over its exposure, the target positions at which its distances
    can occur at all (``seq_len - k`` for distance ``k``: a window's first targets cannot look far
    back). The fit runs from the bin of the highest rate (the shortest distances are rare in any
    text: a bigram seldom repeats at once) to ``seq_len / 2`` (beyond it fewer than half the
    positions can hold the distance): the decay a power law describes."""
    edges = np.unique(np.round(np.logspace(0, math.log10(seq_len), per_decade * 4 + 1)).astype(int))
    edges[-1] = seq_len + 1
    counts, _ = np.histogram(distances, bins=edges)
    lo, hi = edges[:-1], edges[1:]
    exposure = (hi - lo) * (seq_len - (lo + hi - 1) / 2)  # sum of seq_len - k over the bin
    rate = counts / exposure
    centre = np.sqrt(lo * (hi - 1).clip(min=1))
    keep = (counts > 0) & (np.arange(len(rate)) >= int(np.argmax(rate))) & (centre <= seq_len / 2)
    out: dict[str, Any] = {"slope": None, "r2": None, "bins": int(keep.sum()), "centre": centre, "rate": rate}
    if keep.sum() < 3:
        return out
    x, y = np.log10(centre[keep]), np.log10(rate[keep])
    slope, intercept = np.polyfit(x, y, 1)
    resid = y - (slope * x + intercept)
    r2 = 1.0 - float(resid @ resid) / float(((y - y.mean()) ** 2).sum())
    return {**out, "slope": float(slope), "intercept": float(intercept), "r2": r2, "fitted": keep}


def source_cell(source: str, p: RepeatParams) -> tuple[dict[str, Any], dict[str, Any]]:
    ids, vocab = tokenize(source_text(source))
    distances, distance, hit = hit_distances(
        ids, excluded_ids(ids, vocab, p.stop_words), p.seq_len, p.max_windows
    )
    fit = power_law_fit(distances, p.seq_len, p.bins_per_decade)
    near = (distance <= NEAR) & hit
    cell = {
        "source": "kjv" if source == "kjv" else Path(source).name,
        "hits": int(hit.sum()),
        "windows": int(hit.shape[0]),
        "hits_per_window": float(hit.sum() / hit.shape[0]),
        "share_within_100": float(near.sum() / max(1, hit.sum())),
        "se:share_within_100": clustered_error(near.astype(np.float64), hit),
        "median_distance": float(np.median(distances)) if len(distances) else None,
        "power_law_slope": fit["slope"],
        "power_law_r2": fit["r2"],
        "seeds": 1,
    }
    return cell, fit


def run(p: RepeatParams, log=print) -> Outcome:
    out = Outcome(axes=["source"], metric="power_law_r2")
    fits = {}
    for source in p.sources:
        cell, fit = source_cell(source, p)
        out.cells.append(cell)
        fits[cell["source"]] = fit
        slope = "no fit" if fit["slope"] is None else f"slope {fit['slope']:.2f}, R^2 {fit['r2']:.3f}"
        out.add_line(
            f"{cell['source']}: {cell['windows']} windows of {p.seq_len} tokens, {cell['hits']} hits",
            "a power law (a straight line in log-log); most hits within 100 positions",
            f"{slope} over {fit['bins']} bins; {cell['share_within_100']:.3f} of hits within 100 "
            f"(median distance {cell['median_distance']})",
            log,
        )
    out.plot = lambda folder: [plot_distances(fits, p, folder)]
    return out


def plan_cells(params: dict) -> list[dict]:
    """The axis key (``source``) of the cells :func:`run` produces."""
    p = RepeatParams.model_validate(params)
    return [{"source": "kjv" if s == "kjv" else Path(s).name} for s in p.sources]


def plot_distances(fits: dict[str, dict[str, Any]], p: RepeatParams, folder: Path) -> Path:
    """Hits per unit distance against distance, log-log, one line per source with its fit."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(4.8, 3.6))
    for name, fit in fits.items():
        keep = fit["rate"] > 0
        ax.loglog(fit["centre"][keep], fit["rate"][keep], "o", ms=4, label=name)
        if fit["slope"] is not None:
            x = fit["centre"][fit["fitted"]]
            ax.loglog(
                x,
                10 ** (fit["intercept"] + fit["slope"] * np.log10(x)),
                "-",
                lw=1,
                label=f"fit: slope {fit['slope']:.2f}, R^2 {fit['r2']:.2f}",
            )
    ax.axvline(NEAR, color="grey", lw=0.8, ls=":")
    ax.set_xlabel("distance to the prior bigram occurrence (tokens)")
    ax.set_ylabel("hits per position that can hold the distance")
    ax.set_title(f"Repeated-bigram distances (Zoology Figs. 3, 5), L = {p.seq_len}", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "repeat_distances.png"
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
