"""The whole scorecard on a tiny battery: references made by ``--rebuild-references`` into a
folder, a mixer defined outside the package scored among them, the page, the figures, staleness."""

import json
import sys
import textwrap

import pytest

TINY = {"train.max_steps": 3, "data.n_train": 64, "data.n_test": 32, "data.n_valid": 32}


def tiny_battery(references=("attention", "base_conv")):
    item = {
        "key": "mqar-L64-d32",
        "group": "recall",
        "study": "zoology-mqar-dmodel",
        "cell": {"data.task.seq_len": 64, "model.d_model": 32},
        "sets": {**TINY, "train.early_stop_accuracy": None},
    }
    return {
        "kind": "scorecard",
        "name": "tiny",
        "references": list(references),
        "presets": {
            "quick": {
                "items": [item],
                "efficiency": {"lengths": [32, 64], "d_model": 16, "tokens": 128, "steps": 1, "warmup": 0},
            }
        },
    }


@pytest.fixture
def outside_mixer(tmp_path, monkeypatch):
    """A module ``decaykv_mod`` outside the package defining ``DecayKV`` (a causal decaying mean)."""
    (tmp_path / "decaykv_mod.py").write_text(
        textwrap.dedent(
            """
            import torch
            from mixerzoo.mixers.base import SequenceMixer

            class DecayKV(SequenceMixer):
                name = "decaykv"

                def __init__(self, d_model, max_len=2048, **params):
                    super().__init__(d_model, max_len, **params)
                    self.proj = torch.nn.Linear(d_model, d_model)

                def forward(self, x, input_ids=None, rope=None):
                    w = 0.9 ** torch.arange(x.shape[1], dtype=x.dtype, device=x.device)
                    num = torch.cumsum(x / w[None, :, None].clamp_min(1e-30), dim=1) * w[None, :, None]
                    return self.proj(num)
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "decaykv_mod:DecayKV"
    sys.modules.pop("decaykv_mod", None)


def test_references_rebuild_then_an_outside_mixer_is_scored_among_them(tmp_path, outside_mixer):
    from mixerzoo.store.results import ResultsStore
    from mixerzoo.studies.scorecard.battery import load_battery
    from mixerzoo.studies.scorecard.references import load_references, rebuild
    from mixerzoo.studies.scorecard.scoring import score, write_outputs

    battery, refs_dir, store = load_battery(tiny_battery()), tmp_path / "refs", ResultsStore(tmp_path / "res")
    lines = []
    made = rebuild(battery, "quick", store, log=lines.append, folder=refs_dir)
    assert sorted(c.label for c in made) == ["attention", "base_conv"]
    raw = json.loads((refs_dir / "quick.json").read_text())
    for card in raw["cards"].values():
        assert card["made"]["date"] and card["made"]["machine"]
        assert card["scores"]["mqar-L64-d32"]["fingerprints"]
        assert len(card["scores"]["mqar-L64-d32"]["configs"]) == 1  # the one run the cell plans
        assert card["efficiency"]["code"] and len(card["efficiency"]["tokens_per_s"]) == 2
    # resumable: a second rebuild keeps the current references and trains nothing
    again = []
    rebuild(battery, "quick", store, log=again.append, folder=refs_dir)
    assert all("current, kept" in line for line in again if line.startswith("reference "))

    outcome = score(outside_mixer, "quick", store, battery, log=lambda _: None, folder=refs_dir)
    assert [c.label for c in outcome.cards] == ["DecayKV", "attention", "base_conv"]
    assert outcome.card.scores["mqar-L64-d32"].value is not None
    assert "**DecayKV**" in outcome.markdown
    paths = {p.name for p in write_outputs(outcome, tmp_path / "out")}
    assert {
        "table.md",
        "scorecard.json",
        "scorecard.html",
        "recall_vs_state.png",
        "throughput_vs_length.png",
    } <= paths
    page = (tmp_path / "out" / "scorecard.html").read_text()
    assert page.count("data:image/png;base64,") == 2 and "DecayKV" in page
    rows = json.loads((tmp_path / "out" / "scorecard.json").read_text())["rows"]
    assert {r["mixer"] for r in rows} == {"DecayKV", "attention", "base_conv"}

    # --against narrows the references
    narrowed = score(outside_mixer, "quick", None, battery, against=["attention"], folder=refs_dir)
    assert [c.label for c in narrowed.cards] == ["attention"]

    # a reference made by other code is marked stale, never used silently
    stored_fingerprints = raw["cards"]["attention"]["scores"]["mqar-L64-d32"]["fingerprints"]
    raw["cards"]["attention"]["scores"]["mqar-L64-d32"]["fingerprints"] = ["0.0.0:other"]
    (refs_dir / "quick.json").write_text(json.dumps(raw))
    outcome = score(outside_mixer, "quick", None, battery, folder=refs_dir)
    attention = next(c for c in outcome.cards if c.label == "attention")
    assert attention.stale == ["mqar-L64-d32"]
    assert any("stale" in n and "attention (mqar-L64-d32)" in n for n in outcome.notes)
    assert "attention (stale)" in outcome.markdown
    assert len(load_references("quick", refs_dir)) == 2

    # so is one made by another recipe: the study's cell changed since (other config hashes)
    current = json.loads(json.dumps(raw))
    current["cards"]["attention"]["scores"]["mqar-L64-d32"]["fingerprints"] = stored_fingerprints
    current["cards"]["base_conv"]["scores"]["mqar-L64-d32"]["configs"] = ["0" * 64]
    (refs_dir / "quick.json").write_text(json.dumps(current))
    outcome = score(outside_mixer, "quick", None, battery, folder=refs_dir)
    assert {c.label: c.stale for c in outcome.cards if c.label != "DecayKV"} == {
        "attention": [],
        "base_conv": ["mqar-L64-d32"],
    }


def test_the_cli_scores_an_outside_mixer(tmp_path, outside_mixer, run_cli):
    """``mixerzoo scorecard pkg.mod:Class`` through the command line, with a battery file."""
    import yaml

    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(tiny_battery(references=())))
    code, out, err = run_cli(
        [
            "scorecard",
            outside_mixer,
            "--results",
            tmp_path / "res",
            "--out",
            tmp_path / "out",
            "--references-dir",
            tmp_path / "refs",
            "--battery",
            path,
        ]
    )
    assert code == 0, err
    assert "DecayKV" in out and "no reference results ship" in out
    assert (tmp_path / "out" / "scorecard.html").is_file()


def test_a_rebuild_on_an_empty_store_keeps_the_items_an_earlier_rebuild_wrote_as_partial(
    tmp_path, monkeypatch
):
    """Each finished item of a reference being made is written to ``<preset>.partial.json``; a
    rebuild elsewhere (another machine: an empty results store) keeps those and trains the rest."""
    import mixerzoo.studies.scorecard.card as card_module
    from mixerzoo.store.results import ResultsStore
    from mixerzoo.studies.scorecard.battery import load_battery
    from mixerzoo.studies.scorecard.references import load_references, rebuild, reference_path

    raw = tiny_battery(references=("attention",))
    second = {**raw["presets"]["quick"]["items"][0], "key": "mqar-L32-d32"}
    second["cell"] = {"data.task.seq_len": 32, "model.d_model": 32}
    raw["presets"]["quick"]["items"].append(second)
    battery, refs = load_battery(raw), tmp_path / "refs"
    trained, real_run_item = [], card_module.run_item

    def first_item_then_die(item, *args, **kwargs):  # the machine goes away after the first item
        if trained:
            raise KeyboardInterrupt
        trained.append(item.key)
        return real_run_item(item, *args, **kwargs)

    monkeypatch.setattr(card_module, "run_item", first_item_then_die)
    with pytest.raises(KeyboardInterrupt):
        rebuild(battery, "quick", ResultsStore(tmp_path / "machine-1"), log=lambda line: None, folder=refs)
    assert not reference_path("quick", refs).exists()  # no finished reference
    (part,) = load_references("quick", refs, partial=True)
    assert part.scores["mqar-L64-d32"].value is not None and part.scores["mqar-L32-d32"].value is None

    trained.clear()
    monkeypatch.setattr(
        card_module,
        "run_item",
        lambda item, *a, **k: (trained.append(item.key), real_run_item(item, *a, **k)),
    )
    lines: list[str] = []
    (made,) = rebuild(battery, "quick", ResultsStore(tmp_path / "machine-2"), log=lines.append, folder=refs)
    assert trained == ["mqar-L32-d32"]  # the kept item is not trained again
    assert any("kept, current: mqar-L64-d32" in line for line in lines)
    assert made.scores["mqar-L64-d32"].value == part.scores["mqar-L64-d32"].value
    assert made.scores["mqar-L32-d32"].value is not None
    assert not reference_path("quick", refs, partial=True).exists()  # the finished card left it


def test_a_mixer_scored_by_two_worker_processes_gets_every_item_once(tmp_path, outside_mixer):
    """``workers=2``: every item's runs shared out to one pool (an outside mixer imported by the
    spawned workers), each recorded under its item's tag, the card complete; a second call trains
    nothing."""
    from mixerzoo.store.results import ResultsStore
    from mixerzoo.studies.scorecard.battery import load_battery
    from mixerzoo.studies.scorecard.candidate import candidate
    from mixerzoo.studies.scorecard.card import run_card

    raw = tiny_battery(references=())
    second = {**raw["presets"]["quick"]["items"][0], "key": "mqar-L32-d32"}
    second["cell"] = {"data.task.seq_len": 32, "model.d_model": 32}
    raw["presets"]["quick"]["items"].append(second)
    battery, store = load_battery(raw), ResultsStore(tmp_path / "res")
    cand, lines, partial = candidate(outside_mixer), [], []
    card = run_card(cand, battery, "quick", store, log=lines.append, on_item=partial.append, workers=2)
    assert all(card.scores[k].value is not None for k in ("mqar-L64-d32", "mqar-L32-d32"))
    tags = sorted(r.experiment for r in store.runs(status="finished"))
    assert tags == ["scorecard/mqar-L32-d32/DecayKV", "scorecard/mqar-L64-d32/DecayKV"]
    assert any("2 items trained together in 2 worker processes" in line for line in lines)
    assert len(partial) == 1 and partial[0].scores["mqar-L32-d32"].value is not None
    again: list[str] = []
    run_card(cand, battery, "quick", store, log=again.append, workers=2)
    assert sum("1 already finished, 0 to run" in line for line in again) == 2
    assert len(store.runs()) == 2


def test_a_reference_with_a_stale_column_retrains_that_column_only(tmp_path):
    """A shipped reference whose study cell changed in one column is re-made on an empty store
    (another machine): its current columns are kept with the date and machine they were made on,
    only the stale column trains, and the notes name both machines."""
    from mixerzoo.store.results import ResultsStore
    from mixerzoo.studies.scorecard.battery import load_battery
    from mixerzoo.studies.scorecard.references import load_references, rebuild
    from mixerzoo.studies.scorecard.scoring import score

    raw = tiny_battery(references=("attention",))
    second = {**raw["presets"]["quick"]["items"][0], "key": "mqar-L32-d32"}
    second["cell"] = {"data.task.seq_len": 32, "model.d_model": 32}
    raw["presets"]["quick"]["items"].append(second)
    battery, refs = load_battery(raw), tmp_path / "refs"
    rebuild(battery, "quick", ResultsStore(tmp_path / "machine-1"), log=lambda _: None, folder=refs)
    shipped = json.loads((refs / "quick.json").read_text())
    card = shipped["cards"]["attention"]
    card["made"].update(date="2000-01-01", machine="an older machine")
    card["scores"]["mqar-L32-d32"]["configs"] = ["0" * 64]  # its recipe changed since
    (refs / "quick.json").write_text(json.dumps(shipped))

    store, lines = ResultsStore(tmp_path / "machine-2"), []
    (made,) = rebuild(battery, "quick", store, log=lines.append, folder=refs)
    assert [r.experiment for r in store.runs()] == ["scorecard/mqar-L32-d32/attention"]
    assert any("kept, current: mqar-L64-d32" in line for line in lines)
    assert made.scores["mqar-L64-d32"].value == card["scores"]["mqar-L64-d32"]["value"]
    assert made.made["kept"] == {
        "mqar-L64-d32": {"date": "2000-01-01", "machine": "an older machine", "gpu": None}
    }
    assert made.stale == [] and made.made["date"] != "2000-01-01"
    (again,) = load_references("quick", refs)
    assert again.made["kept"]["mqar-L64-d32"]["machine"] == "an older machine"
    notes = score("attention", "quick", None, battery, folder=refs).notes
    assert any("2000-01-01 on an older machine" in n for n in notes)


def test_references_made_with_two_workers_train_in_one_pool_and_record_their_own_runs_times(tmp_path):
    """``rebuild(workers=2)`` of two references: both mixers' runs share one pool (a line says so),
    each card is complete, its time counts its own runs (not the pool's wall time), each run is
    recorded under its mixer's tag; a second rebuild keeps both and trains nothing."""
    from mixerzoo.store.results import ResultsStore
    from mixerzoo.studies.scorecard.battery import load_battery
    from mixerzoo.studies.scorecard.references import rebuild

    raw = tiny_battery()
    second = {**raw["presets"]["quick"]["items"][0], "key": "mqar-L32-d32"}
    second["cell"] = {"data.task.seq_len": 32, "model.d_model": 32}
    raw["presets"]["quick"]["items"].append(second)
    battery, refs, store = load_battery(raw), tmp_path / "refs", ResultsStore(tmp_path / "res")
    lines: list[str] = []
    made = rebuild(battery, "quick", store, log=lines.append, folder=refs, workers=2)
    assert "2 mixers: 4 items trained together in 2 worker processes" in lines
    keys = ("mqar-L32-d32", "mqar-L64-d32")
    tags = sorted(f"scorecard/{key}/{name}" for name in ("attention", "base_conv") for key in keys)
    assert sorted(r.experiment for r in store.runs(status="finished")) == tags
    for card in made:
        runs = sum(s.wall_s for s in card.scores.values())
        assert all(s.value is not None for s in card.scores.values()) and card.efficiency
        assert card.wall_s >= runs > 0
    assert sum("trained in one pool with the others" in line for line in lines) == 2
    again: list[str] = []
    rebuild(battery, "quick", store, log=again.append, folder=refs, workers=2)
    assert [line.split(": ", 1)[1] for line in again] == ["current, kept", "current, kept"]
    assert len(store.runs()) == 4
