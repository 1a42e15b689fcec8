"""ICLL Figs. 4-6 as theory experiments (mixerzoo/analysis/icll_probes.py, icll_pairwise.py).

Each config loads with every preset; a tiny ``--set`` run of each finishes fast and yields cells
on the axes and metrics its claims read; the shared probe samples equal the probes module's own
sampler; cutting instances to the first tokens leaves the pairwise TVD unchanged.
"""

from __future__ import annotations

import numpy as np
import pytest

from mixerzoo.analysis import icll_pairwise, icll_probes
from mixerzoo.analysis.icll_pairwise import baseline_distributions, first_tokens
from mixerzoo.analysis.icll_probes import CountTable
from mixerzoo.analysis.pairwise_tvd import pairwise_tvd
from mixerzoo.analysis.probes import sample_ngram_queries
from mixerzoo.evaluation.regbench_metrics import score_distributions
from mixerzoo.registry import ConfigError
from mixerzoo.studies.computed.files import load_theory, resolve_params, run_theory
from mixerzoo.tasks import build_task

TINY_TASK = {
    "name": "regbench",
    "preset": "paper",
    "max_string_len": 4,
    "min_strings": 3,
    "max_strings": 4,
    "seq_len": 24,
}
TINY_TRAIN = {"epochs": 1, "batch_size": 8, "lr": 1e-3, "eval_every": 1000}
TF = {"mixer": {"name": "attention", "num_heads": 1}, "position": "rope", "n_layers": 1}


def tiny_data(n: int = 12, seed: int = 0):
    task = build_task("regbench", **{k: v for k, v in TINY_TASK.items() if k != "name"})
    return task.make(n, seed, "test")


@pytest.mark.parametrize("name", ["icll-fig4", "icll-fig5", "icll-fig6"])
def test_config_loads_with_every_preset(name):
    exp = load_theory(name)
    assert exp.claims and exp.default_preset == "quick"
    for preset in exp.presets:
        _, params = resolve_params(exp, preset, {})
        assert params.models
    claimed = {a for c in exp.claims for a in c.axes_named()}
    assert claimed <= {"variant", "task", "layer", "a", "b"}


def test_fig6_is_fig4_with_more_training_instances():
    """In the paper preset Fig. 6 is Fig. 4 with 40,000 training instances (App. E). At quick both
    read Fig. 6's 40,000 (icll-fig4's quick deviation: on 2,500 instances no model learns in
    context at the quick budget), so there the two presets hold one setting."""
    exp4, exp6 = load_theory("icll-fig4"), load_theory("icll-fig6")
    for preset in ("quick", "paper"):
        fig4, fig6 = (resolve_params(e, preset, {})[1].model_dump() for e in (exp4, exp6))
        assert fig6["n_train"] > fig4["n_train"] if preset == "paper" else fig6["n_train"] == fig4["n_train"]
        differ = {k for k in fig4 if fig4[k] != fig6[k]}
        assert differ <= {"n_train", "train", "figure"}
    assert resolve_params(exp6, "paper", {})[1].n_train == 40000  # App. E, Fig. 6
    assert resolve_params(exp6, "quick", {})[1].n_train == 40000
    # the same statements (Sec. 5.2 on Fig. 4), checked in Fig. 6's setting
    strip = lambda c: {**c.model_dump(), "paper_ref": None}  # noqa: E731
    assert [strip(c) for c in exp4.claims] == [strip(c) for c in exp6.claims]


def _tiny_probe_sets():
    gla = {"mixer": {"name": "gla", "num_heads": 1}, "n_layers": 1}
    return {
        "task": TINY_TASK,
        "n_train": 16,
        "n_test": 8,
        "d_model": 8,
        "models": {"TF/2": TF, "TF/4": {**TF, "n_layers": 2}, "GLA/2": gla},
        "train": TINY_TRAIN,
        "orders": [3],
        "probe": "mlp",
        "probe_steps": 3,
        "probe_train": 40,
        "probe_test": 20,
    }


def test_tiny_probe_run_gives_every_claim_cells():
    exp = load_theory("icll-fig4")
    payload = run_theory(exp, "quick", _tiny_probe_sets(), log=lambda _: None)
    cells = payload["cells"]
    tasks = {"count-3", "frequency-3", "existence-3", "state"}
    assert {c["task"] for c in cells} == tasks
    for label, layers in (("TF/2", 2), ("TF/4", 3), ("GLA/2", 2)):  # layer 0 = embeddings
        for task in tasks:
            mine = [c for c in cells if c["variant"] == label and c["task"] == task]
            assert sorted(c["layer"] for c in mine if c["layer"] != "best") == list(range(layers))
            metric = "accuracy" if task.startswith(("existence", "state")) else "relative_error"
            per_layer = [c[metric] for c in mine if c["layer"] != "best"]
            # the best layer is chosen on the validation instances; the test instances report it
            valid = [c[f"valid_{metric}"] for c in mine if c["layer"] != "best"]
            (best,) = [c for c in mine if c["layer"] == "best"]
            chosen = valid.index(max(valid) if metric == "accuracy" else min(valid))
            assert best["best_layer"] == chosen and best[metric] == per_layer[chosen]
    # every cell carries its noise with the test instances as the units (8 of them here, however
    # many samples the probes draw from them): never the samples counted as independent
    from mixerzoo.claims.noise import standard_error

    for c in cells:
        metric = "accuracy" if "accuracy" in c else "relative_error"
        assert 2 <= c["n_test"] <= 8 and standard_error(c, metric) > 0, c
    assert {c["family"] for c in cells if c["variant"].startswith("TF")} == {"transformer"}
    assert {c["family"] for c in cells if c["variant"] == "GLA/2"} == {"other"}
    # an accuracy's floor is the share of its commonest answer among the test samples
    for c in cells:
        if "accuracy" in c:
            assert 0.5 <= c["chance:accuracy"] <= 1.0, c
    # every claim found its cells: a verdict, or (the claims the quick preset cannot decide, with
    # the measured reason) "not run" with what its cells gave kept after the reason
    for claim in payload["claims"]:
        if claim["verdict"] == "not run":
            assert claim["evidence"].startswith("paper preset only: "), claim
            assert "; measured here: " in claim["evidence"] and "no cell" not in claim["evidence"]
    assert [c["verdict"] for c in payload["claims"]].count("not run") == 1
    # the cells planned before running are the cells the run made
    params = resolve_params(exp, "quick", _tiny_probe_sets())[1]
    axes = [{k: c[k] for k in ("variant", "task", "layer")} for c in cells]
    assert icll_probes.plan_cells(params.model_dump(mode="json")) == axes
    # each model's TVD against the in-context unigram's on the same test instances
    unigram = icll_probes.in_context_unigram_tvd(icll_probes.regbench_data(params)[1])
    assert all(c["model_tvd_gain"] == pytest.approx(unigram - c["model_regbench_tvd"]) for c in cells)


def test_tiny_pairwise_run_gives_every_claim_cells():
    exp = load_theory("icll-fig5")
    sets = {
        "task": TINY_TASK,
        "n_train": 16,
        "n_test": 6,
        "d_model": 8,
        "models": {"TF": {**TF, "n_layers": 2}, "TF/2": TF},
        "train": TINY_TRAIN,
        "baselines": {
            "1-gram": {"name": "ngram", "n": 1},
            "2-gram": {"name": "ngram", "n": 2},
            "3-gram": {"name": "ngram", "n": 3},
            "LNW": {"name": "lnw", "features": "counts", "hidden": 8, "epochs": 1},
            "LNW_r": {"name": "lnw", "features": "frequency", "hidden": 8, "epochs": 1},
            "BW": {"name": "baum_welch", "num_pfa_states": 2, "iterations": 1},
            "DFA": {"name": "true"},
        },
        "max_tokens": 10,
        "reference_seeds": 1,
    }
    payload = run_theory(exp, "quick", sets, log=lambda _: None)
    cells = payload["cells"]
    names = ["TF", "TF/2", "1-gram", "2-gram", "3-gram", "LNW", "LNW_r", "BW", "DFA"]
    pairs = {(c["a"], c["b"]): c["tvd"] for c in cells if "@seed" not in c["b"]}
    assert set(pairs) == {(a, b) for a in names for b in names if a != b}
    for (a, b), v in pairs.items():
        assert pairs[b, a] == v and 0.0 <= v <= 1.0
    assert [c["b"] for c in cells if "@seed" in c["b"]] == ["TF@seed1"]
    # every distance carries its error over the test instances, so claims judge it with a margin
    assert all(c["se:tvd"] >= 0.0 for c in cells) and any(c["se:tvd"] > 0.0 for c in cells)
    assert [c["verdict"] for c in payload["claims"]].count("not run") == 0
    params = resolve_params(exp, "quick", sets)[1].model_dump(mode="json")
    assert icll_pairwise.plan_cells(params) == [{"a": c["a"], "b": c["b"]} for c in cells]
    # each model against the true PFA: how much closer to it than the in-context unigram
    gains = {c["a"]: c["unigram_tvd_gain"] for c in cells if "unigram_tvd_gain" in c}
    assert set(gains) == {"TF", "TF/2"}
    assert gains["TF"] == pytest.approx(pairs["1-gram", "DFA"] - pairs["TF", "DFA"])


def test_probe_layers_are_chosen_on_languages_of_neither_the_training_nor_the_test_split():
    params = resolve_params(load_theory("icll-fig4"), "quick", _tiny_probe_sets())[1]
    train, test = icll_probes.regbench_data(params)
    valid = icll_probes.valid_instances(params, 8)
    key = lambda t: t.tobytes()  # noqa: E731  (a language is its transition table)
    seen = {key(t) for t in train.extras["transitions"]} | {key(t) for t in test.extras["transitions"]}
    assert len(valid) == 8 and not any(key(t) in seen for t in valid.extras["transitions"])
    # drawing validation samples leaves the training and test samples as drawn without them
    samples = icll_probes._ngram_samples(params, train, test, valid)
    rng = np.random.default_rng(params.seed)
    alone = (
        CountTable(train, 3).sample(train, "count", 40, rng),
        CountTable(test, 3).sample(test, "count", 20, rng),
    )
    for drawn, before in zip(samples["count", 3][:2], alone, strict=True):
        np.testing.assert_array_equal(drawn.pos, before.pos)
        np.testing.assert_array_equal(drawn.target, before.target)


def test_count_table_draws_the_probes_module_samples():
    data = tiny_data(8)
    for n in (1, 3):
        for target in ("count", "frequency", "existence"):
            a = sample_ngram_queries(data, n, target, 40, np.random.default_rng(5))
            b = CountTable(data, n).sample(data, target, 40, np.random.default_rng(5))
            for field in ("row", "pos", "query", "target"):
                np.testing.assert_array_equal(getattr(a, field), getattr(b, field))


def test_cutting_to_the_first_tokens_keeps_the_pairwise_tvd():
    data = tiny_data(8, seed=3)
    k = 9
    cut = first_tokens(data, k)
    assert cut.inputs.shape == (8, k) and cut.extras["state"].shape == (8, k)
    specs = {
        "2-gram": {"name": "ngram", "n": 2},
        "3-gram": {"name": "ngram", "n": 3},
        "DFA": {"name": "true"},
    }
    full = {label: baseline_distributions(s, data, data) for label, s in specs.items()}
    short = {label: baseline_distributions(s, data, cut) for label, s in specs.items()}
    names, d_full = pairwise_tvd(full, data, max_tokens=k)
    _, d_short = pairwise_tvd(short, cut, max_tokens=k)
    np.testing.assert_allclose(d_short, d_full, atol=1e-6)
    # against the true PFA the pairwise TVD is Eq. 9's score of the predictor
    assert d_short[0, 2] == pytest.approx(score_distributions(short["2-gram"], cut)["tvd"], abs=1e-6)


@pytest.mark.parametrize(
    ("name", "sets", "needle"),
    [
        ("icll-fig4", {"models": {"TF/2": {"mixer": "no_such_mixer"}}}, "models.TF/2"),
        ("icll-fig4", {"task": {"name": "mqar"}}, "task.name"),
        ("icll-fig5", {"baselines": {"X": {"name": "ngram", "n": 0}}}, "baselines.X"),
        ("icll-fig5", {"baselines": {"X": {"n": 2}}}, "baselines.X"),
    ],
)
def test_bad_parameters_are_one_line(name, sets, needle):
    with pytest.raises(ConfigError) as err:
        resolve_params(load_theory(name), "quick", sets)
    assert needle in str(err.value) and "\n" not in str(err.value)
