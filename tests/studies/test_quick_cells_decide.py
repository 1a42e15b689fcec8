"""Quick presets whose cells can decide their claims (nothing trains).

- LaS: a quick preset shortens the sequences, so its decay bound B is scaled to keep the decay
  across a sequence the paper preset's, exp(-B_quick L_quick) = exp(-B_paper L_paper); the paper
  side is read from the study's own paper preset, not restated here.
- CAT-ws Fig. 11 (selective copying): CAT's width in two readings, W = 3 (CAT-ws Sec. 4) and
  W = L (Theorem 4's long filter), each its own cells and its own claims.
- CAT-ws Figs. 7 and 9: a decline is judged for the one other model the paper says solves MQAR in
  one layer (Mamba), once it learned; the models it says fail are judged on that failure.
- CAT-ws Fig. 3 quick gains L = 256 (where attention may fall behind CAT). Zoology Fig. 7's
  multi-head Hyena does not learn MQAR within a CPU budget (measured), so that quick preset plans
  no runs; an 8-head Hyena that recalls at d = 64 meets the paper preset's premise. LaS's ListOps
  tables (2, 4, 5, 6) are paper only too: no model leaves ListOps' plateau at a CPU budget.
- ICLL Fig. 2 (a): quick trains the Transformer on the authors' associative_recall_64 recipe and
  leaves the comparison with the other models (still learning at a quick budget) not run.
"""

from __future__ import annotations

import copy
import functools
import math

import pytest

from mixerzoo.claims import INCONCLUSIVE, NOT_REPRODUCED, NOT_RUN, REPRODUCED
from mixerzoo.studies.base import judge_plan, plan_template
from mixerzoo.studies.dispatch import find_study
from mixerzoo.studies.sweep.config import load_experiment
from mixerzoo.studies.sweep.cost import planned_steps

#: the LaS studies whose quick presets train (the ListOps tables' are paper only: no model leaves
#: ListOps' plateau at a CPU budget)
LAS = ["las-table3-seqimages", "las-table7-atomic"]
#: quick task -> the paper task it stands for (the study files' `stand_ins`)
STANDS_FOR = {"digits8x8": "smnist"}


def decay_across(cfg) -> float:
    """exp(-B L): the smallest factor LaS's local decay puts on a score within one sequence."""
    return math.exp(-cfg.model.mixer.params["decay_max"] * cfg.data.max_seq_len())


def paper_decays(study: str) -> dict[tuple, float]:
    """(variant, task) -> exp(-B L) of the paper preset's LaS runs (one value per pair)."""
    out: dict[tuple, set] = {}
    for r in load_experiment(study, "paper").expand():
        if r.config.model.mixer.name == "las_attention" and r.config.model.mixer.params.get("decay_max"):
            key = (r.point.get("variant"), r.config.data.task.name)
            out.setdefault(key, set()).add(round(decay_across(r.config), 9))
    assert all(len(v) == 1 for v in out.values()), out
    return {k: v.pop() for k, v in out.items()}


@pytest.mark.parametrize("study", LAS)
def test_las_quick_decay_across_a_sequence_is_the_paper_presets(study):
    paper = paper_decays(study)
    checked = 0
    for r in load_experiment(study, "quick").expand():
        cfg = r.config
        if cfg.model.mixer.name != "las_attention" or not cfg.model.mixer.params.get("decay_max"):
            continue
        task = STANDS_FOR.get(cfg.data.task.name, cfg.data.task.name)
        target = paper[(r.point.get("variant"), task)]
        assert decay_across(cfg) == pytest.approx(target, rel=1e-3), r.point
        # the scaling is the paper's B times L_paper / L_quick
        b_paper = -math.log(target) / cfg.data.max_seq_len()
        assert cfg.model.mixer.params["decay_max"] == pytest.approx(b_paper, rel=1e-3)
        checked += 1
    assert checked > 0


def test_the_digits_take_the_decay_of_the_smnist_they_stand_for():
    (las,) = {
        r.config.model.mixer.params["decay_max"]
        for r in load_experiment("las-table3-seqimages", "quick").expand()
        if r.point["variant"] == "las"
    }
    assert las == pytest.approx(0.001 * 784 / 64)  # Table 9's image B over sMNIST's 784 pixels


# -- CAT-ws Fig. 11: two readings of CAT's width ----------------------------------------------
@pytest.mark.parametrize("preset", ["quick", "paper"])
def test_selective_copy_plans_each_width_reading_as_its_own_cells(preset):
    runs = load_experiment("cat-selective-copy", preset).expand()
    by = {"cat": {}, "cat-wL": {}}
    for r in runs:
        if r.point["variant"] in by:
            rest = tuple(sorted((k, v) for k, v in r.point.items() if k != "variant"))
            by[r.point["variant"]][rest] = r
    assert by["cat"] and by["cat"].keys() == by["cat-wL"].keys()  # the same cells, once per reading
    for r in by["cat"].values():
        assert r.config.model.mixer.params["conv_width"] == 3
    for r in by["cat-wL"].values():
        assert r.config.model.mixer.params["conv_width"] == r.config.data.task.params["seq_len"]
        assert r.config.model.position == by["cat"][next(iter(by["cat"]))].config.model.position
    assert not {r.config_hash for r in by["cat"].values()} & {r.config_hash for r in by["cat-wL"].values()}
    if preset == "quick":
        assert {r.config.model.n_layers for r in by["cat-wL"].values()} == {1, 2}


def claim_variants(claim) -> set[str]:
    named = set()
    for part in (claim.where, claim.compare and claim.compare.left, claim.compare and claim.compare.right):
        for sel in [part] if isinstance(part, dict) else part or []:
            v = sel.get("variant", [])
            named |= set(v if isinstance(v, list) else [v])
    return named


def test_selective_copy_claims_judge_each_reading_apart():
    claims = load_experiment("cat-selective-copy", "paper").claims
    w3 = [c for c in claims if "cat" in claim_variants(c)]
    wl = [c for c in claims if "cat-wL" in claim_variants(c)]
    assert len(w3) == len(wl) == 4 and not set(map(id, w3)) & set(map(id, wl))
    for a, b in zip(w3, wl):
        assert "W = 3" in a.claim and "W = L" in b.claim
        assert claim_variants(a) - {"cat"} == claim_variants(b) - {"cat-wL"}


def fill(template: dict, values: dict, n_test: int = 300) -> dict:
    """The template with each cell's metrics from ``values(cell)`` and its evidence size."""
    table = copy.deepcopy(template)
    for cell in table["cells"]:
        for metric, value in values(cell).items():
            cell[metric] = value
        cell["n_test"], cell["seeds"] = n_test, 1
    return table


@functools.cache
def _planned(study: str, preset: str):
    """What ``judge_cells`` plans for ``preset`` (a paper preset plans hundreds of runs: once)."""
    s = find_study(study)
    plan = s.claim_plan(preset, {})
    return plan_template(plan), plan, s.scope({})


def verdicts_of(study: str, preset: str, values) -> list[dict]:
    """``Study.judge_cells`` on the template filled with ``values`` (its plan built once)."""
    template, plan, scope = _planned(study, preset)
    return judge_plan(plan, fill(template, values), scope=scope)


def test_a_reading_that_learned_is_judged_apart_from_one_that_did_not():
    # CAT at W = 3 on the 0.46 plateau of the pilots, CAT at W = L at 0.99
    acc = {"mamba": 0.976, "cat": 0.46, "cat-wL": 0.99, "attention": 0.39, "lincat": 0.4, "cat-thm4": 0.99}
    two = {"cat": 0.6, "cat-wL": 0.95, "attention": 0.998, "lincat": 0.5}
    table = {1: acc, 2: two}
    out = verdicts_of(
        "cat-selective-copy",
        "quick",
        lambda c: {"accuracy_per_query": table[c["model.n_layers"]][c["variant"]]},
    )
    first = [v for v in out if v["claim"].startswith("Among the 1-layer models")]
    reading = {("W = 3" in v["claim"], "W = L" in v["claim"]): v["verdict"] for v in first}
    assert reading == {(True, False): NOT_REPRODUCED, (False, True): REPRODUCED}


# -- CAT-ws Figs. 7 and 9: a decline only from a task solved ----------------------------------
def length_values(cat, mamba, others):
    """Accuracy at every test length: CAT ``cat``; Mamba (at 128, at 1,024); the others (same)."""

    def values(cell):
        if cell["variant"] == "cat-1L":
            at128, at1024 = cat, cat
        else:
            at128, at1024 = mamba if cell["variant"] == "mamba-1L" else others
        return {
            m: (at128 if m in ("accuracy@32", "accuracy@64", "accuracy@128") else at1024)
            for m in cell
            if m.startswith("accuracy@")
        }

    return values


def decline_verdicts(preset: str, cat, mamba, others) -> tuple[str, str]:
    out = verdicts_of("cat-1layer-length-generalization", preset, length_values(cat, mamba, others))
    decline = next(v for v in out if "sharp decline" in v["claim"])
    fail = next(v for v in out if "single-layer network architecture" in v["claim"])
    return decline["verdict"], fail["verdict"]


def test_the_decline_is_judged_for_mamba_once_it_learned_and_the_others_on_their_failure():
    # the paper's picture: Mamba learns at 128 and declines, the others never learn in one layer
    assert decline_verdicts("paper", 1.0, (0.98, 0.1), (0.2, 0.01)) == (REPRODUCED, REPRODUCED)
    # a Mamba that never learned cannot decline; the others' failure is judged all the same
    assert decline_verdicts("paper", 1.0, (0.1, 0.01), (0.2, 0.01)) == (INCONCLUSIVE, REPRODUCED)
    # a model the paper says fails but that learned at 128 contradicts the paper
    assert decline_verdicts("paper", 1.0, (0.98, 0.1), (0.99, 0.2))[1] == NOT_REPRODUCED
    # untrained everywhere: nothing reads reproduced
    assert REPRODUCED not in decline_verdicts("paper", 0.0, (0.0, 0.0), (0.0, 0.0))


def test_the_quick_runs_decide_the_failure_and_leave_mambas_decline_not_run():
    # measured: CAT-1L >= 0.9988 at every length, RoPE attention-1L 0.008 and Based-1L 0.314 at 128
    assert decline_verdicts("quick", 0.999, (0.0, 0.0), (0.314, 0.05)) == (NOT_RUN, REPRODUCED)


# -- new quick cells ----------------------------------------------------------------------------
def test_cat_mqar_quick_adds_one_cell_at_l256_for_cat_and_attention():
    runs = load_experiment("cat-mqar", "quick").expand()
    long = [r for r in runs if r.point["data.task.seq_len"] == 256]
    assert {(r.point["variant"], r.point["model.d_model"]) for r in long} == {
        ("cat-1L", 64),
        ("attention-2L", 64),
    }
    for r in long:
        assert r.config.train.batch_size == 16  # the file's (Zoology App. E.2) batch at L >= 256
        assert planned_steps(r.config) == 3200
        assert r.config.data.task.params["seq_len"] == 256
    short = {r.point["variant"] for r in runs if r.point["data.task.seq_len"] == 64}
    assert short == {"cat-1L", "lincat-1L", "attention-2L", "base_conv-2L"}


def test_multihead_hyena_quick_is_paper_only_with_the_measured_reason():
    quick = load_experiment("zoology-multihead-hyena", "quick")
    assert quick.expand() == [] and "0.114" in quick.paper_only and "0.0025" in quick.paper_only
    out = verdicts_of("zoology-multihead-hyena", "quick", lambda c: {"accuracy_per_query": 1.0})
    assert [v["verdict"] for v in out] == ["not run"] * 3  # no cell planned: nothing to judge


def test_an_eight_head_hyena_that_recalls_at_d64_meets_the_premise_of_the_paper_preset():
    def acc(c, wide_h8):
        if c["variant"] == "attention":
            return 0.99
        if c["variant"] == "hyena-h8" and c["model.d_model"] >= 64:
            return wide_h8
        return 0.01

    out = verdicts_of("zoology-multihead-hyena", "paper", lambda c: {"accuracy_per_query": acc(c, 0.95)})
    assert [v["verdict"] for v in out] == [REPRODUCED, REPRODUCED, REPRODUCED]
    out = verdicts_of("zoology-multihead-hyena", "paper", lambda c: {"accuracy_per_query": acc(c, 0.1)})
    assert out[0]["verdict"] == INCONCLUSIVE  # no 8-head Hyena recalls: the premise cannot hold


def test_icll_fig2a_quick_trains_the_transformer_on_the_authors_associative_recall_64_recipe():
    (run,) = load_experiment("icll-fig2a", "quick").expand()
    cfg = run.config
    assert run.point["variant"] == "transformer"
    assert (cfg.model.mixer.name, cfg.model.mixer.params) == ("attention", {"num_heads": 2, "dropout": 0.1})
    assert (cfg.model.d_model, cfg.model.n_layers, cfg.model.position) == (64, 2, "learned")
    t = cfg.train
    assert (t.lr, t.weight_decay, t.batch_size, t.schedule, t.warmup_frac) == (5e-4, 0.1, 32, "linear", 0.1)
    assert tuple(t.betas) == (0.9, 0.999)
    assert cfg.data.task.params["train_labels"] == "all" and cfg.data.n_train == 5000
    assert cfg.data.n_valid == 500  # the validation split selects; the test split reports


def test_icll_fig2a_quick_leaves_the_comparison_not_run_whatever_the_transformer_scores():
    for acc in (0.05, 0.776, 1.0):
        out = verdicts_of("icll-fig2a", "quick", lambda c, a=acc: {"accuracy_per_query": a})
        assert [v["verdict"] for v in out] == [NOT_RUN]
