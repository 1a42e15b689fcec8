"""Experiment files: grid expansion, variants, rules, presets and one-line errors (issue 5)."""

import copy
import itertools

import pytest

from mixerzoo.config_paths import deep_merge, set_path
from mixerzoo.registry import ConfigError
from mixerzoo.studies.sweep.config import load_experiment, shipped_experiments

TINY = {
    "name": "tiny",
    "claim": "paper: everything works",
    "base": {
        "data": {"task": {"name": "mqar_cat", "vocab_size": 32, "seq_len": 16}, "n_train": 32, "n_test": 16},
        "model": {"d_model": 16},
        "train": {"epochs": 1, "batch_size": 16, "device": "cpu"},
    },
    "variants": {
        "cat-1L": {"model": {"n_layers": 1, "mixer": {"name": "cat", "conv_width": 3}}},
        "attention-2L": {"model": {"n_layers": 2, "mixer": "attention"}},
    },
    "grid": {"model.d_model": [8, 16], "data.task.seq_len": [8, 16], "train.lr": [1e-3, 1e-2]},
    "seeds": [0, 1],
    "aggregate": {"metric": "accuracy_per_query", "reduce": "max", "over": ["train.lr", "seed"]},
    "presets": {"quick": {"grid": {"model.d_model": [8]}, "variants": ["cat-1L"]}, "paper": {}},
}


def tiny(**changes):
    raw = copy.deepcopy(TINY)
    return deep_merge(raw, changes)


def test_grid_is_the_full_product_of_variants_axes_and_seeds():
    runs = load_experiment(tiny()).expand()
    expected = set(itertools.product(["cat-1L", "attention-2L"], [8, 16], [8, 16], [1e-3, 1e-2], [0, 1]))
    got = {
        (
            r.point["variant"],
            r.config.model.d_model,
            r.config.data.task.params["seq_len"],
            r.config.train.lr,
            r.config.train.seed,
        )
        for r in runs
    }
    assert got == expected and len(runs) == 32
    assert len({r.config_hash for r in runs}) == 32


def test_variants_merge_into_base_and_dotted_paths_reach_spec_params():
    runs = load_experiment(tiny()).expand()
    cat = [r for r in runs if r.point["variant"] == "cat-1L"]
    attn = [r for r in runs if r.point["variant"] == "attention-2L"]
    assert all(r.config.model.n_layers == 1 and r.config.model.mixer.name == "cat" for r in cat)
    assert all(r.config.model.mixer.params == {"conv_width": 3} for r in cat)
    assert all(r.config.model.n_layers == 2 and r.config.model.mixer.name == "attention" for r in attn)
    # data.task.seq_len wrote into the flat task spec; the task's other params are kept
    assert {r.config.data.task.params["vocab_size"] for r in runs} == {32}
    # model vocab/max_len default from the task, as in a single run config
    assert all(r.config.model.vocab_size == 32 for r in runs)


def test_cells_group_the_reduced_axes():
    runs = load_experiment(tiny()).expand()
    cells = {}
    for r in runs:
        cells.setdefault(r.cell_key, []).append(r)
    assert len(cells) == 2 * 2 * 2  # variant x d_model x seq_len
    for members in cells.values():
        assert sorted((m.config.train.lr, m.config.train.seed) for m in members) == sorted(
            itertools.product([1e-3, 1e-2], [0, 1])
        )
        assert set(members[0].cell) == {"variant", "model.d_model", "data.task.seq_len"}


def test_dotted_path_into_a_bare_mixer_name():
    exp = load_experiment(
        tiny(
            variants=None,
            grid={"model.mixer.conv_width": [3, 5]},
            base={"model": {"mixer": "cat", "n_layers": 1}},
        )
    )
    widths = [r.config.model.mixer.params["conv_width"] for r in exp.expand()]
    assert widths.count(3) == widths.count(5) == len(widths) // 2 > 0


def test_rules_and_exclude():
    exp = load_experiment(
        tiny(
            rules=[{"when": {"data.task.seq_len": 16, "model.d_model": [16]}, "set": {"data.n_train": 48}}],
            exclude=[{"variant": "attention-2L", "data.task.seq_len": 8}],
        )
    )
    runs = exp.expand()
    assert not [r for r in runs if r.point["variant"] == "attention-2L" and r.point["data.task.seq_len"] == 8]
    for r in runs:
        want = 48 if (r.point["data.task.seq_len"], r.point["model.d_model"]) == (16, 16) else 32
        assert r.config.data.n_train == want
    assert len(runs) == 32 - 8


def test_test_lengths_become_data_test_seq_lens():
    exp = load_experiment(tiny(test={"seq_lens": [8, 32], "n": 12}))
    r = exp.expand()[0]
    assert r.config.data.test_seq_lens == [8, 32] and r.config.data.n_test == 12
    assert r.config.model.max_len == 32  # covers the longest test length


def test_presets_select_variants_and_replace_axes():
    exp = load_experiment(tiny(), preset="quick")
    runs = exp.expand()
    assert {r.point["variant"] for r in runs} == {"cat-1L"}
    assert {r.config.model.d_model for r in runs} == {8}
    assert len(runs) == 1 * 1 * 2 * 2 * 2
    # null deletes an axis
    raw = tiny()
    raw["presets"]["quick"] = {"grid": {"train.lr": None}}
    exp = load_experiment(raw, preset="quick")
    assert "train.lr" not in exp.grid


def test_set_path_turns_bare_spec_into_mapping():
    raw = {"model": {"mixer": "cat"}}
    set_path(raw, "model.mixer.conv_width", 5)
    assert raw == {"model": {"mixer": {"name": "cat", "conv_width": 5}}}


@pytest.mark.parametrize(
    ("changes", "needles"),
    [
        ({"grid": {"model.d_modle": [8]}}, ["model.d_modle", "d_model"]),
        ({"grid": {"modle.d_model": [8]}}, ["modle.d_model", "data, model, train"]),
        ({"grid": {"data.task.seq_length": [8]}}, ["data.task.seq_length", "seq_len", "mqar_cat"]),
        ({"grid": {"model.mixer.conv_widht": [3]}}, ["model.mixer.conv_widht", "conv_width"]),
        ({"grid": {"model.d_model": [0]}}, ["d_model", "0", "greater than or equal to 1"]),
        ({"grid": {"train.schedule": ["cosinus"]}}, ["schedule", "cosinus", "cosine"]),
        ({"grid": {"model.d_model": []}}, ["model.d_model", "no values"]),
        ({"aggregate": {"over": ["train.lrr"]}}, ["train.lrr", "axes"]),
        ({"variants": {"x": {"model": {"mixer": "nope"}}}}, ["nope", "allowed", "cat"]),
        ({"figure": {"x": "data.task.vocab_size"}}, ["figure.x", "data.task.vocab_size"]),
    ],
)
def test_errors_name_the_path_the_value_and_what_is_allowed(changes, needles):
    with pytest.raises(ConfigError) as err:
        load_experiment(tiny(**changes)).expand()
    msg = str(err.value)
    assert "\n" not in msg
    for needle in needles:
        assert needle in msg, (needle, msg)


def test_unknown_preset_and_missing_presets():
    with pytest.raises(ConfigError, match="unknown preset 'fast'.*quick, paper"):
        load_experiment(tiny(), preset="fast")
    with pytest.raises(ConfigError, match="missing paper"):
        load_experiment(tiny(presets={"quick": {}, "paper": None}))
    with pytest.raises(ConfigError, match="unknown variant 'mamba-9L'"):
        load_experiment(tiny(presets={"quick": {"variants": ["mamba-9L"]}, "paper": {}}), preset="quick")


def test_unknown_top_level_field():
    with pytest.raises(ConfigError, match="unknown field 'grids'"):
        load_experiment(tiny(grids={"model.d_model": [8]}))


def test_unknown_experiment_name_lists_shipped_ones():
    with pytest.raises(ConfigError, match="shipped: .*cat-mqar"):
        load_experiment("no-such-experiment")


@pytest.mark.parametrize("name", sorted(shipped_experiments()))
@pytest.mark.parametrize("preset", ["quick", "paper"])
def test_every_shipped_experiment_validates(name, preset):
    exp = load_experiment(name, preset=preset)
    runs = exp.expand()
    assert exp.claim.startswith(("paper", "none: no paper"))
    # a preset plans runs unless it is paper only, which says why (never the paper preset)
    assert bool(runs) != bool(exp.paper_only) and not (preset == "paper" and exp.paper_only)
    assert len({r.config_hash for r in runs}) == len(runs)


def test_cat_mqar_paper_preset_is_app_c1():
    runs = load_experiment("cat-mqar", preset="paper").expand()
    assert {r.config.train.lr for r in runs} == {1e-3, 1e-2, 1e-1}
    assert {r.config.train.epochs for r in runs} == {64}
    assert {r.config.model.d_model for r in runs} == {32, 64, 128}
    mqar = [r for r in runs if r.config.data.task.name == "mqar_cat"]
    assert {r.config.data.task.params["seq_len"] for r in mqar} == {64, 128, 256, 512}
    assert {(r.config.data.n_train, r.config.data.n_test) for r in mqar} == {(100_000, 3_000)}
    nar = [r for r in runs if r.config.data.task.name == "mqnar"]
    assert {r.config.data.task.params["seq_len"] for r in nar} == {64, 128, 256}
    assert {r.config.data.n_train for r in nar} == {200_000}
    one_layer = {r.point["variant"] for r in runs if r.config.model.n_layers == 1}
    assert one_layer == {"cat-1L", "lincat-1L"}


def test_zoology_batch_size_rules_follow_e2():
    for r in load_experiment("zoology-mqar-dmodel", preset="paper").expand():
        size = max(r.config.data.task.params["seq_len"], r.config.model.d_model)
        want = 8 if size >= 512 else 16 if size >= 256 else 64
        assert r.config.train.batch_size == want
        kv = {64: 4, 128: 8, 256: 16, 512: 64}[r.config.data.task.params["seq_len"]]
        assert r.config.data.task.params["num_kv_pairs"] == kv
