"""Prop. 3's tools: the N-gram golden positions by brute force, the attention distance of Thm. 1's
N-gram construction (zero: it is the construction), and a tiny end-to-end run."""

from __future__ import annotations

import numpy as np

from mixerzoo.tasks import IGNORE, build_task
from mixerzoo.theory import prop3_ngram_length_generalization as prop3
from mixerzoo.theory import thm1_ngram_recall as ngram


def brute_force_targets(row: list[int], labelled: list[int], n: int) -> dict[int, int]:
    """Query position t -> 1 + the end of the last earlier window equal to the N-gram ending at t."""
    out = {}
    for t in labelled:
        gram = row[t - n + 1 : t + 1]
        ends = [j for j in range(n - 1, t) if row[j - n + 1 : j + 1] == gram]
        if ends:
            out[t] = ends[-1] + 1
    return out


def test_golden_ngram_positions_by_brute_force():
    for n in (1, 2, 3):
        data = build_task("mqnar", vocab_size=64, seq_len=48, n=n, key_vocab_size=12).make(5, n)
        got = prop3.golden_ngram_positions(data.inputs, data.labels, n)
        want = [
            (i, t, target)
            for i, (x, y) in enumerate(zip(data.inputs.tolist(), data.labels))
            for t, target in brute_force_targets(x, np.flatnonzero(y != IGNORE).tolist(), n).items()
        ]
        assert (
            sorted(got) == sorted(want)
            and len(got) == 5 * build_task("mqnar", vocab_size=64, seq_len=48, n=n, key_vocab_size=12).k
        )


def test_the_construction_attends_exactly_where_s_star_puts_the_mass():
    p = ngram.Thm1NgramParams(vocab_sizes=[256], seq_lens=[64], n_test=4)
    task = build_task("mqnar", vocab_size=256, seq_len=64, n=2, key_vocab_size=16)
    data = ngram.with_pad_prefix(task.make(4, 0, "test"), 2)
    model, _ = ngram.construct(p, 2, 256, data)
    d = prop3.ngram_attention_distance(model, data.inputs, data.labels, 2)
    # the proof's bound at the proof's c: l1 <= 2 (L - 1) e^(-c Delta) <= eps_0 (here a few 0.01)
    assert d["attention_l1_max"] < 0.1 and d["best_shift"] == 0


def test_a_tiny_run_produces_one_cell_per_length():
    p = prop3.Prop3Params(
        train_seq_len=16,
        test_multipliers=[1, 2],
        d_model=16,
        vocab_size=64,
        key_vocab_size=4,
        n_train=64,
        n_test=4,
        epochs=1,
        batch_size=32,
    )
    out = prop3.run(p, log=lambda *_: None)
    assert [c["test_seq_len"] for c in out.cells] == [16, 32]
    assert all(0 <= c["accuracy_per_query"] <= 1 and 0 <= c["attention_l1_mean"] <= 2 for c in out.cells)
    assert prop3.plan_cells(p.model_dump()) == [{"length_factor": 1}, {"length_factor": 2}]
