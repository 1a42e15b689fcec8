"""ListOps (LRA; LaS Table 2): every label recomputed by parsing and evaluating the token sequence."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mixerzoo.config import load_run_config
from mixerzoo.registry import ConfigError
from mixerzoo.tasks import build_task

OPS = {10: "MIN", 11: "MAX", 12: "MED", 13: "SM"}
CLOSE, PAD = 14, 15


def evaluate_tree(tokens: list[int]) -> tuple[int, int, int]:
    """Parse an s4-tokenized program recursively -> (value, depth, max arguments of an operator).

    Operator semantics as the LRA generator's ``to_value``: MED is ``int(np.median(args))``.
    """
    pos = 0

    def node(depth: int) -> tuple[int, int, int]:
        nonlocal pos
        tok = tokens[pos]
        pos += 1
        if tok < 10:
            return tok, depth, 0
        assert tok in OPS
        args, deepest, widest = [], depth, 0
        while tokens[pos] != CLOSE:
            v, d, w = node(depth + 1)
            args.append(v)
            deepest, widest = max(deepest, d), max(widest, w)
        pos += 1
        op = OPS[tok]
        value = {
            "MIN": min(args),
            "MAX": max(args),
            "MED": int(np.median(args)),
            "SM": sum(args) % 10,
        }[op]
        return value, deepest, max(widest, len(args))

    result = node(1)
    assert pos == len(tokens)  # exactly one tree
    return result


@settings(max_examples=15, deadline=None)
@given(
    lo=st.integers(4, 30),
    span=st.integers(10, 80),
    depth=st.integers(5, 10),
    args=st.integers(3, 10),
    seed=st.integers(0, 2**31),
)
def test_labels_by_recursive_evaluation(lo, span, depth, args, seed):
    hi = lo + span
    task = build_task("listops", seq_len=hi + 3, min_length=lo, max_length=hi, max_depth=depth, max_args=args)
    d = task.make(20, seed)
    assert d.inputs.shape == (20, hi + 3) and d.labels.shape == (20,)
    assert d.labels.dtype == np.int64
    for x, y, mask in zip(d.inputs, d.labels, d.mask):
        tokens = x[mask].tolist()
        assert mask.tolist() == [True] * len(tokens) + [False] * (len(x) - len(tokens))  # right padding
        assert (x[~mask] == PAD).all()
        assert lo <= len(tokens) <= hi
        value, tree_depth, widest = evaluate_tree(tokens)
        assert y == value
        assert tree_depth <= depth and widest <= args
        if len(tokens) > 1:
            assert widest >= 2


def test_lra_tokenization_drops_closing_brackets():
    params = {"seq_len": 60, "min_length": 20, "max_length": 60}
    s4 = build_task("listops", **params).make(30, 7)
    lra = build_task("listops", tokenization="lra", **params).make(30, 7)
    assert np.array_equal(s4.labels, lra.labels)  # same programs
    for a, b, mb in zip(s4.inputs, lra.inputs, lra.mask):
        assert b[mb].tolist() == [t for t in a if t not in (CLOSE, PAD)]


def test_splits_are_disjoint_and_programs_distinct():
    task = build_task("listops", seq_len=12, min_length=3, max_length=12, max_depth=3, max_args=3)
    rows = {}
    for seed in (0, 1):
        for split in ("train", "test", "valid"):
            d = task.make(150, seed, split)
            rows[seed, split] = {tuple(r) for r in d.inputs.tolist()}
            assert len(rows[seed, split]) == 150  # no duplicates within a split
    for (s1, a), (s2, b) in [(k1, k2) for k1 in rows for k2 in rows if k1 < k2]:
        if a != b:
            assert not rows[s1, a] & rows[s2, b], (s1, a, s2, b)


def test_default_lengths_and_reproducibility():
    task = build_task("listops")
    a = task.make(20, 3)
    assert np.array_equal(a.inputs, task.make(20, 3).inputs)
    lengths = a.mask.sum(axis=1)
    assert lengths.min() >= 500 and lengths.max() <= 2000 and a.inputs.shape == (20, 2000)


def test_task_implies_a_classification_model():
    cfg = load_run_config(
        {
            "data": {"task": {"name": "listops", "seq_len": 100, "min_length": 10, "max_length": 100}},
            "model": {},
        }
    )
    assert (cfg.model.head, cfg.model.num_classes, cfg.model.vocab_size) == ("classification", 10, 16)


@pytest.mark.parametrize(
    "params, match",
    [
        ({"min_length": 30, "max_length": 20, "seq_len": 40}, "min_length"),
        ({"max_length": 3000}, "seq_len"),
        ({"max_depth": 1, "min_length": 5, "max_length": 10, "seq_len": 10}, "max_depth"),
        ({"tokenization": "bpe"}, "tokenization"),
        ({"max_args": 1}, "max_args"),
    ],
)
def test_bad_parameters(params, match):
    with pytest.raises(ConfigError, match=match):
        build_task("listops", **params)


def test_impossible_length_range_is_reported():
    task = build_task("listops", seq_len=200, min_length=150, max_length=200, max_depth=3, max_args=2)
    with pytest.raises(ConfigError, match="distinct programs"):
        task.make(5, 0)
