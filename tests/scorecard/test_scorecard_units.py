"""The scorecard's parts that need no training: the battery, an item's experiment, state, ranks."""

import re

import pytest

from mixerzoo.registry import ConfigError
from mixerzoo.studies.scorecard.battery import load_battery
from mixerzoo.studies.scorecard.candidate import candidate, inference_state
from mixerzoo.studies.scorecard.items import Score, item_experiment
from mixerzoo.studies.scorecard.table import column_note, rank_column


def _item(battery, key, preset="quick"):
    return next(i for i in battery.preset(preset).items if i.key == key)


def test_every_quick_item_is_one_cell_for_every_reference():
    battery = load_battery()
    assert len(battery.references) >= 12
    for name in battery.references:
        for item in battery.preset("quick").items:
            runs = item_experiment(item, "quick", candidate(name)).expand()
            assert len({r.cell_key for r in runs}) == 1, (name, item.key)


def test_the_mixer_replaces_the_studys_variants_and_no_base_parameter_leaks():
    battery = load_battery()
    # las-table7-atomic's base model is attention with 8 heads: an LSTM gets none of it
    (run, *_) = item_experiment(_item(battery, "cumsum"), "quick", candidate("lstm")).expand()
    assert run.config.model.mixer.name == "lstm" and run.config.model.mixer.params == {}
    assert run.point["variant"] == "lstm"
    # ICLL's grid sets the heads: kept for GLA, which has them, dropped for the LSTM
    gla = item_experiment(_item(battery, "regbench"), "quick", candidate("gla")).expand()
    assert [r.config.model.mixer.params.get("num_heads") for r in gla] == [2]
    lstm = item_experiment(_item(battery, "regbench"), "quick", candidate("lstm")).expand()
    assert len(lstm) == 1 and lstm[0].config.model.mixer.params == {}


def test_the_cell_is_the_studys_cell_under_its_recipe():
    battery = load_battery()
    (run,) = item_experiment(_item(battery, "mqar-L128-d64"), "quick", candidate("attention")).expand()
    # zoology-mqar-dmodel: D = 8 pairs at L = 128 (its rule), its quick recipe (lr 1e-3, early stop)
    assert run.config.data.task.params["seq_len"] == 128 and run.config.data.task.params["num_kv_pairs"] == 8
    assert run.config.model.d_model == 64 and run.config.train.lr == 1e-3
    assert run.config.train.early_stop_accuracy == 0.99


def test_a_cell_naming_an_unknown_axis_is_one_line():
    raw = {
        "name": "t",
        "presets": {
            "quick": {
                "items": [
                    {"key": "a", "group": "recall", "study": "zoology-mqar-dmodel", "cell": {"model.nope": 3}}
                ]
            }
        },
    }
    battery = load_battery(raw)
    with pytest.raises(ConfigError, match="not an axis of zoology-mqar-dmodel"):
        item_experiment(battery.preset("quick").items[0], "quick", candidate("gla"))


def test_a_cell_that_leaves_several_cells_is_refused():
    raw = {
        "name": "t",
        "presets": {"quick": {"items": [{"key": "a", "group": "long_range", "study": "las-table7-atomic"}]}},
    }
    with pytest.raises(ConfigError, match="narrows las-table7-atomic to 3 cells"):
        item_experiment(load_battery(raw).preset("quick").items[0], "quick", candidate("gla"))


def test_length_generalization_trains_at_64_and_tests_to_8x():
    battery = load_battery()
    (run,) = item_experiment(_item(battery, "lengthgen-8x"), "quick", candidate("attention")).expand()
    # cat-length-generalization's quick recipe (k = L/4 keys), at the scorecard's training length
    assert run.config.data.task.name == "mqar_cat" and run.config.data.task.params["seq_len"] == 64
    assert run.config.data.test_seq_lens == [64, 128, 256, 512] and run.config.train.epochs == 12
    assert _item(battery, "lengthgen-8x").metric == "accuracy@512"


def _mad_runs(mad):
    from mixerzoo.studies.scorecard.card import mad_item_experiment

    return [p.config for p in mad_item_experiment(candidate("attention"), mad, "quick").expand()]


def test_the_mad_item_keeps_the_grid_values_it_names_and_the_studys_others():
    from mixerzoo.studies.scorecard.battery import MadItem

    full, narrowed = _mad_runs(MadItem()), _mad_runs(MadItem(grid={"train.weight_decay": [0.0]}))
    assert {r.train.weight_decay for r in full} == {0.0, 0.1} and len(full) == 36
    assert {r.train.weight_decay for r in narrowed} == {0.0} and len(narrowed) == 18
    assert {r.train.lr for r in narrowed} == {r.train.lr for r in full}  # the lrs stay swept
    kept = {r.config_hash() for r in full if r.train.weight_decay == 0.0}
    assert {r.config_hash() for r in narrowed} == kept  # the same runs as the study's


def test_the_shipped_mad_item_sweeps_the_studys_whole_lr_and_weight_decay_grid():
    # weight decay 0 alone lowers Gated DeltaNet's in-context recall from 0.994 to 0.884
    runs = _mad_runs(load_battery().preset("quick").mad)
    assert {(r.train.lr, r.train.weight_decay) for r in runs} == {
        (lr, wd) for lr in (1e-4, 5e-4, 1e-3) for wd in (0.0, 0.1)
    }


@pytest.mark.parametrize(
    "grid, match",
    [
        ({"train.nope": [1]}, "'train.nope' is not a grid axis of mad"),
        ({"train.weight_decay": [0.3]}, r"\[0.3\] not among mad's values \[0.0, 0.1\]"),
        ({"train.weight_decay": []}, "not among mad's values"),
    ],
)
def test_a_mad_grid_value_the_study_does_not_sweep_is_one_line(grid, match):
    from mixerzoo.studies.scorecard.battery import MadItem

    with pytest.raises(ConfigError, match=match):
        _mad_runs(MadItem(grid=grid))


def test_a_battery_file_with_a_mad_grid_value_the_study_does_not_sweep_is_refused_when_it_loads():
    raw = {
        "kind": "scorecard",
        "name": "b",
        "presets": {"quick": {"mad": {"grid": {"train.weight_decay": [0.3]}}}},
    }
    with pytest.raises(ConfigError, match=r"mad.grid.train.weight_decay: \[0.3\] not among mad's values"):
        load_battery(raw)
    raw["presets"]["quick"]["mad"]["grid"] = {"train.weight_decay": [0.0]}
    assert load_battery(raw).preset("quick").mad.grid == {"train.weight_decay": [0.0]}


def test_state_is_zoologys_accounting():
    d, length = 64, 512
    assert inference_state({"mixer": "attention", "d_model": d, "n_layers": 2}, length) == (
        2 * 2 * d * length,
        False,
    )
    assert inference_state({"mixer": "cat", "d_model": d, "n_layers": 2}, length) == (
        2 * 2 * d * length,
        False,
    )
    assert inference_state({"mixer": "hyena", "d_model": d, "n_layers": 2}, length) == (2 * d * length, False)
    state, fixed = inference_state({"mixer": "mamba", "d_model": d, "n_layers": 2}, length)
    assert fixed and state == 2 * (2 * d) * 16  # (expand d) x d_state per layer, mamba's defaults
    # the recurrences' and gated convolutions' fixed states sit below attention's cache at the longest length
    for name in (
        "gla",
        "retnet",
        "based",
        "h3",
        "mamba2",
        "rwkv7",
        "gated_delta_net",
        "linear_attention",
        "lstm",
    ):
        assert inference_state({"mixer": name, "d_model": d, "n_layers": 2}, 2048)[0] < 2 * 2 * d * 2048, name


def _s(value, se=0.01, chance=0.0, metric="accuracy_per_query"):
    return Score("x", "recall", metric, value=value, se=se, chance=chance)


def test_ranks_tie_within_noise_and_order_beyond_it():
    ranks = rank_column({"a": _s(0.95), "b": _s(0.94), "c": _s(0.50)})
    assert ranks["a"].rank == ranks["b"].rank == 1 and ranks["a"].tie and ranks["b"].tie
    assert ranks["c"].rank == 3 and not ranks["c"].tie


def test_a_model_at_chance_is_not_ranked_and_a_column_of_them_says_so():
    scores = {"a": _s(0.01, chance=0.0), "b": _s(0.012, chance=0.0)}
    assert all(r.rank is None and r.note == "at chance" for r in rank_column(scores).values())
    assert column_note(scores) == "no model left chance: not ranked"


def test_lower_is_better_metrics_rank_the_lower_first():
    scores = {
        "a": _s(0.30, chance=0.62, metric="regbench_tvd"),
        "b": _s(0.50, chance=0.62, metric="regbench_tvd"),
    }
    ranks = rank_column(scores)
    assert ranks["a"].rank == 1 and ranks["b"].rank == 2
    assert _s(0.61, se=0.01, chance=0.62, metric="regbench_tvd").learned is False


def test_cli_without_a_mixer_is_one_line(run_cli):
    code, out, err = run_cli(["scorecard"])
    assert code == 2 and "name the mixer to score" in err and "Traceback" not in err


def test_study_show_lists_each_presets_battery_with_its_runs(run_cli):
    code, out, err = run_cli(["study", "show", "scorecard"])
    assert code == 0, err
    assert "quick (48 runs)" in out  # 12 item runs and MAD's 36
    assert "    lengthgen-8x: cat-length-generalization (data.task.name=mqar_cat" in out
    assert "data.task.seq_len=64, data.test_seq_lens=[64, 128, 256, 512])" in out
    assert "    mad: mad's six tasks (levels per task=1)" in out
    assert "    mad: mad's six tasks (levels per task=all)" in out  # the paper battery


def test_dry_run_lists_every_item_and_the_budget(run_cli):
    code, out, err = run_cli(["scorecard", "gla", "--dry-run"])
    assert code == 0, err
    battery = load_battery()
    lines = out.splitlines()
    for key in [item.key for item in battery.preset("quick").items] + ["mad"]:
        (line,) = [x for x in lines if x.split()[:1] == [key]]
        assert re.search(r"\b(1 run|\d+ runs), at most ~", line), line  # each item's own expected time
    assert "stated budget: 30 min" in out
    # an item's settings show beside its cell, as in `study show scorecard`
    (lengthgen,) = [x for x in lines if x.split()[:1] == ["lengthgen-8x"]]
    where = "(data.task.name=mqar_cat, model.d_model=64, data.task.seq_len=64, data.test_seq_lens="
    assert where in lengthgen


def test_against_an_unknown_reference_is_one_line(tmp_path):
    from mixerzoo.studies.scorecard.scoring import references_for

    with pytest.raises(ConfigError, match="--against: no reference 'nosuch'"):
        references_for(load_battery(), "quick", ["nosuch"], tmp_path)


def test_the_references_cost_is_their_whole_battery_not_the_last_rebuilds_new_runs():
    from mixerzoo.studies.scorecard.card import Card
    from mixerzoo.studies.scorecard.scoring import battery_seconds, expected_minutes

    def card(label, item_walls, rebuild_wall):
        scores = {f"i{k}": Score(f"i{k}", "recall", "accuracy", wall_s=w) for k, w in enumerate(item_walls)}
        return Card(label, label, "quick", scores=scores, wall_s=rebuild_wall)

    reused = card("a", [600.0, 1200.0], 60.0)  # a rebuild that reused most finished runs
    assert battery_seconds(reused) == 1800.0
    assert battery_seconds(card("b", [], 90.0)) == 90.0  # no item times recorded: the card's own
    assert expected_minutes([reused, card("c", [1200.0], 1200.0), card("d", [2400.0], 5.0)]) == 30.0
    assert expected_minutes([card("e", [], 0.0)]) is None


def test_items_narrow_the_battery_to_named_columns_and_groups():
    battery = load_battery()
    part = battery.narrowed("quick", ["recall", "select", "mad"])
    spec = part.preset("quick")
    assert [i.key for i in spec.items] == ["mqar-L64-d64", "mqar-L64-d128", "mqar-L128-d64", "select"]
    assert spec.mad is not None and spec.efficiency is None
    assert part.keys("quick") == ["mqar-L64-d64", "mqar-L64-d128", "mqar-L128-d64", "select", "mad"]
    assert len(battery.preset("quick").items) == 9  # the shipped battery is left whole
    with pytest.raises(ConfigError, match="--items: no column or group 'recal'; choose from mqar-L64-d64"):
        battery.narrowed("quick", ["recal"])


def test_a_part_of_the_scorecard_shows_the_references_on_those_columns_only():
    from mixerzoo.studies.scorecard.scoring import score
    from mixerzoo.studies.scorecard.table import score_keys

    outcome = score("gla", "quick", None, items=["icll", "mad"], log=lambda _: None)
    assert outcome.references and score_keys(outcome.cards) == ["regbench", "mad"]


def test_a_part_without_mad_reads_the_references_on_its_columns_only(run_cli, tmp_path):
    from mixerzoo.studies.scorecard.scoring import score
    from mixerzoo.studies.scorecard.table import score_keys

    outcome = score("gla", "quick", None, items=["copy"], log=lambda _: None)
    assert outcome.references and score_keys(outcome.cards) == ["selective-copy"]
    assert not any(c.stale for c in outcome.references)
    args = ["scorecard", "gla", "--items", "selective-copy", "--no-train", "--results", str(tmp_path / "r")]
    code, out, err = run_cli([*args, "--out", str(tmp_path / "out")])
    assert code == 0 and "Traceback" not in err, err
    assert "selective-copy" in out and "mqar-L64-d64" not in out


def test_a_reference_named_but_not_scored_keeps_its_row():
    from mixerzoo.studies.scorecard.scoring import score

    outcome = score("gla", "quick", None, items=["copy"], log=lambda _: None)  # no results folder
    assert outcome.card is None and "gla" in [c.label for c in outcome.references]
    assert not any("is also a reference" in n for n in outcome.notes)


def test_dry_run_of_a_part_lists_only_its_items(run_cli):
    code, out, err = run_cli(["scorecard", "gla", "--dry-run", "--items", "copy"])
    assert code == 0, err
    assert "selective-copy" in out and "mqar-L64-d64" not in out and "mad" not in out.split()
    code, out, err = run_cli(["scorecard", "gla", "--items", "nosuch"])
    assert code == 2 and "--items: no column or group 'nosuch'" in err and "Traceback" not in err
    code, out, err = run_cli(["scorecard", "--rebuild-references", "--items", "copy"])
    assert code == 2 and "--items is for a scored mixer" in err


def test_rebuild_dry_run_plans_each_reference_and_trains_nothing(run_cli, tmp_path):
    results = tmp_path / "results"
    refs = tmp_path / "refs"  # no references held here: every named one is to make
    args = ["scorecard", "--rebuild-references", "--only", "gla", "--dry-run"]
    code, out, err = run_cli([*args, "--results", str(results), "--references-dir", str(refs)])
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == "rebuild of the quick references: 1 reference to make, 0 kept"
    assert "reference 1/1 gla:" in lines and "scorecard of gla (quick)" in out
    assert re.search(r"^\s+mqar-L64-d64 .*(1 run|\d+ runs), at most ~", out, re.M)
    assert not results.exists() and not refs.exists()  # nothing trained, nothing written
    code, out, err = run_cli(["scorecard", "--rebuild-references", "--only", "nosuch", "--dry-run"])
    assert code == 2 and "'nosuch' is not a reference" in err and "Traceback" not in err


def test_an_efficiency_measurement_is_found_by_its_model_not_by_the_rows_name(tmp_path, monkeypatch):
    from mixerzoo.store.results import ResultsStore
    from mixerzoo.studies.scorecard import card as card_mod
    from mixerzoo.studies.scorecard import efficiency

    calls = []

    def fake_measure(cand, eff, log=None):
        calls.append(cand.model)
        return {"tokens_per_s": [float(len(calls))]}

    monkeypatch.setattr(efficiency, "measure", fake_measure)
    store, battery = ResultsStore(tmp_path / "res"), load_battery()
    card_mod._efficiency(candidate("attention"), battery, "quick", store, log=lambda _: None)
    card_mod._efficiency(candidate("attention", "renamed"), battery, "quick", store, log=lambda _: None)
    assert len(calls) == 1  # the same model under another name: measured once
    renamed = card_mod._stored_efficiency(candidate("attention", "renamed"), "quick", store)
    assert renamed is not None and renamed["tokens_per_s"] == [1.0]
    other = candidate({"name": "attention", "num_heads": 2}, "attention")  # same name, another model
    assert card_mod._stored_efficiency(other, "quick", store) is None


@pytest.mark.parametrize("progress", [True, False])
def test_run_card_shows_each_items_progress_bar_when_asked(tmp_path, monkeypatch, progress):
    from mixerzoo.store.results import ResultsStore
    from mixerzoo.studies.scorecard import card as card_mod
    from mixerzoo.studies.sweep import runner

    seen = []
    monkeypatch.setattr(
        runner, "run_sweep", lambda exp, store, **kw: seen.append((kw["experiment_tag"], kw["progress"]))
    )
    battery = load_battery()
    card_mod.run_card(
        candidate("attention"),
        battery,
        "quick",
        ResultsStore(tmp_path),
        log=lambda _: None,
        efficiency=False,
        progress=progress,
    )
    spec = battery.preset("quick")
    assert len(seen) == len(spec.items) + bool(spec.mad)  # every item and the MAD sweep
    assert {p for _, p in seen} == {progress}
    assert any(tag.startswith("scorecard/mad/") for tag, _ in seen)


def test_a_card_names_the_cpus_vector_instructions_it_was_made_with():
    import torch

    from mixerzoo.studies.scorecard.card import machine

    made = machine()["machine"]
    assert f"({torch.backends.cpu.get_cpu_capability()})" in made and "CPU cores" in made


def test_references_made_on_another_machine_are_named_beside_the_scored_one():
    from mixerzoo.studies.scorecard.card import Card
    from mixerzoo.studies.scorecard.scoring import machine_note

    def card(label, machine, gpu=None):
        return Card(label, label, "quick", made={"date": "2026-12-02", "machine": machine, "gpu": gpu})

    here = card("mine", "x86_64 (AVX512), 2 CPU cores, torch 2.13.0+cpu")
    same = card("attention", "x86_64 (AVX512), 2 CPU cores, torch 2.13.0+cpu")
    assert machine_note(here, [same]) is None
    assert machine_note(None, [same]) is None
    other = card("gla", "x86_64 (AVX2), 2 CPU cores, torch 2.13.0+cpu")
    on_gpu = card("cat", "x86_64 (AVX512), 2 CPU cores, torch 2.13.0+cpu", gpu="NVIDIA H200")
    note = machine_note(here, [same, other, on_gpu])
    assert note.startswith("scored on x86_64 (AVX512), 2 CPU cores")
    assert "x86_64 (AVX2)" in note and "NVIDIA H200" in note and "learning threshold" in note


def test_every_row_of_the_figures_has_its_own_colour_and_marker():
    """Twelve references outrun matplotlib's eight colours: no two rows may be drawn alike."""
    from mixerzoo.studies.scorecard.card import Card
    from mixerzoo.studies.scorecard.page import _styles

    cards = [Card(f"m{i}", f"m{i}", "quick") for i in range(14)]
    styles = _styles(cards, "m3")
    looks = {(s["color"], s["marker"]) for s in styles.values()}
    assert len(looks) == len(cards)
    assert styles["m3"]["marker"] == "*"


def test_workers_default_to_one_per_core_without_a_gpu_and_one_with(monkeypatch):
    import torch

    from mixerzoo.studies.scorecard.card import default_workers

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr("os.cpu_count", lambda: 6)
    assert default_workers() == 6
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert default_workers() == 1


def test_the_dry_runs_workers_line_names_a_workers_share_of_the_cores_and_the_pools_time(monkeypatch):
    from mixerzoo.studies.sweep import cost

    monkeypatch.setattr("os.cpu_count", lambda: 2)
    line = cost.workers_line(1800.0, 2)
    assert line.startswith("with 2 worker processes, each run on 1 core (its steps timed so): ~30 min,")
    assert "longest first" in line
    assert cost.workers_line(1800.0, 2, "cuda:0").startswith("with 2 worker processes: at best ~30 min")


def test_fewer_than_one_worker_is_one_line(run_cli):
    code, out, err = run_cli(["scorecard", "attention", "--workers", "0"])
    assert code != 0 and "--workers" in err and "Traceback" not in err


def test_the_budget_line_says_when_the_estimate_here_is_over_it_and_what_to_do(tmp_path):
    from mixerzoo.studies.scorecard.scoring import _budget_lines

    (over,) = _budget_lines("quick", tmp_path, 30, expected_s=41 * 60)
    stated = "stated budget: 30 min per mixer"
    assert over == f"{stated}; the estimate here is over it: --items scores a part of the battery"
    assert _budget_lines("quick", tmp_path, 30, expected_s=29 * 60) == [stated]
    assert _budget_lines("quick", tmp_path, 30) == [stated]  # nothing left to train
