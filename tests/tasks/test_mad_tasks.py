"""MAD's six tasks, each label recomputed by reading the tokens as a person would (no generator code)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from mixerzoo.registry import ConfigError
from mixerzoo.tasks import IGNORE, build_task
from mixerzoo.tasks.mad_levels import MAD_LEVELS, MAD_NAMES, MAD_TASK_CHANGES, split_level

MAD_TASKS = sorted(MAD_NAMES)
SMALL = {
    "mad_in_context_recall": {"vocab_size": 12, "seq_len": 24},
    "mad_noisy_recall": {"vocab_size": 16, "seq_len": 24, "noise_vocab_size": 4, "frac_noise": 0.4},
    "mad_fuzzy_recall": {"vocab_size": 14, "seq_len": 40, "k_motif_size": 2, "v_motif_size": 3},
    "mad_selective_copy": {"vocab_size": 8, "seq_len": 24, "num_tokens_to_copy": 5},
    "mad_compression": {"vocab_size": 8, "seq_len": 12},
    "mad_memorization": {"vocab_size": 21, "seq_len": 12},
}


# -- shared: determinism, disjoint split streams, one-line errors ---------------------------


@pytest.mark.parametrize("name", MAD_TASKS)
def test_seeded_deterministic_and_splits_differ(name):
    task = build_task(name, **SMALL[name])
    a, b = task.make(40, 7), task.make(40, 7)
    assert np.array_equal(a.inputs, b.inputs) and np.array_equal(a.labels, b.labels)
    width = getattr(task, "width", task.seq_len)  # MAD-lab's multi-query recall: seq_len - 1
    assert a.inputs.shape == a.labels.shape == (40, width)
    assert a.inputs.dtype == a.labels.dtype == np.int64
    assert a.inputs.min() >= 0 and a.inputs.max() < task.vocab_size
    assert not np.array_equal(a.inputs, task.make(40, 7, "test").inputs)
    assert not np.array_equal(a.inputs, task.make(40, 8).inputs)


@pytest.mark.parametrize(
    "name,params,match",
    [
        ("mad_in_context_recall", {"seq_len": 127}, "seq_len = 127: must be even"),
        ("mad_in_context_recall", {"frac_noise": 0.3}, "frac_noise = 0.3: needs noise_vocab_size > 0"),
        ("mad_in_context_recall", {"vocab_size": 8, "noise_vocab_size": 7}, "noise_vocab_size = 7"),
        ("mad_in_context_recall", {"train_targets": "all"}, "train_targets"),
        ("mad_noisy_recall", {"frac_noise": 1.0}, "frac_noise"),
        ("mad_fuzzy_recall", {"vocab_size": 6}, "vocab_size = 6"),
        ("mad_fuzzy_recall", {"seq_len": 12}, "seq_len = 12: needs >= 2"),
        ("mad_selective_copy", {"seq_len": 33}, "seq_len = 33: needs > 2"),
        ("mad_compression", {"noise_vocab_size": 15}, "noise_vocab_size = 15"),
        ("mad_memorization", {"seq_len": 31}, "seq_len = 31: must be even"),
        ("mad_memorization", {"table_seed": -1}, "table_seed"),
        ("mad_memorization", {"bogus": 1}, "unknown field"),
    ],
)
def test_bad_parameters_are_one_line_errors(name, params, match):
    with pytest.raises(ConfigError, match=match) as err:
        build_task(name, **params)
    assert "\n" not in str(err.value)


# -- in-context recall and noisy recall -----------------------------------------------------


def recall_answers(row: list[int], is_key) -> dict[int, int]:
    """Pair slots (2i, 2i+1): at a key seen in an earlier pair, the value that followed it."""
    answers = {}
    for i in range(0, len(row), 2):
        if not is_key(row[i]):
            continue
        for j in range(i - 2, -1, -2):  # scan back for the last earlier pair with this key
            if row[j] == row[i]:
                answers[i] = row[j + 1]
                break
    return answers


@pytest.mark.parametrize("layout", ["madlab", "clean"])
@pytest.mark.parametrize("name", ["mad_in_context_recall", "mad_noisy_recall"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_multi_query_recall_labels_by_brute_force(name, seed, layout):
    params = SMALL[name]
    task = build_task(name, **params, layout=layout)
    V, N, L = params["vocab_size"], params.get("noise_vocab_size", 0), params["seq_len"]
    ns = V - N
    q = L - 2  # the final key: the last pair's
    test = task.make(60, seed, "test")
    width = L - 1 if layout == "madlab" else L  # MAD-lab: the final value shifted out
    assert test.inputs.shape[1] == width
    for x, y in zip(test.inputs.tolist(), test.labels.tolist()):
        answers = recall_answers(x, lambda t: t < ns // 2)
        expected = [answers.get(t, IGNORE) for t in range(len(x))]
        assert y == expected
        assert y[q] != IGNORE  # the final pair is always a query
        if layout == "clean":
            assert answers[q] == x[q + 1]  # ... and shows the value the key had
        for i in range(0, q, 2):  # a pair is key+value or two noise tokens
            assert (x[i] < ns // 2 and ns // 2 <= x[i + 1] < ns) or (x[i] >= ns and x[i + 1] >= ns)
    train = task.make(60, seed, "train")
    assert (train.labels[:, :-1] == train.inputs[:, 1:]).all()  # MAD trains on every next token
    if layout == "clean":
        assert (train.labels[:, -1] == IGNORE).all()
    else:  # the last label is the final value: the answer to the final query
        for x, y in zip(train.inputs.tolist(), train.labels.tolist()):
            assert y[-1] == recall_answers(x, lambda t: t < ns // 2)[q]


def test_single_query_recall_by_brute_force():
    task = build_task("mad_in_context_recall", vocab_size=12, seq_len=20, multi_query=False)
    prefix = 11
    for split in ("test", "train"):
        d = task.make(50, 3, split)
        for x, y in zip(d.inputs.tolist(), d.labels.tolist()):
            assert x[-2] == prefix and prefix not in x[:-2]
            key, answer = x[-1], None
            for j in range(len(x) - 4, -1, -2):
                if x[j] == key:
                    answer = x[j + 1]
                    break
            assert answer is not None and y[-1] == answer
            if split == "test":
                assert all(v == IGNORE for v in y[:-1])
            else:
                assert y[:-1] == x[1:]


def test_queries_only_training_targets():
    task = build_task("mad_in_context_recall", vocab_size=12, seq_len=24, train_targets="queries")
    train, test = task.make(30, 0, "train"), task.make(30, 0, "test")
    for x, y in zip(train.inputs.tolist(), train.labels.tolist()):
        answers = recall_answers(x, lambda t: t < 6)
        assert y == [answers.get(t, IGNORE) for t in range(len(x))]
    assert (test.labels != IGNORE).any()


def test_noise_fraction_and_one_guaranteed_pair():
    task = build_task("mad_noisy_recall", seq_len=64, frac_noise=0.6)
    x = task.make(2000, 0, "test").inputs
    noise_slots = x[:, 0:-2:2] >= 16  # noise ids [16, 32) at the context slots
    assert abs(noise_slots.mean() - 0.6) < 0.03
    assert (~noise_slots).any(axis=1).all()


# -- fuzzy recall -------------------------------------------------------------------------


def fuzzy_answers(x: list[int], key_hi: int, val_hi: int, multi: bool) -> dict[int, int]:
    """Split the tokens into runs of key / value / other tokens; a key run seen before,
    followed by a value run, asks for the value run that followed it the first time (the
    label at the key's last token and each value token but the last is the next value token)."""
    kind = ["k" if t < key_hi else "v" if t < val_hi else "o" for t in x]
    runs, i = [], 0
    while i < len(x):
        j = i
        while j < len(x) and kind[j] == kind[i]:
            j += 1
        runs.append((kind[i], i, j))
        i = j
    seen, answers = {}, {}
    last_key_run = max(r for r, run in enumerate(runs) if run[0] == "k")
    for r, (k, i, j) in enumerate(runs):
        if k != "k":
            continue
        key = tuple(x[i:j])
        if key in seen:
            value = seen[key]
            assert x[j : j + len(value)] == list(value)[: len(x) - j]  # shown with the same value
            if multi or r == last_key_run:
                for n, v in enumerate(value):
                    if j - 1 + n < len(x):
                        answers[j - 1 + n] = v
        elif r + 1 < len(runs):  # (an unseen final key may end the sequence, its value shifted out)
            kind_next, vi, vj = runs[r + 1]
            assert kind_next == "v"
            seen[key] = tuple(x[vi:vj])
    return answers


def final_key_end(x: list[int], key_hi: int) -> int:
    """Index after the last key token (the final query's key)."""
    return max(t for t, tok in enumerate(x) if tok < key_hi) + 1


def fuzzy_expected(x: list[int], y: list[int], key_hi: int, ns: int, multi: bool) -> tuple[dict, bool]:
    """The answers :func:`fuzzy_answers` reads, and whether the final query is unanswerable: its key
    was never shown (MAD-lab's layout); it is then labelled with the value shown after it, whose
    last token, shifted out of the inputs, is read from the labels (a value token)."""
    answers = fuzzy_answers(x, key_hi, ns, multi)
    if len(x) - 1 in answers:
        return answers, False
    e = final_key_end(x, key_hi)
    answers.update({t: x[t + 1] for t in range(e - 1, len(x) - 1)})
    assert key_hi <= y[-1] < ns
    answers[len(x) - 1] = y[-1]
    return answers, True


@pytest.mark.parametrize("layout", ["madlab", "clean"])
@pytest.mark.parametrize("noise", [0, 3])
@pytest.mark.parametrize("multi", [True, False])
@pytest.mark.parametrize("seed", [0, 1])
def test_fuzzy_recall_labels_by_brute_force(multi, seed, noise, layout):
    extra = {"noise_vocab_size": noise, "frac_noise": 0.3, "vocab_size": 17} if noise else {}
    params = {**SMALL["mad_fuzzy_recall"], "multi_query": multi, **extra}
    task = build_task("mad_fuzzy_recall", **params, layout=layout)
    V = params["vocab_size"]
    ns = V - (1 if multi else 2) - noise
    key_hi = ns // 2
    unanswerable = 0
    for split in ("test", "train"):
        d = task.make(200, seed, split)
        for x, y in zip(d.inputs.tolist(), d.labels.tolist()):
            answers, missing = fuzzy_expected(x, y, key_hi, ns, multi)
            unanswerable += missing  # MAD-lab: the final key was never shown; its value is scored
            if split == "test":
                assert y == [answers.get(t, IGNORE) for t in range(len(x))]
                key_runs = [len(r) for r in "".join("k" if t < key_hi else " " for t in x).split()]
                assert set(key_runs) == {params["k_motif_size"]}  # test keys: the longest motif
            else:
                assert y[:-1] == x[1:] and y[-1] == answers[len(x) - 1]
    assert (unanswerable > 0) == (layout == "madlab")


def test_fuzzy_recall_training_uses_every_motif_size():
    task = build_task("mad_fuzzy_recall", **SMALL["mad_fuzzy_recall"])
    x = task.make(50, 0, "train").inputs
    runs = {len(r) for row in x.tolist() for r in "".join("k" if t < 5 else " " for t in row).split()}
    assert runs == {1, 2}


# -- selective copying --------------------------------------------------------------------


@pytest.mark.parametrize("seed", [0, 1])
def test_selective_copy_by_brute_force(seed):
    params = SMALL["mad_selective_copy"]
    V, L, K = params["vocab_size"], params["seq_len"], params["num_tokens_to_copy"]
    blank, copy = V - 2, V - 1
    d = build_task("mad_selective_copy", **params).make(100, seed)
    for x, y in zip(d.inputs.tolist(), d.labels.tolist()):
        c = x.index(copy)
        assert c == L - K - 1 and x.count(copy) == 1
        shown = [t for t in x[:c] if t != blank]
        assert len(shown) == K and x[c - 1] != blank  # MAD: the last token precedes the copy token
        assert all(t == blank for t in x[c + 1 :])
        assert y == [IGNORE] * (c + 1) + shown


def test_selective_copy_blanks_spread_over_gaps():
    d = build_task("mad_selective_copy", vocab_size=8, seq_len=24, num_tokens_to_copy=5).make(3000, 0)
    first = (d.inputs != 6).argmax(axis=1)  # blanks before the first token: Binomial(13, 1/5)
    assert abs(first.mean() - 13 / 5) < 0.15


# -- compression --------------------------------------------------------------------------


def test_compression_labels_are_the_inputs():
    task = build_task("mad_compression", **SMALL["mad_compression"])
    d = task.make(50, 0, "test")
    for x, y in zip(d.inputs.tolist(), d.labels.tolist()):
        assert x[-1] == 7 and 7 not in x[:-1] and y == x


def test_compression_noise_positions_are_unscored():
    task = build_task("mad_compression", vocab_size=12, seq_len=30, noise_vocab_size=3, frac_noise=0.5)
    d = task.make(50, 0)
    for x, y in zip(d.inputs.tolist(), d.labels.tolist()):
        for t, (a, b) in enumerate(zip(x, y)):
            if t == len(x) - 1:
                assert a == 11 and b == 11
            elif 8 <= a < 11:
                assert b == IGNORE
            else:
                assert a < 8 and b == a


# -- memorization -------------------------------------------------------------------------


def read_pairs(d) -> dict[int, set[int]]:
    table: dict[int, set[int]] = {}
    for x, y in zip(d.inputs.tolist(), d.labels.tolist()):
        for t in range(0, len(x), 2):
            assert y[t] == IGNORE
            table.setdefault(x[t], set()).add(y[t + 1])
    return table


def test_memorization_one_table_across_seeds_and_splits():
    params = SMALL["mad_memorization"]  # insert token 20, keys [0, 10), values [10, 20)
    task = build_task("mad_memorization", **params)
    assert all(int(v) == 20 for v in task.make(5, 0).inputs[:, 1::2].ravel())
    seen: dict[int, set[int]] = {}
    for seed, split in [(0, "train"), (1, "train"), (0, "test"), (5, "valid")]:
        for k, vs in read_pairs(task.make(200, seed, split)).items():
            seen.setdefault(k, set()).update(vs)
    assert sorted(seen) == list(range(10))
    assert all(len(vs) == 1 for vs in seen.values())  # a function of the key, everywhere
    values = [next(iter(vs)) for vs in seen.values()]
    assert len(set(values)) == 10 and all(10 <= v < 20 for v in values)  # injective
    other = read_pairs(build_task("mad_memorization", **params, table_seed=1).make(200, 0))
    assert {k: next(iter(v)) for k, v in other.items()} != {k: next(iter(v)) for k, v in seen.items()}


def test_memorization_permutation_table_is_another_injection():
    madlab = build_task("mad_memorization", vocab_size=256).table
    perm = build_task("mad_memorization", vocab_size=256, table="permutation").table
    assert len(set(perm.tolist())) == 127 and set(perm.tolist()) <= set(range(127, 255))  # injective
    assert (perm != madlab).sum() > 100


def test_memorization_noise_slots_have_no_label():
    task = build_task("mad_memorization", vocab_size=30, seq_len=16, noise_vocab_size=5, frac_noise=0.5)
    d = task.make(50, 0)
    for x, y in zip(d.inputs.tolist(), d.labels.tolist()):
        for t in range(0, len(x), 2):
            if x[t] >= 24:  # noise ids [24, 29)
                assert 24 <= x[t + 1] < 29 and y[t + 1] == IGNORE
            else:
                assert x[t + 1] == 29 and y[t + 1] != IGNORE
        assert any(v != IGNORE for v in y)


# -- mad-lab's own examples: the readers above give its labels ------------------------------
#: examples from mad-lab's generators, every setting and split (tests/tasks/test_mad_reference.py
#: gives the command that made them)
MADLAB_EXAMPLES = Path(__file__).parent / "mad_reference" / "examples.npz"
SPLITS = ("train", "test")


def madlab_examples() -> list[tuple[str, dict, dict]]:
    """(mad-lab task, its parameters, split -> (inputs, labels)) of every stored setting."""
    out = []
    with np.load(MADLAB_EXAMPLES) as f:
        for i in sorted({int(k.split("/")[0]) for k in f.files}):
            task, params = str(f[f"{i}/key"]).split("|", 1)
            splits = {
                s: (f[f"{i}/{s}/inputs"].tolist(), f[f"{i}/{s}/labels"].tolist()) for s in ("train", "test")
            }
            out.append((task, json.loads(params), splits))
    return out


def madlab_test_labels(task: str, p: dict, x: list[int], y: list[int]) -> list[int]:
    """The test-split labels of a mad-lab example, read from its tokens by this file's readers."""
    V, N = p["vocab_size"], p["noise_vocab_size"]
    if task in ("in-context-recall", "noisy-in-context-recall"):
        answers = recall_answers(x, lambda t: t < (V - N) // 2)
    elif task == "fuzzy-in-context-recall":
        ns = V - 1 - N
        answers, _ = fuzzy_expected(x, y, ns // 2, ns, multi=True)
    elif task == "selective-copying":
        c = x.index(V - 1)
        return [IGNORE] * (c + 1) + [t for t in x[:c] if t != V - 2]
    elif task == "compression":
        return x
    else:  # memorization: the value of the key before each insert token, from our table
        table = build_task("mad_memorization", vocab_size=V, seq_len=p["seq_len"]).table
        answers = {t: int(table[x[t - 1]]) for t in range(1, len(x), 2)}
    return [answers.get(t, IGNORE) for t in range(len(x))]


def test_readers_give_madlabs_labels_on_madlabs_examples():
    seen = set()
    for task, params, splits in madlab_examples():
        seen.add(task)
        for x, y in zip(*splits["test"]):
            assert y == madlab_test_labels(task, params, x, y), (task, params)
        for x, y in zip(*splits["train"]):
            if "recall" in task:  # MAD trains recall on every next token
                assert y[:-1] == x[1:]
            else:  # the other tasks train on their test labels
                assert y == madlab_test_labels(task, params, x, y)
    assert seen == set(MAD_NAMES.values())


# -- levels -------------------------------------------------------------------------------


def test_levels_are_baseline_plus_one_change_at_a_time():
    assert sum(len(v) for v in MAD_LEVELS.values()) == 66
    for task, levels in MAD_LEVELS.items():
        base = levels[0]
        changed = [{k for k in lv if lv[k] != base[k]} for lv in levels[1:]]
        assert all(len(c) == 1 for c in changed)
        assert len(levels) == 1 + sum(len(v) for v in MAD_TASK_CHANGES[task].values())


def test_levels_name_madlabs_data_so_earlier_runs_are_not_reused():
    """The recall tasks' layout and memorization's table are the tasks' defaults, named in the levels
    so that a run's config (hence its hash in a results store) differs from one made before."""
    from mixerzoo.config import RunConfig

    named = {
        t: {k for k in ("layout", "table") if k in lv} for t, levels in MAD_LEVELS.items() for lv in levels
    }
    assert named == {
        "mad_in_context_recall": {"layout"},
        "mad_fuzzy_recall": {"layout"},
        "mad_noisy_recall": {"layout"},
        "mad_selective_copy": set(),
        "mad_compression": set(),
        "mad_memorization": {"table"},
    }
    task = {"name": "mad_fuzzy_recall", "vocab_size": 16}
    run = {"data": {"task": task}, "model": {"d_model": 8, "n_layers": 1}}
    with_layout = {"data": {"task": {**task, "layout": "madlab"}}, "model": run["model"]}
    assert RunConfig.model_validate(run).config_hash() != RunConfig.model_validate(with_layout).config_hash()


@pytest.mark.parametrize("task", MAD_TASKS)
def test_every_level_builds(task):
    for level in MAD_LEVELS[task]:
        params, data = split_level(level)
        assert set(data) == {"num_train_examples", "num_test_examples"}
        build_task(task, **params)
