"""zoology's newer MQAR variants (compositional, forgetting, multi-pass), labels by brute force."""

from __future__ import annotations

import numpy as np
import pytest

from mixerzoo.registry import ConfigError
from mixerzoo.tasks import IGNORE, build_task

VARIANTS = ["mqar_compositional", "mqar_forgetting", "mqar_multipass"]


def scan_back(x: list[int], p: int, gram: tuple[int, ...], stop: int | None = None) -> int | None:
    """The token after the last occurrence of ``gram`` ending before ``p`` (and before ``stop``)."""
    n = len(gram)
    end = p if stop is None else min(p, stop)
    for j in range(end - 1, n - 2, -1):
        if tuple(x[j - n + 1 : j + 1]) == gram and j + 1 < len(x):
            return x[j + 1]
    return None


@pytest.mark.parametrize("name", VARIANTS)
def test_seeded_deterministic_and_splits_differ(name):
    task = build_task(name, vocab_size=64, seq_len=64)
    a, b = task.make(30, 4), task.make(30, 4)
    assert np.array_equal(a.inputs, b.inputs) and np.array_equal(a.labels, b.labels)
    assert not np.array_equal(a.inputs, task.make(30, 4, "test").inputs)
    assert a.inputs.min() >= 0 and a.inputs.max() < 64


# -- compositional ------------------------------------------------------------------------


@pytest.mark.parametrize("kv,L,seed", [(4, 24, 0), (9, 64, 1), (16, 128, 2), (4, 64, 3)])
def test_compositional_labels_by_brute_force(kv, L, seed):
    V = 90
    d = build_task(
        "mqar_compositional", vocab_size=V, seq_len=L, num_kv_pairs=kv, random_non_queries=False, power_a=0.5
    ).make(40, seed)
    for x, y in zip(d.inputs.tolist(), d.labels.tolist()):
        supervised = [t for t in range(L) if y[t] != IGNORE]
        assert len(supervised) == kv
        for p in supervised:
            assert y[p] == scan_back(x, p, (x[p - 1], x[p]))  # the value after the same bigram
            assert p > 3 * kv and all(t == 0 for t in x[p + 1 : p + 2])
        triples = [tuple(x[3 * i : 3 * i + 3]) for i in range(kv)]
        queried = sorted((x[p - 1], x[p]) for p in supervised)
        assert queried == sorted((a, b) for a, b, _ in triples)  # every key queried once
        assert all(1 <= a < 30 <= b < 60 <= v < 90 for a, b, v in triples)
        assert len({v for _, _, v in triples}) == kv
        # the grid: neither key token alone determines the value
        g = int(kv**0.5)
        for side in (0, 1):
            groups: dict[int, set[int]] = {}
            for t in triples:
                groups.setdefault(t[side], set()).add(t[2])
            assert len(groups) == g and all(len(v) == g for v in groups.values())


def test_compositional_with_random_fill_reads_the_context():
    task = build_task("mqar_compositional", vocab_size=300, seq_len=96, num_kv_pairs=9)
    d = task.make(30, 0)
    for x, y in zip(d.inputs.tolist(), d.labels.tolist()):
        for p in (t for t in range(96) if y[t] != IGNORE):
            assert y[p] == scan_back(x, p, (x[p - 1], x[p]), stop=27)


@pytest.mark.parametrize(
    "params,match",
    [
        ({"num_kv_pairs": 5}, "num_kv_pairs = 5: must be a perfect square"),
        ({"num_kv_pairs": 16, "seq_len": 64}, "num_kv_pairs = 16: needs 6"),
        ({"vocab_size": 9, "num_kv_pairs": 4, "seq_len": 24}, "vocab_size = 9"),
    ],
)
def test_compositional_bad_parameters(params, match):
    with pytest.raises(ConfigError, match=match) as err:
        build_task("mqar_compositional", **params)
    assert "\n" not in str(err.value)


# -- forgetting ---------------------------------------------------------------------------


@pytest.mark.parametrize("kv,upd,L,seed", [(3, 2, 24, 0), (8, 4, 64, 1), (8, 8, 64, 2), (4, 0, 32, 3)])
def test_forgetting_labels_are_the_last_value_by_brute_force(kv, upd, L, seed):
    V = 40
    d = build_task(
        "mqar_forgetting", vocab_size=V, seq_len=L, num_kv_pairs=kv, num_updates=upd, random_non_queries=False
    ).make(40, seed)
    ctx = 2 * (kv + upd)
    for x, y in zip(d.inputs.tolist(), d.labels.tolist()):
        supervised = [t for t in range(L) if y[t] != IGNORE]
        assert len(supervised) == kv and all(p >= ctx and (p - ctx) % 2 == 0 for p in supervised)
        for p in supervised:
            assert y[p] == scan_back(x, p, (x[p],))  # the last value shown for the key
        first = {x[2 * i]: x[2 * i + 1] for i in range(kv)}
        updates = [(x[2 * kv + 2 * i], x[2 * kv + 2 * i + 1]) for i in range(upd)]
        assert len({k for k, _ in updates}) == upd and all(k in first for k, _ in updates)
        assert all(v != first[k] for k, v in updates)  # a re-assignment changes the value
        assert len(set(first.values())) == kv and all(20 <= v < 40 for v in first.values())
        changed = sum(y[p] != first[x[p]] for p in supervised)
        assert changed == upd


def test_forgetting_with_random_fill_reads_the_context():
    d = build_task("mqar_forgetting", vocab_size=100, seq_len=64).make(30, 0)
    for x, y in zip(d.inputs.tolist(), d.labels.tolist()):
        for p in (t for t in range(64) if y[t] != IGNORE):
            assert y[p] == scan_back(x, p, (x[p],), stop=24)


@pytest.mark.parametrize(
    "params,match",
    [
        ({"num_updates": 9}, "num_updates = 9: must be <= num_kv_pairs = 8"),
        ({"seq_len": 32}, "seq_len = 32: needs"),
        ({"vocab_size": 12}, "vocab_size = 12"),
    ],
)
def test_forgetting_bad_parameters(params, match):
    with pytest.raises(ConfigError, match=match) as err:
        build_task("mqar_forgetting", **params)
    assert "\n" not in str(err.value)


# -- multi-pass ---------------------------------------------------------------------------


@pytest.mark.parametrize("reorder", [False, True])
@pytest.mark.parametrize("kv,passes,L,seed", [(2, 2, 20, 0), (4, 3, 64, 1), (8, 1, 64, 2), (5, 4, 64, 3)])
def test_multipass_labels_by_brute_force(kv, passes, L, seed, reorder):
    d = build_task(
        "mqar_multipass",
        vocab_size=50,
        seq_len=L,
        num_kv_pairs=kv,
        num_passes=passes,
        reorder_passes=reorder,
        random_non_queries=False,
    ).make(30, seed)
    ctx = 2 * kv * passes
    for x, y in zip(d.inputs.tolist(), d.labels.tolist()):
        supervised = [t for t in range(L) if y[t] != IGNORE]
        assert len(supervised) == kv
        for p in supervised:
            assert p >= ctx and y[p] == scan_back(x, p, (x[p],))
        blocks = [x[2 * kv * i : 2 * kv * (i + 1)] for i in range(passes)]
        pairs = [sorted(zip(b[0::2], b[1::2])) for b in blocks]
        assert all(pr == pairs[0] for pr in pairs)  # every pass shows the same pairs
        if not reorder:
            assert all(b == blocks[0] for b in blocks)  # ... in the same order
        assert sorted(x[p] for p in supervised) == sorted(k for k, _ in pairs[0])


def test_multipass_reorder_changes_the_order():
    d = build_task(
        "mqar_multipass", vocab_size=100, seq_len=64, num_kv_pairs=6, num_passes=2, reorder_passes=True
    )
    x = d.make(50, 0).inputs
    assert (x[:, 0:12] != x[:, 12:24]).any(axis=1).mean() > 0.9


def test_multipass_bad_parameters():
    with pytest.raises(
        ConfigError, match="seq_len = 16: needs 2\\*num_kv_pairs\\*\\(num_passes \\+ 1\\) = 24"
    ):
        build_task("mqar_multipass", seq_len=16, num_kv_pairs=4, num_passes=2)
    with pytest.raises(ConfigError, match="num_passes"):
        build_task("mqar_multipass", num_passes=0)
