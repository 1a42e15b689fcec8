"""Probes (ICLL App. E) recover features planted linearly in synthetic hidden states."""

from __future__ import annotations

import numpy as np
import pytest

from mixerzoo.analysis.probes import ngram_probe, sample_ngram_queries, state_probe
from mixerzoo.baselines.counts import ngram_counts
from mixerzoo.tasks import build_task


@pytest.fixture(scope="module")
def splits():
    task = build_task("regbench", preset="reference", seq_len=160)
    return task.make(40, 0, "train"), task.make(20, 0, "test")


def _planted_counts(data, n, d=48, noise=0.0, seed=0, binary=False):
    """Hidden states that hold the order-n counts (or their existence) linearly: h_t = counts_t @ R."""
    a = data.extras["transitions"].shape[2]
    c = ngram_counts(data.inputs, n, a + 2, a + 1, string_padding=False).numpy()
    c = (c > 0).astype(np.float64) if binary else c
    r = np.random.default_rng(seed).normal(size=(a + 2, d))
    return c @ r + noise * np.random.default_rng(seed + 1).normal(size=(*c.shape[:2], d))


def test_sampled_targets_match_direct_counting(splits):
    train, _ = splits
    s = sample_ngram_queries(train, 2, "count", 50, np.random.default_rng(0))
    for r, t, q, y in zip(s.row, s.pos, s.query, s.target):
        x = train.inputs[r, : t + 1].tolist()
        assert q[0] == x[t]
        want = sum(1 for u in range(1, t + 1) if x[u - 1] == q[0] and x[u] == q[1])
        assert y == want > 0


def test_linear_probe_recovers_planted_counts(splits):
    train, test = splits
    kw = dict(n=2, target="count", probe="linear", num_train=2000, num_test=400, steps=1500)
    planted = ngram_probe(_planted_counts(train, 2), train, _planted_counts(test, 2), test, **kw)
    rng = np.random.default_rng(5)
    noise = ngram_probe(
        rng.normal(size=(*train.inputs.shape, 48)),
        train,
        rng.normal(size=(*test.inputs.shape, 48)),
        test,
        **kw,
    )
    assert planted.value < 0.15
    assert noise.value > 2 * planted.value


@pytest.mark.parametrize("probe", ["linear", pytest.param("mlp", marks=pytest.mark.slow)])
def test_probe_reads_planted_existence(splits, probe):
    train, test = splits
    kw = dict(n=2, target="existence", probe=probe, num_train=2000, num_test=400, steps=1500)
    planted = lambda d: _planted_counts(d, 2, binary=True)  # noqa: E731
    res = ngram_probe(planted(train), train, planted(test), test, **kw)
    rng = np.random.default_rng(7)
    blind = ngram_probe(
        rng.normal(size=(*train.inputs.shape, 48)),
        train,
        rng.normal(size=(*test.inputs.shape, 48)),
        test,
        **kw,
    )
    assert res.metric == "accuracy" and res.value > 0.95
    assert res.value > blind.value + 0.1  # the blind probe learns only the base rate
    # its chance level: the share of the commonest answer among the test queries (the second draw)
    draws = np.random.default_rng(0)
    sample_ngram_queries(train, 2, "existence", 2000, draws)
    labels = sample_ngram_queries(test, 2, "existence", 400, draws).target
    share = float((labels > 0.5).mean())
    assert res.chance == blind.chance == max(share, 1 - share)


@pytest.mark.parametrize("probe", ["linear", pytest.param("mlp", marks=pytest.mark.slow)])
def test_state_probe_recovers_planted_states(splits, probe):
    train, test = splits
    rng = np.random.default_rng(0)
    emb = rng.normal(size=(32, 24))
    hid = lambda d: emb[np.maximum(d.extras["state"].astype(np.int64), 0)]  # noqa: E731
    res = state_probe(
        hid(train), train, hid(test), test, probe=probe, num_train=2000, num_test=400, steps=1500
    )
    blind = state_probe(
        rng.normal(size=(*train.inputs.shape, 24)),
        train,
        rng.normal(size=(*test.inputs.shape, 24)),
        test,
        probe=probe,
        num_train=2000,
        num_test=400,
        steps=1500,
    )
    assert res.value > 0.9
    assert blind.value < 0.7


def test_a_binary_probes_chance_is_the_share_of_its_commonest_class():
    from mixerzoo.analysis.probes import majority_share

    assert majority_share(np.array([0.0, 0.0, 0.0, 1.0])) == 0.75
    assert majority_share(np.array([1.0, 1.0, 0.0, 1.0, 1.0])) == 0.8
    assert majority_share(np.array([0.0, 1.0])) == 0.5


def test_the_state_probe_reports_its_chance_level_from_the_test_pairs(splits):
    from mixerzoo.analysis.probes import sample_state_pairs

    train, test = splits
    rng = np.random.default_rng(0)
    res = state_probe(
        rng.normal(size=(*train.inputs.shape, 8)),
        train,
        rng.normal(size=(*test.inputs.shape, 8)),
        test,
        probe="linear",
        num_train=200,
        num_test=400,
    )
    # the test pairs are the second draw of default_rng(seed) (the first is the training pairs)
    draws = np.random.default_rng(0)
    sample_state_pairs(train, 200, draws)
    labels = sample_state_pairs(test, 400, draws)[3]
    share = float((labels > 0.5).mean())
    assert res.chance == max(share, 1 - share)


def test_an_existence_probe_cell_carries_the_share_of_absent_ngrams_as_its_chance(splits):
    import torch

    from mixerzoo.analysis.icll_probes import _probe_score

    _, test = splits
    samples = sample_ngram_queries(test, 3, "existence", 300, np.random.default_rng(1))

    class Absent(torch.nn.Module):  # answers "absent" for every query
        def forward(self, h, q):
            return torch.full((h.shape[0],), -1.0)

    hidden = np.zeros((*test.inputs.shape, 4))
    metric, value, evidence = _probe_score(Absent(), hidden, samples, "existence")
    absent = float((samples.target <= 0.5).mean())
    assert metric == "accuracy" and evidence["n_test"] == len(np.unique(samples.row)) < 300
    assert value == pytest.approx(absent)
    assert evidence["chance:accuracy"] == pytest.approx(max(absent, 1 - absent))


def test_the_state_probe_counts_its_test_instances_not_its_pairs(splits):
    from mixerzoo.analysis.probes import sample_state_pairs

    train, test = splits
    rng = np.random.default_rng(0)
    hidden = rng.normal(size=(*train.inputs.shape, 8)), rng.normal(size=(*test.inputs.shape, 8))
    res = state_probe(hidden[0], train, hidden[1], test, probe="linear", num_train=200, num_test=400)
    draws = np.random.default_rng(0)
    sample_state_pairs(train, 200, draws)
    rows = sample_state_pairs(test, 400, draws)[0]
    # 400 pairs from the 20 test languages: 20 units of evidence, and an error over those units
    assert res.n_test == len(np.unique(rows)) == 20
    assert res.se is not None and res.se > 0.0
