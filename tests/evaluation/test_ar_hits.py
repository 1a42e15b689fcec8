"""AR-hit labels, n-gram counts, per-slice losses and the App. C.1 gap share (Zoology), each
checked against a plain-Python computation written independently of the vectorized code."""

from __future__ import annotations

import math
from collections import Counter
from types import SimpleNamespace

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from mixerzoo.evaluation.ar_hits import (
    ar_gap_fraction,
    clustered_error,
    contiguous_windows,
    count_ngrams,
    evaluate_ar_slices,
    label_windows,
    ngram_codes,
    plot_ar_slices,
    slice_table,
    token_losses,
    unigram_losses,
)
from mixerzoo.model import build_model
from mixerzoo.registry import ConfigError


def brute_labels(window: list[int], n: int, train: list[int] | None, max_count: int | None):
    """Per target i (token window[i + 1]): (repeated, distance, train count, AR hit), by loops."""
    counts = (
        Counter(tuple(train[k : k + n]) for k in range(len(train) - n + 1)) if train is not None else None
    )
    out = []
    for i in range(len(window) - 1):
        if i + 2 - n < 0:
            out.append((False, -1, -1, False))
            continue
        gram = tuple(window[i + 2 - n : i + 2])
        earlier = [j for j in range(i) if j + 2 - n >= 0 and tuple(window[j + 2 - n : j + 2]) == gram]
        repeated = bool(earlier)
        distance = i - max(earlier) if earlier else -1
        count = counts.get(gram, 0) if counts is not None else -1
        hit = repeated and (max_count is None or count <= max_count)
        out.append((repeated, distance, count, hit))
    return out


def test_the_docstring_example_by_hand():
    chars = sorted(set("xaby"))
    window = np.array([[chars.index(c) for c in "xabyab"]])
    lab = label_windows(window, len(chars), max_train_count=None)
    # targets a b y a b; bigrams xa ab by ya ab: only the last repeats, at distance 4 - 1 = 3
    assert lab.repeated.tolist() == [[False, False, False, False, True]]
    assert lab.distance.tolist() == [[-1, -1, -1, -1, 3]]
    assert lab.ar_hit.tolist() == [[False, False, False, False, True]]


@pytest.mark.parametrize("n", [2, 3])
@pytest.mark.parametrize("max_count", [None, 0, 2, 5])
def test_labels_equal_the_brute_force_labeller(n, max_count):
    rng = np.random.default_rng(10 * n + (max_count or 0))
    vocab = 4  # small: many repeats within a window
    train = rng.integers(0, vocab, size=40).tolist()  # short: training counts from 0 to a few
    windows = rng.integers(0, vocab, size=(7, 19))
    counts = count_ngrams(np.array(train), vocab, n) if max_count is not None else None
    lab = label_windows(windows, vocab, counts, max_count, n)
    for w, window in enumerate(windows.tolist()):
        want = brute_labels(window, n, train if max_count is not None else None, max_count)
        got = list(
            zip(
                lab.repeated[w].tolist(),
                lab.distance[w].tolist(),
                lab.train_count[w].tolist(),
                lab.ar_hit[w].tolist(),
            )
        )
        assert got == want
    assert lab.position.tolist() == [list(range(18))] * 7
    if (n, max_count) in ((2, 2), (3, 0)):  # the filter is exercised: repeated n-grams on both sides of it
        assert lab.ar_hit.any() and (lab.repeated & ~lab.ar_hit).any()


@pytest.mark.parametrize(("vocab", "chunk"), [(5, 7), (5, 1 << 22), (5000, 11)])
def test_ngram_counts_equal_counter(vocab, chunk):
    # vocab 5000, n = 2: 25M codes > the dense limit, the sparse path; chunk 7 / 11 splits the stream
    rng = np.random.default_rng(vocab)
    tokens = rng.integers(0, min(vocab, 6), size=100) * (vocab // 6 + 1) % vocab
    want = Counter(tuple(tokens[k : k + 2]) for k in range(len(tokens) - 1))
    counts = count_ngrams(tokens, vocab, 2, chunk=chunk)
    assert counts.total == len(tokens) - 1
    assert int(counts.counts.sum()) == len(tokens) - 1
    for (a, b), c in want.items():
        assert counts.lookup(np.array([a * vocab + b]))[0] == c
    assert len(counts.codes) == len(want)
    assert counts.lookup(np.array([vocab * vocab - 1]))[0] == want.get((vocab - 1, vocab - 1), 0)


def test_ngram_codes_are_unique_per_ngram():
    tokens = np.array([[0, 1, 2, 0, 1, 2, 1]])
    codes = ngram_codes(tokens, 3, 3)
    grams = [tuple(tokens[0, k : k + 3]) for k in range(5)]
    assert all((codes[0, a] == codes[0, b]) == (grams[a] == grams[b]) for a in range(5) for b in range(5))


def test_windows_predict_every_token_once():
    tokens = np.arange(50)
    w = contiguous_windows(tokens, 8)
    assert w.shape == (6, 9)
    assert w[:, 1:].reshape(-1).tolist() == list(range(1, 49))
    assert contiguous_windows(tokens, 8, max_windows=2).shape == (2, 9)
    with pytest.raises(ConfigError, match="do not fill one window"):
        contiguous_windows(tokens, 60)


def test_unigram_losses_are_smoothed_training_frequencies():
    train = np.array([0, 0, 0, 1])
    windows = np.array([[0, 1, 0, 2]])
    got = unigram_losses(train, windows, vocab_size=3, alpha=1.0)
    # add-one: p = (4, 2, 1) / 7
    assert got == pytest.approx(-np.log(np.array([[2, 4, 1]]) / 7))


def test_slice_table_means_equal_loops():
    rng = np.random.default_rng(0)
    windows = rng.integers(0, 3, size=(5, 13))
    train = rng.integers(0, 3, size=200)
    lab = label_windows(windows, 3, count_ngrams(train, 3), max_train_count=25)
    losses = {"a": rng.random((5, 12)), "b": rng.random((5, 12)) + 1.0}
    rows = {(r["group"], r["slice"]): r for r in slice_table(losses, lab, "char")}
    hits = [(w, i) for w in range(5) for i in range(12) if lab.ar_hit[w, i]]
    others = [(w, i) for w in range(5) for i in range(12) if not lab.ar_hit[w, i]]
    assert hits and others
    for key, cells in ((("ar", "AR hits"), hits), (("ar", "other tokens"), others)):
        row = rows[key]
        assert row["n_tokens"] == len(cells)
        for name, loss in losses.items():
            mean = sum(loss[c] for c in cells) / len(cells)
            assert row["models"][name]["loss"] == pytest.approx(mean)
            assert row["models"][name]["bpc"] == pytest.approx(mean / math.log(2))
    assert rows[("all", "all tokens")]["fraction"] == 1.0
    assert rows[("ar", "AR hits")]["fraction"] + rows[("ar", "other tokens")]["fraction"] == pytest.approx(
        1.0
    )
    # the frequency buckets partition the targets; position buckets too
    freq = [r["n_tokens"] for (g, _), r in rows.items() if g == "frequency"]
    assert sum(freq) == 60
    assert sum(r["n_tokens"] for (g, _), r in rows.items() if g == "position") == 60
    assert sum(r["n_tokens"] for (g, _), r in rows.items() if g == "distance") == len(hits)


def test_ar_gap_fraction_by_hand():
    ref = np.array([1.0, 1.0, 1.0, 1.0])
    hits = np.array([True, False, False, False])
    # gap 0.5 nats overall, 2.0 on the hit (p_H = 1/4): 2.0 * 0.25 / 0.5 = 1.0
    assert ar_gap_fraction(ref, np.array([3.0, 1.0, 1.0, 1.0]), hits) == pytest.approx(1.0)
    # gap on the hit 1.0, elsewhere 1/3 each: overall 0.5 -> 1.0 * 0.25 / 0.5 = 0.5
    m = np.array([2.0, 1 + 1 / 3, 1 + 1 / 3, 1 + 1 / 3])
    assert ar_gap_fraction(ref, m, hits) == pytest.approx(0.5)
    # better overall but worse on the hits: all of the gap is ascribed to AR (App. C.1)
    assert ar_gap_fraction(ref, np.array([1.5, 0.5, 0.5, 0.5]), hits) == 1.0
    assert ar_gap_fraction(ref, ref, np.zeros(4, dtype=bool)) is None


def test_token_losses_equal_cross_entropy_of_full_logits():
    torch.manual_seed(0)
    model = build_model(
        {
            "vocab_size": 7,
            "d_model": 16,
            "n_layers": 1,
            "max_len": 12,
            "mixer": {"name": "attention", "num_heads": 2},
        }
    )
    windows = np.random.default_rng(1).integers(0, 7, size=(5, 13))
    got = token_losses(model, windows, batch_size=2)
    x = torch.from_numpy(windows)
    with torch.no_grad():
        logp = F.log_softmax(model(x[:, :-1]), dim=-1)
    want = -logp.gather(-1, x[:, 1:, None]).squeeze(-1)
    assert got.shape == (5, 12)
    assert np.allclose(got, want.numpy(), atol=1e-5)


def test_evaluate_ar_slices_end_to_end_with_a_unigram_reference():
    rng = np.random.default_rng(2)
    corpus = SimpleNamespace(
        name="toy",
        unit="char",
        vocab_size=5,
        splits={"train": rng.integers(0, 5, size=400), "val": rng.integers(0, 5, size=120)},
    )
    torch.manual_seed(0)
    model = build_model(
        {"vocab_size": 5, "d_model": 8, "n_layers": 1, "max_len": 16, "mixer": {"name": "base_conv"}}
    )
    out = evaluate_ar_slices({"conv": model}, corpus, block_size=16, max_windows=5, max_train_count=30)
    assert out["models"] == ["conv", "unigram"] and out["reference"] == "conv"
    assert out["tokens"] == 80 and out["windows"] == 5
    rows = {r["slice"]: r for r in out["slices"]}
    windows = contiguous_windows(corpus.splits["val"], 16, 5)
    want = unigram_losses(corpus.splits["train"], windows, 5).mean() / math.log(2)
    assert rows["all tokens"]["models"]["unigram"]["bpc"] == pytest.approx(want)
    lab = label_windows(windows, 5, count_ngrams(corpus.splits["train"], 5), 30)
    assert rows["AR hits"]["n_tokens"] == int(lab.ar_hit.sum())


def test_bad_arguments_are_one_line_errors():
    w = np.zeros((2, 5), dtype=np.int64)
    with pytest.raises(ConfigError, match="needs the training split"):
        label_windows(w, 3, counts=None, max_train_count=10)
    with pytest.raises(ConfigError, match="n >= 2"):
        label_windows(w, 3, max_train_count=None, n=1)
    with pytest.raises(ConfigError, match="exceeds int64"):
        ngram_codes(w, 6, 100_000)


def test_plot_writes_a_png(tmp_path):
    rng = np.random.default_rng(3)
    windows = rng.integers(0, 3, size=(4, 17))
    lab = label_windows(windows, 3, count_ngrams(rng.integers(0, 3, size=100), 3), 20)
    rows = slice_table({"attention": rng.random((4, 16)), "base_conv": rng.random((4, 16))}, lab, "char")
    path = plot_ar_slices(rows, "attention", "base_conv", tmp_path / "gap.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_clustered_error_matches_the_window_means_spread_when_windows_are_full():
    """Every token masked: the cluster-robust error equals sd(window means) / sqrt(windows)."""
    rng = np.random.default_rng(3)
    values = rng.normal(size=(50, 8))
    mask = np.ones_like(values, dtype=bool)
    means = values.mean(axis=1)
    expected = means.std(ddof=1) / np.sqrt(50)
    assert clustered_error(values, mask) == pytest.approx(expected)


def test_clustered_error_by_brute_force_on_a_ragged_mask():
    rng = np.random.default_rng(4)
    values = rng.normal(size=(30, 6))
    mask = rng.random((30, 6)) < 0.3
    rows = [(values[i][mask[i]].sum(), mask[i].sum()) for i in range(30) if mask[i].any()]
    total = sum(n for _, n in rows)
    mean = sum(s for s, _ in rows) / total
    w = len(rows)
    var = w / (w - 1) * sum((s - mean * n) ** 2 for s, n in rows) / total**2
    assert clustered_error(values, mask) == pytest.approx(var**0.5)
    one = np.zeros_like(mask)
    one[0, :2] = True
    assert clustered_error(values, one) is None  # one window: no error
