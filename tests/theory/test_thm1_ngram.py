"""CAT Thm. 1 for N-gram keys (key delay), written into ``cat`` with the theorem's norm(.), solves
MQNAR exactly; its Delta is recomputed by brute force; a broken filter fails."""

from __future__ import annotations

import itertools
import math

import numpy as np
import torch

from mixerzoo.evaluation import evaluate_tokens
from mixerzoo.mixers.cat import CAT
from mixerzoo.tasks import IGNORE, build_task
from mixerzoo.testing import check_mixer
from mixerzoo.theory import thm1_ngram_recall as ngram
from mixerzoo.theory.constructed import random_unit_embeddings


def quiet(*_):
    pass


def small(**over) -> ngram.Thm1NgramParams:
    return ngram.Thm1NgramParams(
        **{"ns": [2, 3], "vocab_sizes": [256], "seq_lens": [64], "n_test": 8, **over}
    )


def test_the_key_delay_construction_solves_mqnar_exactly():
    cells = ngram.run(small(ns=[1, 2, 3], seq_lens=[64, 128]), log=quiet).cells
    assert [c["accuracy_per_query"] for c in cells] == [1.0] * 6
    assert all(c["signature_delta"] > 0 and c["n_supervised"] > 0 for c in cells)


def mqnar_data(p: ngram.Thm1NgramParams, n: int, seq_len: int = 64):
    task = build_task(
        "mqnar", vocab_size=256, seq_len=seq_len, n=n, key_vocab_size=ngram.key_alphabet(p, n, seq_len)
    )
    return ngram.with_pad_prefix(task.make(p.n_test, p.seed, "test"), n)


def accuracy(model, data) -> float:
    x, y = torch.from_numpy(data.inputs), torch.from_numpy(data.labels)
    return evaluate_tokens(model, x, y)["accuracy_per_query"]


def test_without_the_key_delay_the_layer_fails():
    # key filter F instead of D_1 * F: each query attends to itself and returns its own last token
    p = small()
    data = mqnar_data(p, 2)
    model, info = ngram.construct(p, 2, 256, data)
    with torch.no_grad():
        model.blocks[0].mixer.filters["k"].copy_(model.blocks[0].mixer.filters["q"])
    assert accuracy(model, data) < 0.05


def test_the_last_token_alone_does_not_solve_mqnar():
    # the N = 1 construction (Cor. 1) on 2-gram keys: keys share tokens, so it retrieves wrong values
    p = small(c=200.0)
    data = mqnar_data(p, 2)
    model, _ = ngram.construct(p, 1, 256, data)
    assert accuracy(model, data) < 0.6


def brute_force_delta(sig: torch.Tensor, inputs: np.ndarray, labels: np.ndarray, n: int) -> float:
    """1 - max cosine of a query's signature with the signature of any other window before it
    (windows compared as tuples, the start padded with None) and the zero key at position 0."""
    worst = 0.0
    for i, row in enumerate(inputs.tolist()):
        padded = [None] * (n - 1) + row
        for t in np.flatnonzero(labels[i] != IGNORE).tolist():
            for j in range(t):
                if padded[j : j + n] != padded[t : t + n]:
                    worst = max(worst, float(sig[i, t] @ sig[i, j]))
    return 1.0 - worst


def test_signature_delta_by_brute_force():
    p = small(n_test=3)
    for n in (1, 2, 3):
        data = mqnar_data(p, n, 32)
        emb = random_unit_embeddings(256, 16, 1)
        sig = ngram.signatures(emb, data.inputs, ngram.random_filter(n, 0))
        got = ngram.signature_delta(sig, data.inputs, data.labels, n)
        assert math.isclose(got, brute_force_delta(sig, data.inputs, data.labels, n), abs_tol=1e-12)


def test_signatures_are_the_normalized_filtered_ngrams():
    emb = random_unit_embeddings(10, 8, 0)
    taps = [1.3, 0.7, 0.9]
    row = np.array([[4, 2, 7, 7, 1]])
    sig = ngram.signatures(emb, row, taps)
    for t in range(5):
        s = sum(f * emb[row[0, t - i]] for i, f in enumerate(taps) if t - i >= 0)
        torch.testing.assert_close(sig[0, t], s / s.norm())


def test_zero_padding_makes_a_partial_window_collide_with_a_repeated_ngram():
    # the finding behind the pad prefix: (start, a) and (a, a) both normalize to a
    emb = random_unit_embeddings(10, 8, 0)
    sig = ngram.signatures(emb, np.array([[3, 3, 3]]), ngram.random_filter(2, 0))
    torch.testing.assert_close(sig[0, 0], sig[0, 2])


def test_theorem_c_is_the_bound_of_the_proof():
    mu, delta = 0.4, 0.05
    eps0 = math.sqrt(2 * (1 - mu)) / 2
    assert math.isclose(ngram.theorem_c(delta, mu, 100), math.log(2 * 99 / eps0) / delta)


def test_key_alphabet_holds_every_key():
    p = small()
    for n, seq_len in itertools.product((1, 2, 3), (64, 1024, 16384)):
        a = ngram.key_alphabet(p, n, seq_len)
        assert a >= p.key_vocab_size and a**n >= (30 * seq_len) // (64 * (n + 1))


def test_normed_cat_keeps_the_mixer_contract():
    check_mixer(ngram.NormedCAT, d_model=16, qk_scale=3.0, conv_width=3)
    check_mixer(ngram.NormedCAT, d_model=16, num_heads=2, conv_type="multi_head")


def test_normed_cat_rows_have_the_set_norm():
    m = ngram.NormedCAT(8, num_heads=2, qk_scale=2.5).double()
    x = torch.randn(1, 6, 8, dtype=torch.float64)
    q = m.convolve(x, "q").reshape(1, 6, 2, 4)
    torch.testing.assert_close(q.norm(dim=-1), torch.full((1, 6, 2), 2.5, dtype=torch.float64))
    torch.testing.assert_close(m.convolve(x, "v"), CAT.convolve(m, x, "v"))
