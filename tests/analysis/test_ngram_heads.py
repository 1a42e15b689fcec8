"""The icll-fig3 study (ICLL Sec. 5.1, Fig. 3: n-gram heads): key sets and selectivities of
hand-made attention maps against brute-force loops, the choice of the previous-token and n-gram
heads, the claims on hand-made cells, and a tiny run of a few training steps."""

from __future__ import annotations

import numpy as np
import pytest

from mixerzoo.analysis import ngram_heads
from mixerzoo.analysis.ngram_heads import (
    KEY_SETS,
    combine_instances,
    eligible_queries,
    generating_states,
    instance_summary,
    key_sets,
    model_cells,
    row_measures,
)
from mixerzoo.claims import INCONCLUSIVE, NOT_REPRODUCED, REPRODUCED, evaluate_claims
from mixerzoo.registry import ConfigError
from mixerzoo.studies.computed.files import load_theory, resolve_params, run_theory
from mixerzoo.tasks import build_task

# "a b c c b d a b | c b c a b": symbols a-d (1-4), separator 5, and the state after each token of
# the DFA 0 -a-> 1 -b-> 2 -c-> 0, 0 -c-> 4 -b-> 2, 2 -d-> 3 -a-> 1
TOKENS = np.array([1, 2, 3, 3, 2, 4, 1, 2, 5, 3, 2, 3, 1, 2])
STATES = np.array([1, 2, 0, 4, 2, 3, 1, 2, 0, 4, 2, 0, 1, 2])
SYMBOL = (TOKENS >= 1) & (TOKENS <= 4)
TF = {"mixer": {"name": "attention", "num_heads": 1}, "position": "learned"}


def brute_sets(t, s, sym, i) -> dict[str, set[int]]:
    """The key sets of query row ``i``, one key at a time (the module docstring's definitions)."""
    emitted_from = [0] + [int(x) for x in s[:-1]]
    out = {"previous": {i - 1}, "bigram": set(), "unigram": set(), "state": set()}
    for j in range(i):
        if not sym[j]:
            continue
        if j >= 1 and t[j - 1] == t[i]:
            if j >= 2 and t[j - 2] == t[i - 1]:
                out["bigram"].add(j)
            else:
                out["unigram"].add(j)
        if emitted_from[j] == s[i]:
            out["state"].add(j)
    return out


def regbench_instance(seed: int = 0):
    """The first test instance of a RegBench task with few symbols (so 2-grams recur)."""
    task = build_task(
        "regbench", num_symbols=5, min_alphabet=3, max_string_len=6, min_strings=8, max_strings=10, seq_len=96
    )
    data = task.make(2, seed, "test")
    n = int(data.extras["length"][0])
    a = int(data.extras["transitions"].shape[2])
    t = data.inputs[0, :n]
    return t, data.extras["state"][0, :n], (t >= 1) & (t <= a)


def as_masks(sets: dict[str, set[int]], length: int) -> dict[str, np.ndarray]:
    return {k: np.isin(np.arange(length), sorted(v)) for k, v in sets.items()}


@pytest.mark.parametrize("source", ["hand", "regbench"])
def test_key_sets_equal_brute_force_loops(source):
    t, s, sym = (TOKENS, STATES, SYMBOL) if source == "hand" else regbench_instance()
    queries = np.arange(1, len(t))
    got = key_sets(t, s, sym, queries)
    for row, i in enumerate(queries):
        want = as_masks(brute_sets(t, s, sym, int(i)), len(t))
        for k in KEY_SETS:
            np.testing.assert_array_equal(got[k][row], want[k], err_msg=f"{source} {k} row {i}")


def test_the_hand_made_sets_read_as_fig3_describes():
    # query 13 ends in the 2-gram "a b"; "a b" occurred before at 0-1 (then c) and 6-7 (then the separator)
    sets = key_sets(TOKENS, STATES, SYMBOL, np.array([13]))
    sets = {k: set(np.flatnonzero(v[0]).tolist()) for k, v in sets.items()}
    assert sets["previous"] == {12}
    assert sets["bigram"] == {2}  # the separator after "a b" (8) is no key of any set
    assert sets["unigram"] == {5, 11}  # d after "c b", c after "c b": b's 1-gram prefix only
    assert sets["state"] == {2, 5, 11}  # the keys emitted from state 2, where the next token comes from
    assert list(generating_states(STATES)[:5]) == [0, 1, 2, 0, 4]
    assert list(eligible_queries(TOKENS, STATES, SYMBOL, 2)) == [7, 10, 11, 13]


def test_eligible_queries_equal_brute_force():
    for t, s, sym in (regbench_instance(1), (TOKENS, STATES, SYMBOL)):
        want = []
        for i in range(3, len(t)):
            b = brute_sets(t, s, sym, i)
            if sym[i] and sym[i - 1] and b["bigram"] and b["unigram"] and b["state"]:
                want.append(i)
        np.testing.assert_array_equal(eligible_queries(t, s, sym, 3), want)


def test_a_previous_token_map_puts_all_its_weight_on_the_previous_token():
    l = len(TOKENS)
    prev = np.zeros((l, l))
    prev[0, 0] = 1.0
    prev[np.arange(1, l), np.arange(l - 1)] = 1.0
    queries = eligible_queries(TOKENS, STATES, SYMBOL, 2)
    summary = instance_summary(row_measures(prev, queries, key_sets(TOKENS, STATES, SYMBOL, queries)))
    assert summary["previous"]["mass"] == pytest.approx(1.0)
    assert summary["previous"]["selectivity"] == pytest.approx(np.mean(queries + 1.0))  # 1 / (1 / (i + 1))


def test_uniform_attention_has_selectivity_one_on_every_set():
    t, s, sym = regbench_instance(2)
    l = len(t)
    uniform = np.tril(np.ones((l, l))) / np.arange(1, l + 1)[:, None]
    queries = eligible_queries(t, s, sym, 4)
    assert queries.size
    measured = row_measures(uniform, queries, key_sets(t, s, sym, queries))
    for k in KEY_SETS:
        mass, share = measured[k]
        np.testing.assert_allclose(mass, share)
        assert instance_summary(measured)[k]["selectivity"] == pytest.approx(1.0)


def test_a_map_spread_over_the_bigram_matches_has_selectivity_one_over_their_share():
    t, s, sym = regbench_instance(3)
    l = len(t)
    queries = eligible_queries(t, s, sym, 4)
    assert queries.size
    hand = np.zeros((l, l))
    shares = []
    for i in queries:  # the map, and the expected numbers, built key by key
        matches = sorted(brute_sets(t, s, sym, int(i))["bigram"])
        for j in matches:
            hand[i, j] = 1.0 / len(matches)
        shares.append(len(matches) / (i + 1))
    for i in set(range(l)) - set(queries.tolist()):
        hand[i, i] = 1.0
    measured = row_measures(hand, queries, key_sets(t, s, sym, queries))
    np.testing.assert_allclose(measured["bigram"][0], 1.0)
    np.testing.assert_allclose(measured["bigram"][0] / measured["bigram"][1], 1.0 / np.array(shares))
    np.testing.assert_allclose(measured["unigram"][0], 0.0)
    assert instance_summary(measured)["bigram"]["selectivity"] == pytest.approx(
        np.mean(1.0 / np.array(shares))
    )


def test_rows_are_read_as_distributions_and_layers_keep_their_shape():
    l = len(TOKENS)
    uniform = np.tril(np.ones((l, l)))  # rows not normalized: each is divided by its sum
    maps = np.stack([uniform, 3.0 * uniform])[:, None]  # [layers 2, heads 1, l, l]
    queries = np.array([7, 13])
    measured = row_measures(maps, queries, key_sets(TOKENS, STATES, SYMBOL, queries))
    assert measured["bigram"][0].shape == (2, 1, 2)
    np.testing.assert_allclose(measured["bigram"][0][0], measured["bigram"][0][1])


def test_the_error_is_that_of_the_instances_means():
    per = [
        {"bigram": {"mass": np.array([m]), "selectivity": np.array([2 * m]), "share": 0.1}}
        for m in (0.2, 0.4, 0.9)
    ]
    out = combine_instances(per)["bigram"]
    means = np.array([0.2, 0.4, 0.9])
    assert out["mass"][0][0] == pytest.approx(means.mean())
    assert out["mass"][1][0] == pytest.approx(means.std(ddof=1) / np.sqrt(3))
    assert out["selectivity"][0][0] == pytest.approx(2 * means.mean())
    assert combine_instances(per[:1])["bigram"]["mass"][1] is None


# -- choosing the heads the claims read ----------------------------------------------------------
def readings(prev: list[float], bigram: list[float], instances: int = 10) -> dict:
    """Combined readings of a 1-head model: per-layer previous-token mass and bigram selectivity."""
    n = len(prev)
    sel = {"previous": [p * 50 for p in prev], "bigram": bigram, "unigram": [1.0] * n, "state": [1.5] * n}
    mass = {"previous": prev, "bigram": [0.1] * n, "unigram": [0.1] * n, "state": [0.2] * n}
    out: dict = {"instances": instances}
    for k in KEY_SETS:
        out[k] = {
            "share": 0.1,
            "mass": (np.array(mass[k])[:, None], np.full((n, 1), 0.01)),
            "selectivity": (np.array(sel[k])[:, None], np.full((n, 1), 0.1)),
        }
    return out


def params(n_layers: int = 4):
    sets = {"models": {"TF": {**TF, "n_layers": n_layers}}}
    return resolve_params(load_theory("icll-fig3"), "quick", sets)[1]


def summary(cells, layer, keys="bigram"):
    return next(c for c in cells if c["layer"] == layer and c["keys"] == keys)


def test_the_ngram_head_is_chosen_after_the_first_previous_token_layer():
    base = {"variant": "TF", "model_tvd_gain": 0.1}
    # layer 1 has the largest bigram selectivity, but the first previous-token layer is 2
    cells = model_cells(params(), "TF", base, readings([0.1, 0.8, 0.6, 0.1], [9.0, 2.0, 3.0, 5.0]), 40)
    ngram = summary(cells, "ngram")
    assert (ngram["best_layer"], ngram["best_head"], ngram["selectivity"]) == (4, 0, 5.0)
    assert ngram["previous_token_before"] == 0.8 and ngram["previous_token_layer"] == 2
    early = summary(cells, "early", "previous")
    assert (early["best_layer"], early["mass"]) == (2, 0.8)  # the first half: layers 1-2 of 4
    # no previous-token head: layers 2 .. n_layers, and the premise reads the weak head before it
    cells = model_cells(params(), "TF", base, readings([0.1, 0.2, 0.3, 0.1], [9.0, 2.0, 7.0, 5.0]), 40)
    ngram = summary(cells, "ngram")
    assert ngram["best_layer"] == 3 and ngram["previous_token_before"] == 0.2
    assert ngram["se:previous_token_before"] == 0.01


def test_plan_cells_are_every_layer_head_and_key_set_and_the_two_summaries():
    p = params(3)
    cells = ngram_heads.plan_cells(p.model_dump(mode="json"))
    layers = [(c["layer"], c["head"]) for c in cells if c["keys"] == "bigram"]
    assert layers == [(1, 0), (2, 0), (3, 0), ("early", "best"), ("ngram", "best")]
    assert len(cells) == 5 * len(KEY_SETS)


# -- the claims ---------------------------------------------------------------------------------
def judged(cells) -> list[str]:
    exp = load_theory("icll-fig3")
    out = evaluate_claims(
        exp.claims, cells, "selectivity", axes=["variant", "layer", "head", "keys"], directions=exp.metrics
    )
    return [c["verdict"] for c in out]


def fig3_cells(prev, bigram, unigram, state, gain=0.1):
    r = readings(prev, bigram)
    r["unigram"]["selectivity"] = (np.array(unigram)[:, None], np.full((len(prev), 1), 0.1))
    r["state"]["selectivity"] = (np.array(state)[:, None], np.full((len(prev), 1), 0.1))
    return model_cells(params(len(prev)), "TF", {"variant": "TF", "model_tvd_gain": gain}, r, 100)


def test_claims_on_hand_made_cells():
    # Fig. 3: previous-token heads in layers 2 and 3, the n-gram head in layer 5 of 8
    prev = [0.1, 0.9, 0.8, 0.1, 0.1, 0.1, 0.1, 0.1]
    paper = fig3_cells(prev, [1, 1, 1, 2, 8, 1, 1, 1], [1.0] * 8, [2.0] * 8)
    assert judged(paper) == [REPRODUCED] * 4
    # no previous-token head, and an n-gram head that prefers the 1-gram prefix and the PFA state
    flipped = fig3_cells([0.1] * 8, [1, 1, 1, 2, 3, 1, 1, 1], [5.0] * 8, [6.0] * 8)
    assert judged(flipped) == [NOT_REPRODUCED, INCONCLUSIVE, NOT_REPRODUCED, NOT_REPRODUCED]
    # a model that did not learn in context: nothing is read from its maps
    untrained = fig3_cells(prev, [1, 1, 1, 2, 8, 1, 1, 1], [1.0] * 8, [2.0] * 8, gain=-0.05)
    assert judged(untrained) == [INCONCLUSIVE] * 4
    # every selectivity at uniform attention's 1: no bigram head, a tie at chance
    uniform = fig3_cells(prev, [1.0] * 8, [1.0] * 8, [1.0] * 8)
    assert judged(uniform)[1:] == [INCONCLUSIVE] * 3


# -- the study file and a tiny run -------------------------------------------------------------
def test_config_loads_and_the_paper_preset_is_fig3s_model():
    exp = load_theory("icll-fig3")
    assert exp.kind == "probe" and exp.default_preset == "quick" and len(exp.claims) == 4
    paper = resolve_params(exp, "paper", {})[1]
    (section,) = paper.models.values()
    assert section["n_layers"] == 8 and section["mixer"]["num_heads"] == 1
    # quick: the 4-layer Transformer of icll-fig2d's quick recipe on three times its fresh instances
    # (on 40,000 it had no previous-token head)
    quick = resolve_params(exp, "quick", {})[1]
    assert list(quick.models) == ["TF/4"] and quick.n_train == 120000 and quick.train["epochs"] == 3
    assert quick.map_instances <= quick.n_test
    assert paper.n_train == 2500 and paper.train["lr"] == 2.5e-4
    claimed = {a for c in exp.claims for a in c.axes_named()}
    assert claimed <= {"variant", "layer", "head", "keys"}


@pytest.mark.parametrize(
    "sets,needle",
    [
        ({"models": {"GLA": {"mixer": "gla", "n_layers": 2}}}, "models.GLA"),
        ({"models": {"TF": {**TF, "n_layers": 1}}}, "models.TF"),
        ({"min_query": 500}, "min_query"),
        ({"task": {"name": "mqar"}}, "task.name"),
    ],
)
def test_bad_parameters_are_one_line(sets, needle):
    with pytest.raises(ConfigError) as err:
        resolve_params(load_theory("icll-fig3"), "quick", sets)
    assert needle in str(err.value) and "\n" not in str(err.value)


TINY = {
    "task": {
        "name": "regbench",
        "preset": "paper",
        "num_symbols": 6,
        "min_alphabet": 3,
        "max_string_len": 4,
        "min_strings": 8,
        "max_strings": 10,
        "seq_len": 48,
    },
    "n_train": 16,
    "n_test": 8,
    "d_model": 16,
    "models": {"TF/2": {**TF, "n_layers": 2}},
    "train": {"epochs": 1, "batch_size": 8, "lr": 1e-3, "eval_every": 1000},
    "map_instances": 8,
    "queries": 4,
    "min_query": 4,
}


def test_a_tiny_run_gives_every_planned_cell_the_claims_read_and_the_figures(tmp_path):
    exp = load_theory("icll-fig3")
    payload = run_theory(exp, "quick", TINY, log=lambda _: None, out_dir=tmp_path)
    cells = payload["cells"]
    params_ = resolve_params(exp, "quick", TINY)[1].model_dump(mode="json")
    assert [{k: c[k] for k in ("variant", "layer", "head", "keys")} for c in cells] == ngram_heads.plan_cells(
        params_
    )
    for c in cells:
        assert c["mass"] is not None and 0.0 <= c["mass"] <= 1.0 + 1e-6
        assert c["selectivity"] >= 0 and c["chance:selectivity"] == 1.0 and "se:selectivity" in c
        assert c["model_tvd_gain"] == pytest.approx(c["unigram_regbench_tvd"] - c["model_regbench_tvd"])
    ngram = [c for c in cells if c["layer"] == "ngram"]
    assert all(c["best_layer"] == 2 and "previous_token_before" in c for c in ngram)
    # every claim found its cells: a verdict, never "not run"
    assert [c["verdict"] for c in payload["claims"]].count("not run") == 0
    names = sorted(p.rsplit("/", 1)[-1] for p in payload["figures"])
    assert names == [
        "icll-fig3-TF-2-early-layer1.png",
        "icll-fig3-TF-2-ngram-layer2.png",
        "icll-fig3-selectivity.png",
    ]
