"""Claims as data (issue 9 item 3): predicates over hand-made cells, and `report --json` / `check`
through the CLI on a store written directly (no training)."""

import json

import pytest

from mixerzoo.claims import (
    INCONCLUSIVE,
    NOT_REPRODUCED,
    NOT_RUN,
    REPRODUCED,
    Claim,
    StandIn,
    count_verdicts,
    evaluate_claims,
    metric_direction,
    verdict_label,
)
from mixerzoo.registry import ConfigError
from mixerzoo.store.results import ResultsStore
from mixerzoo.studies.sweep.cells import collect_results
from mixerzoo.studies.sweep.config import load_experiment, shipped_experiments
from mixerzoo.studies.sweep.report import claim_results

M = "accuracy_per_query"


def cell(variant, d, L, acc, **extra):
    out = {"variant": variant, "model.d_model": d, "data.task.seq_len": L}
    if acc is not None:
        out[M] = acc
    out.update(extra)
    return out


# a 2 x 2 grid per variant; attention fails at (64, 128), base_conv only succeeds for d >= L
CELLS = [
    cell("cat-1L", 64, 64, 1.0),
    cell("cat-1L", 64, 128, 0.995),
    cell("cat-1L", 128, 64, 0.999),
    cell("cat-1L", 128, 128, 1.0),
    cell("attention-2L", 64, 64, 0.97),
    cell("attention-2L", 64, 128, 0.40),
    cell("attention-2L", 128, 64, 0.99),
    cell("attention-2L", 128, 128, 0.96),
    cell("base_conv-2L", 64, 64, 0.98),
    cell("base_conv-2L", 64, 128, 0.10),
    cell("base_conv-2L", 128, 64, 0.99),
    cell("base_conv-2L", 128, 128, 0.97),
]


def verdict(spec, cells=CELLS):
    (result,) = evaluate_claims([Claim.model_validate({"claim": "c", "paper_ref": "p", **spec})], cells, M)
    assert set(result) == {
        "claim",
        "paper_ref",
        "source",
        "verdict",
        "evidence",
        "premise",
        "stand_ins",
        "strength",
    }
    return result


def test_threshold_all_reproduced_and_evidence_lists_every_cell():
    r = verdict({"where": {"variant": "cat-1L"}, "test": {"op": ">=", "value": 0.99}})
    assert r["verdict"] == REPRODUCED
    for number in ("1.0000", "0.9950", "0.9990"):
        assert number in r["evidence"]
    assert "4 of 4 cells" in r["evidence"]


def test_a_set_that_violates_the_claim_is_not_reproduced():
    r = verdict({"where": {"variant": "attention-2L"}, "test": {"op": ">=", "value": 0.95}})
    assert r["verdict"] == NOT_REPRODUCED
    assert "3 of 4 cells" in r["evidence"] and "0.4000" in r["evidence"]


def test_where_lists_select_values_and_a_list_of_selectors_is_a_union():
    # attention >= 0.95 where d >= 128 holds; adding the failing cell (64, 128) breaks it
    ok = {"where": {"variant": "attention-2L", "model.d_model": [128]}, "test": {"op": ">=", "value": 0.95}}
    assert verdict(ok)["verdict"] == REPRODUCED
    # "base_conv fails for d < L and succeeds for d >= L": d < L is no product of values: a union
    fails = {
        "where": [{"variant": "base_conv-2L", "model.d_model": 64, "data.task.seq_len": 128}],
        "test": {"op": "<", "value": 0.5},
    }
    succeeds = {
        "where": [
            {"variant": "base_conv-2L", "model.d_model": 64, "data.task.seq_len": 64},
            {"variant": "base_conv-2L", "model.d_model": 128},
        ],
        "test": {"op": ">=", "value": 0.95},
    }
    assert verdict(fails)["verdict"] == REPRODUCED
    r = verdict(succeeds)
    assert r["verdict"] == REPRODUCED and "3 cells" in r["evidence"]


def test_quantifiers_any_and_mean():
    sel = {"variant": "attention-2L"}
    assert verdict({"where": sel, "test": {"op": "<", "value": 0.5}, "quantifier": "any"})["verdict"] == (
        REPRODUCED
    )
    assert verdict({"where": sel, "test": {"op": "<", "value": 0.3}, "quantifier": "any"})["verdict"] == (
        NOT_REPRODUCED
    )
    mean = (0.97 + 0.40 + 0.99 + 0.96) / 4  # 0.83
    assert verdict({"where": sel, "test": {"op": ">", "value": mean - 1e-6}, "quantifier": "mean"})[
        "verdict"
    ] == (REPRODUCED)
    r = verdict({"where": sel, "test": {"op": ">", "value": mean + 1e-6}, "quantifier": "mean"})
    assert r["verdict"] == NOT_REPRODUCED and "mean 0.8300" in r["evidence"]


def test_missing_cells_give_not_run_and_partial_sets_say_so():
    assert (
        verdict({"where": {"variant": "mamba-2L"}, "test": {"op": ">=", "value": 0.9}})["verdict"] == NOT_RUN
    )
    cells = [cell("cat-1L", 64, 64, None), cell("cat-1L", 64, 128, None)]
    r = verdict({"where": {"variant": "cat-1L"}, "test": {"op": ">=", "value": 0.99}}, cells)
    assert r["verdict"] == NOT_RUN and "0 of 2" in r["evidence"]
    # one cell done (passing), one not run: reproduced on what ran, and the evidence says 1 of 2
    cells = [cell("cat-1L", 64, 64, 1.0), cell("cat-1L", 64, 128, None)]
    r = verdict({"where": {"variant": "cat-1L"}, "test": {"op": ">=", "value": 0.99}}, cells)
    assert r["verdict"] == REPRODUCED and "1 of 2 cells" in r["evidence"] and "not run" in r["evidence"]


def test_an_incomplete_cell_never_decides_a_verdict():
    # max over 3 seeds: only 1 has finished and it is low; the claim must wait, not fail
    cells = [cell("cat-1L", 64, 64, 0.2, runs_finished=1, runs_planned=3)]
    r = verdict({"where": {"variant": "cat-1L"}, "test": {"op": ">=", "value": 0.99}}, cells)
    assert r["verdict"] == NOT_RUN and "0.2000 so far (1/3 runs)" in r["evidence"]
    cells[0].update(runs_finished=3)
    assert verdict({"where": {"variant": "cat-1L"}, "test": {"op": ">=", "value": 0.99}}, cells)[
        "verdict"
    ] == (NOT_REPRODUCED)


def test_compare_pairs_over_the_remaining_axes():
    # cat vs attention paired by (d, L): the differences are 0.03, 0.595, 0.009, 0.04
    base = {"compare": {"left": {"variant": "cat-1L"}, "right": {"variant": "attention-2L"}, "op": ">"}}
    r = verdict(base)
    assert r["verdict"] == REPRODUCED and "4 of 4 pairs" in r["evidence"]
    assert "d_model=64 seq_len=128: cat-1L 0.9950 vs attention-2L 0.4000" in r["evidence"]
    with_margin = {**base, "compare": {**base["compare"], "margin": 0.02}}
    r = verdict(with_margin)  # (128, 64): 0.999 - 0.99 = 0.009 < 0.02
    assert r["verdict"] == NOT_REPRODUCED and "3 of 4 pairs" in r["evidence"]
    # pairing is by the other axes: a wrong pairing (e.g. cat (64, 64) with attention (64, 128)) would
    # make "cat >= attention + 0.5" hold once; the right pairing holds only at (64, 128)
    half = {"compare": {**base["compare"], "op": ">=", "margin": 0.5}, "quantifier": "any"}
    assert verdict(half)["verdict"] == REPRODUCED
    only = {**half, "where": {"data.task.seq_len": 64}}
    assert verdict(only)["verdict"] == NOT_REPRODUCED


def test_compare_with_several_right_models_and_a_tolerance():
    # "CAT outperforms every baseline": each (d, L) pairs CAT with both 2-layer models
    spec = {
        "compare": {
            "left": {"variant": "cat-1L"},
            "right": {"variant": ["attention-2L", "base_conv-2L"]},
            "op": ">=",
        }
    }
    r = verdict(spec)
    assert r["verdict"] == REPRODUCED and "8 of 8 pairs" in r["evidence"]
    assert "d_model=64 seq_len=128: cat-1L 0.9950 vs base_conv-2L 0.1000" in r["evidence"]
    # a baseline at 1.000 beside CAT at 0.995: a strict claim fails, a tolerance of 0.01 accepts the tie
    cells = [cell("cat-1L", 64, 64, 0.995), cell("attention-2L", 64, 64, 1.0)]
    assert verdict(spec, cells)["verdict"] == NOT_REPRODUCED
    tolerant = {"compare": {**spec["compare"], "margin": -0.01}}
    assert verdict(tolerant, cells)["verdict"] == REPRODUCED
    with pytest.raises(ValueError, match="distance"):
        Claim.model_validate(
            {"claim": "c", "paper_ref": "p", "compare": {**spec["compare"], "op": "==", "margin": -0.1}}
        )


def test_compare_lower_and_equal_and_missing_partner():
    lower = {"compare": {"left": {"variant": "base_conv-2L"}, "right": {"variant": "cat-1L"}, "op": "<"}}
    assert verdict(lower)["verdict"] == REPRODUCED
    equal = {
        "where": {"model.d_model": 128},
        "compare": {
            "left": {"variant": "cat-1L"},
            "right": {"variant": "attention-2L"},
            "op": "==",
            "margin": 0.05,
        },
    }
    assert verdict(equal)["verdict"] == REPRODUCED
    equal["compare"]["margin"] = 0.01
    assert verdict(equal)["verdict"] == NOT_REPRODUCED
    cells = [c for c in CELLS if not (c["variant"] == "attention-2L" and c["model.d_model"] == 64)]
    r = verdict({"compare": lower["compare"] | {"right": {"variant": "attention-2L"}}}, cells)
    assert r["evidence"].count("no right-hand cell") == 2 and "0 of 2 pairs hold" in r["evidence"]
    none = verdict({"compare": {"left": {"variant": "mamba-2L"}, "right": {"variant": "cat-1L"}, "op": ">"}})
    assert none["verdict"] == NOT_RUN


@pytest.mark.parametrize(
    "spec, message",
    [
        ({"claim": "x", "paper_ref": "p"}, "exactly one of `test`, `compare`, `trend`, .* or `overfit`"),
        ({"claim": "x", "paper_ref": "p", "test": {"op": "=>", "value": 1}}, "op"),
        (
            {"claim": "x", "paper_ref": "p", "test": {"op": ">", "value": 1}, "quantifier": "most"},
            "quantifier",
        ),
        ({"claim": "x", "paper_ref": "p", "test": {"op": ">", "value": 1}, "wher": {}}, "wher"),
    ],
)
def test_bad_claims_are_one_line_config_errors(spec, message):
    exp = {**SPEC, "claims": [spec]}
    with pytest.raises(ConfigError, match=message) as err:
        load_experiment(exp)
    assert "\n" not in str(err.value)


def test_claims_name_known_variants_and_fields():
    bad_variant = {
        "claim": "x",
        "paper_ref": "p",
        "where": {"variant": "catt"},
        "test": {"op": ">", "value": 0},
    }
    with pytest.raises(ConfigError, match=r"claims\[0\]: unknown variant 'catt'"):
        load_experiment({**SPEC, "claims": [bad_variant]})
    bad_path = {"claim": "x", "paper_ref": "p", "where": {"model.dmodel": 8}, "test": {"op": ">", "value": 0}}
    with pytest.raises(ConfigError, match="dmodel"):
        load_experiment({**SPEC, "claims": [bad_path]})


def test_shipped_experiments_have_claims_that_validate():
    for name in shipped_experiments():
        exp = load_experiment(name)
        # an experiment no paper reports on (zoology's newer tasks) lists findings, never claims
        findings_only = exp.claim.startswith("none:")
        assert bool(exp.claims) != findings_only, f"{name}: claims {len(exp.claims)}, claim: {exp.claim!r}"
        for claim in exp.claims:
            assert claim.paper_ref and claim.claim


def test_shipped_within_tolerance_claims_accept_a_tie():
    """A claim read as "as accurate as X, within t" is ``left >= right - t``: a negative margin.
    (Written with +t it demanded a lead of t; programmatic sparse attention 0.9965 against full
    attention 0.9945 read "not reproduced".)"""
    for name in shipped_experiments():
        for claim in load_experiment(name).claims:
            cmp = claim.compare
            if cmp is not None and cmp.op in (">=", "<=") and "within" in claim.claim:
                assert cmp.margin < 0, f"{name}: {claim.claim!r} has margin {cmp.margin}"
    within = [c for c in load_experiment("zoology-sparse-attention").claims if "within" in c.claim]
    (sparse,) = [c for c in within if c.compare.op == ">="]
    spec = sparse.model_dump(exclude_none=True)

    def sparse_cells(programmatic, full):
        return [cell("programmatic", 32, 64, programmatic), cell("full-attention", 32, 64, full)]

    assert verdict(spec, sparse_cells(0.9965, 0.9945))["verdict"] == REPRODUCED
    assert verdict(spec, sparse_cells(0.9500, 0.9945))["verdict"] == REPRODUCED
    assert verdict(spec, sparse_cells(0.9400, 0.9945))["verdict"] == NOT_REPRODUCED


# -- through the store and the CLI ----------------------------------------------------------
SPEC = {
    "kind": "sweep",
    "name": "tiny-claims",
    "paper": "test Fig. 0",
    "base": {
        "data": {"task": {"name": "mqar_cat", "vocab_size": 30, "seq_len": 8}, "n_train": 48, "n_test": 16},
        "model": {"d_model": 8},
        "train": {"epochs": 1, "batch_size": 16, "device": "cpu"},
    },
    "variants": {
        "cat-1L": {"model": {"n_layers": 1, "mixer": "cat"}},
        "attention-1L": {"model": {"n_layers": 1, "mixer": "attention"}},
    },
    "grid": {"model.d_model": [8, 16], "train.lr": [1e-2, 3e-3]},
    "aggregate": {"metric": M, "reduce": "max", "over": ["train.lr"]},
    "claims": [
        {
            "claim": "CAT solves it at every width",
            "paper_ref": "test Fig. 0",
            "where": {"variant": "cat-1L"},
            "test": {"op": ">=", "value": 0.99},
        },
        {
            "claim": "CAT ahead of attention at d = 16",
            "paper_ref": "test Sec. 1",
            "where": {"model.d_model": 16},
            "compare": {"left": {"variant": "cat-1L"}, "right": {"variant": "attention-1L"}, "op": ">"},
        },
    ],
    # quick: d = 8 only, so the second claim's cells are not in this run set
    "presets": {"quick": {"grid": {"model.d_model": [8]}}, "paper": {}},
}


def write_runs(store: ResultsStore, exp, accuracy) -> None:
    """One finished run per planned point, with ``accuracy(point)`` as its metric (no training)."""
    for p in exp.expand():
        config = p.config.model_dump(mode="json")
        run_id = store.start_run(config, p.config_hash, name=p.config.name, experiment=exp.name)
        store.finish_run(run_id, {M: accuracy(p.point)}, wall_s=0.1, params=1, checkpoint=None)


def good(point):  # the lr 1e-2 run is the good one: the cell's max must pick it
    if point["variant"] == "cat-1L":
        return 1.0 if point["train.lr"] == 1e-2 else 0.3
    return 0.5


def test_collected_cells_feed_the_claims(tmp_path):
    exp = load_experiment(SPEC, "paper")
    store = ResultsStore(tmp_path / "r")
    write_runs(store, exp, good)
    results = claim_results(collect_results(exp, store))
    assert [r["verdict"] for r in results] == [REPRODUCED, REPRODUCED]
    quick = claim_results(collect_results(load_experiment(SPEC, "quick"), store))
    assert [r["verdict"] for r in quick] == [REPRODUCED, NOT_RUN]


def test_cli_report_json_and_check_exit_codes(tmp_path, run_cli):
    import yaml

    path = tmp_path / "tiny-claims.yaml"
    path.write_text(yaml.safe_dump(SPEC))
    exp = load_experiment(SPEC, "paper")
    store_dir = tmp_path / "r"
    args = ["--results", str(store_dir), "--preset", "paper"]
    # check is read-only: a results directory that does not exist is refused, not created
    code, _, err = run_cli(["study", "check", str(path), *args])
    assert code == 2 and "does not exist" in err and not store_dir.exists()
    # nothing run yet: every claim "not run"; check prints them and exits 0
    ResultsStore(store_dir)
    code, out, _ = run_cli(["study", "check", str(path), *args])
    assert code == 0 and out.count("[not run]") == 2

    write_runs(ResultsStore(store_dir), exp, good)
    code, out, _ = run_cli(["study", "report", str(path), *args, "--json", "--out", str(tmp_path / "r.html")])
    payload = json.loads(out)
    assert code == 0
    assert [c["verdict"] for c in payload["claims"]] == [REPRODUCED, REPRODUCED]
    assert set(payload["claims"][0]) >= {"claim", "paper_ref", "verdict", "evidence"}
    assert payload["runs"] == {"finished": 8, "planned": 8}
    page = (tmp_path / "r.html").read_text()  # the claims table, one coloured row per claim
    assert page.count("<tr class='reproduced'>") == 2 and "CAT ahead of attention at d = 16" in page
    code, out, _ = run_cli(["study", "check", str(path), *args])
    assert code == 0 and "2 reproduced" in out
    # report and check each appended their verdicts to the store's log, latest last
    log = json.loads((store_dir / "verdicts" / "tiny-claims__paper.json").read_text())
    assert [e["preset"] for e in log] == ["paper"] * 3  # check (not run), report, check
    assert [c["verdict"] for c in log[-1]["claims"]] == [REPRODUCED, REPRODUCED]
    assert [c["verdict"] for c in log[0]["claims"]] == [NOT_RUN, NOT_RUN]

    # a second store where CAT falls short at d = 16, beyond the noise of 16 test examples:
    # check exits 1 and names the number
    bad_dir = tmp_path / "bad"
    write_runs(ResultsStore(bad_dir), exp, lambda p: 0.5 if p["model.d_model"] == 16 else good(p))
    code, out, _ = run_cli(["study", "check", str(path), "--results", str(bad_dir), "--preset", "paper"])
    assert code == 1 and "[not reproduced] CAT solves it" in out and "0.5000" in out


def test_cli_check_user_errors_exit_2(tmp_path, run_cli):
    code, _, err = run_cli(["study", "check", "no-such-experiment", "--results", str(tmp_path / "r")])
    assert code == 2 and "unknown experiment" in err and err.count("\n") == 1


def test_a_claim_over_several_metrics_tests_each():
    # length generalization: accuracy at every test length, one verdict
    cells = [
        {"variant": "cat-1L", "accuracy@32": 1.0, "accuracy@1024": 0.999},
        {"variant": "attention-2L", "accuracy@32": 0.98, "accuracy@1024": 0.10},
    ]
    metrics = ["accuracy@32", "accuracy@1024"]
    spec = {"where": {"variant": "cat-1L"}, "metric": metrics, "test": {"op": ">=", "value": 0.99}}
    r = verdict(spec, cells)
    assert r["verdict"] == REPRODUCED and "cat-1L accuracy@1024 0.9990" in r["evidence"]
    spec["where"] = {"variant": "attention-2L"}
    r = verdict(spec, cells)
    assert r["verdict"] == NOT_REPRODUCED and "0 of 2 cells" in r["evidence"]
    # compare pairs per metric: CAT ahead at 1024 by a lot, not at 32
    spec = {
        "metric": metrics,
        "compare": {
            "left": {"variant": "cat-1L"},
            "right": {"variant": "attention-2L"},
            "op": ">",
            "margin": 0.5,
        },
    }
    r = verdict(spec, cells)
    assert r["verdict"] == NOT_REPRODUCED and "1 of 2 pairs" in r["evidence"]


def test_a_preset_never_redefines_the_claims():
    own = {"claim": "x", "paper_ref": "p", "where": {"variant": "cat-1L"}, "test": {"op": ">", "value": 0}}
    spec = {**SPEC, "presets": {"quick": {"claims": [own]}, "paper": {}}}
    with pytest.raises(ConfigError, match=r"^presets.quick.claims: a preset runs fewer cells"):
        load_experiment(spec, "quick")


def test_report_and_check_read_a_theory_experiments_stored_result(tmp_path, run_cli):
    from mixerzoo.studies.computed.files import load_theory

    exp = load_theory("cat-fig4")
    results = tmp_path / "r"
    args = ["--results", str(results)]
    # before `mixerzoo study run`: every claim "not run", exit 0
    code, out, _ = run_cli(["study", "check", "cat-fig4", *args])
    assert code == 0 and out.count("[not run]") == len(exp.claims)
    # a stored result with one claim not reproduced: check exits 1, report --json gives the verdicts
    claims = [
        {"claim": c.claim, "paper_ref": c.paper_ref, "verdict": REPRODUCED, "evidence": "x"}
        for c in exp.claims
    ]
    claims[0]["verdict"] = NOT_REPRODUCED
    payload = {
        "name": "cat-fig4",
        "paper_ref": exp.paper_ref,
        "preset": "quick",
        "claims": claims,
        "cells": [],
    }
    (results / "theory").mkdir(parents=True)
    (results / "theory" / "cat-fig4.json").write_text(json.dumps(payload))
    code, out, _ = run_cli(["study", "check", "cat-fig4", *args])
    assert code == 1 and out.count("[not reproduced]") == 1
    code, out, _ = run_cli(["study", "report", "cat-fig4", *args, "--json"])
    assert code == 0 and [c["verdict"] for c in json.loads(out)["claims"]] == [c["verdict"] for c in claims]
    assert "not reproduced" in (results / "reports" / "cat-fig4.html").read_text()
    # a corrupt result file: one clear line, exit 2
    (results / "theory" / "cat-fig4.json").write_text("{not json")
    code, _, err = run_cli(["study", "check", "cat-fig4", *args])
    assert code == 2 and "not a theory result" in err and err.count("\n") == 1


# -- premises, ties at the floor, trends, quoted quantities, source and stand-ins -----------
FAILS_AT_128 = {"variant": "attention-2L", "model.d_model": 64, "data.task.seq_len": 128}
ATTENTION_DECLINES = {
    "where": FAILS_AT_128,
    "test": {"op": "<", "value": 0.5},
}


def test_a_premise_that_holds_lets_the_claim_be_judged():
    premise = {
        "where": {"variant": "attention-2L", "data.task.seq_len": 64},
        "test": {"op": ">=", "value": 0.9},
    }
    r = verdict({**ATTENTION_DECLINES, "premise": {**premise, "why": "attention learned at L = 64"}})
    assert r["verdict"] == REPRODUCED
    assert r["premise"].startswith("[held] attention learned at L = 64") and "0.9700" in r["premise"]


def test_a_premise_not_met_makes_the_claim_inconclusive_with_its_numbers():
    # attention "declines" at L = 128, but it never learned at L = 64 either: nothing declined
    cells = [c if c["variant"] != "attention-2L" else {**c, M: 0.02} for c in CELLS]
    premise = {
        "where": {"variant": "attention-2L", "data.task.seq_len": 64},
        "test": {"op": ">=", "value": 0.9},
    }
    r = verdict({**ATTENTION_DECLINES, "premise": [{**premise, "why": "attention learned at L = 64"}]}, cells)
    assert r["verdict"] == INCONCLUSIVE
    assert "premise not met (attention learned at L = 64" in r["evidence"]
    assert "0.0200" in r["evidence"] and "the claim itself, reproduced" in r["evidence"]
    without = verdict(ATTENTION_DECLINES, cells)
    assert without["verdict"] == REPRODUCED and without["premise"] is None


def test_a_premise_reads_every_cell_not_only_the_claims_selection():
    premise = {"where": {"variant": "cat-1L"}, "test": {"op": ">=", "value": 0.99}, "why": "CAT learned"}
    r = verdict({**ATTENTION_DECLINES, "premise": premise})
    assert r["verdict"] == REPRODUCED and "4 of 4 cells" in r["premise"]


def test_a_premise_with_no_complete_cell():
    premise = {"where": {"variant": "mamba-2L"}, "test": {"op": ">=", "value": 0.9}, "why": "mamba learned"}
    r = verdict({**ATTENTION_DECLINES, "premise": premise})
    assert r["verdict"] == INCONCLUSIVE and "premise not run (mamba learned" in r["evidence"]
    # the claim itself has no cell either: not run
    r = verdict({"where": {"variant": "h3-2L"}, "test": {"op": "<", "value": 0.5}, "premise": premise})
    assert r["verdict"] == NOT_RUN


def test_a_tie_at_the_floor_is_never_a_win():
    cells = [cell("cat-1L", 64, 64, 0.0), cell("attention-2L", 64, 64, 0.0)]
    spec = {
        "compare": {
            "left": {"variant": "cat-1L"},
            "right": {"variant": "attention-2L"},
            "op": ">=",
            "margin": -0.01,
        }
    }
    r = verdict(spec, cells)  # accuracy's floor is 0 without `floor:`
    assert r["verdict"] == INCONCLUSIVE and "both at chance" in r["evidence"]
    above = [cell("cat-1L", 64, 64, 0.3), cell("attention-2L", 64, 64, 0.3)]
    assert verdict(spec, above)["verdict"] == REPRODUCED  # a tie above the floor is within the tolerance
    floored = {"compare": {**spec["compare"], "floor": 0.3}}
    assert verdict(floored, above)["verdict"] == INCONCLUSIVE
    # one real loss among the pairs: not reproduced, whatever the ties
    mixed = [*cells, cell("cat-1L", 64, 128, 0.2), cell("attention-2L", 64, 128, 0.9)]
    assert verdict(spec, mixed)["verdict"] == NOT_REPRODUCED


def test_a_tie_at_the_floor_of_a_lower_is_better_metric():
    cells = [{"variant": "a", "loss": 2.0}, {"variant": "b", "loss": 2.0}]
    claim = Claim.model_validate(
        {
            "claim": "c",
            "paper_ref": "p",
            "compare": {"left": {"variant": "a"}, "right": {"variant": "b"}, "op": "<=", "floor": 2.0},
        }
    )
    (r,) = evaluate_claims([claim], cells, "loss")
    assert r["verdict"] == INCONCLUSIVE


def trend_cells(values, task="listops"):
    return [{"data.task.name": task, "data.n_train": n, M: v} for n, v in zip((0.25, 0.5, 1.0), values)]


def test_a_trend_tests_every_step_not_the_endpoints():
    spec = {"trend": {"axis": "data.n_train", "op": ">"}}
    r = verdict(spec, trend_cells((0.344, 0.364, 0.360)))  # the endpoints alone would pass
    assert r["verdict"] == NOT_REPRODUCED and "0.3440 -> 0.3640 -> 0.3600 (a step fails)" in r["evidence"]
    assert verdict(spec, trend_cells((0.344, 0.350, 0.360)))["verdict"] == REPRODUCED
    assert (
        verdict(
            {"trend": {"axis": "data.n_train", "op": ">", "margin": 0.01}}, trend_cells((0.344, 0.350, 0.360))
        )["verdict"]
        == NOT_REPRODUCED
    )
    # groups: every task must improve at every step (all), or one task (any)
    two = trend_cells((0.3, 0.4, 0.5)) + trend_cells((0.5, 0.4, 0.6), task="text")
    assert verdict(spec, two)["verdict"] == NOT_REPRODUCED
    assert verdict({**spec, "quantifier": "any"}, two)["verdict"] == REPRODUCED


def test_a_quoted_quantity_is_tested_with_its_tolerance():
    cells = [{"variant": "a", "gap_closed": 0.82}]
    spec = {"metric": "gap_closed", "test": {"op": ">=", "quoted": 0.85, "tolerance": 0.05}}
    r = verdict(spec, cells)
    assert r["verdict"] == REPRODUCED and "quoted 0.85, tolerance 0.05" in r["evidence"]
    assert verdict({**spec, "test": {"op": ">=", "quoted": 0.85, "tolerance": 0.02}}, cells)["verdict"] == (
        NOT_REPRODUCED
    )
    with pytest.raises(ValueError, match=r"exactly one of `value` \(a number or `chance`\) or `quoted`"):
        Claim.model_validate({"claim": "c", "paper_ref": "p", "test": {"op": ">=", "value": 1, "quoted": 1}})


def share_cells(base, programmatic, attention, L=64):
    return [
        {"variant": v, "data.task.seq_len": L, M: a}
        for v, a in (("base_conv", base), ("programmatic", programmatic), ("attention", attention))
    ]


CLOSES_85 = {
    "share": {
        "part": {"variant": "programmatic"},
        "low": {"variant": "base_conv"},
        "high": {"variant": "attention"},
        "test": {"op": ">=", "quoted": 0.85, "tolerance": 0.05},
    }
}


def test_a_share_of_the_gap_is_tested_against_the_quoted_number():
    r = verdict(CLOSES_85, share_cells(0.10, 0.85, 0.98))  # (0.85 - 0.10) / (0.98 - 0.10) = 0.8523
    assert r["verdict"] == REPRODUCED and "share 0.8523" in r["evidence"]
    assert "quoted 0.85, tolerance 0.05" in r["evidence"]
    # ahead of the low end but short of the quoted share: the ordering alone is not the claim
    r = verdict(CLOSES_85, share_cells(0.10, 0.60, 0.98))
    assert r["verdict"] == NOT_REPRODUCED and "share 0.5682" in r["evidence"]
    # every group is tested (here one sequence length fails)
    two = share_cells(0.10, 0.85, 0.98) + share_cells(0.10, 0.30, 0.98, L=128)
    assert verdict(CLOSES_85, two)["verdict"] == NOT_REPRODUCED
    assert verdict({**CLOSES_85, "quantifier": "any"}, two)["verdict"] == REPRODUCED


def test_a_share_of_no_gap_is_never_a_pass():
    # attention no better than BaseConv: nothing to close, whatever the ratio would say
    for cells in (share_cells(0.0, 0.0, 0.0), share_cells(0.30, 0.50, 0.20)):
        r = verdict(CLOSES_85, cells)
        assert r["verdict"] == INCONCLUSIVE and "no gap" in r["evidence"], r["evidence"]
    assert verdict(CLOSES_85, share_cells(0.1, None, 0.9))["verdict"] == NOT_RUN


def test_a_relative_improvement_of_a_lower_is_better_metric():
    # "improves GLA more than 50% in TVD": (0.302 - 0.624) / (0 - 0.624) = 0.516
    spec = {
        "metric": "regbench_tvd",
        "share": {
            "part": {"variant": "gla+ngh1"},
            "low": {"variant": "gla"},
            "high_value": 0.0,
            "test": {"op": ">", "value": 0.5},
        },
    }
    cells = [{"variant": "gla", "regbench_tvd": 0.624}, {"variant": "gla+ngh1", "regbench_tvd": 0.302}]
    r = verdict(spec, cells)
    assert r["verdict"] == REPRODUCED and "share 0.5160" in r["evidence"]
    worse = [cells[0], {"variant": "gla+ngh1", "regbench_tvd": 0.700}]  # the heads made it worse
    assert verdict(spec, worse)["verdict"] == NOT_REPRODUCED
    with pytest.raises(ValueError, match="exactly one of `high`"):
        Claim.model_validate(
            {"claim": "c", "paper_ref": "p", "share": {**spec["share"], "high": {"variant": "x"}}}
        )


def test_source_and_stand_ins_are_in_every_verdict():
    stand_in = StandIn(data="8x8 digits (scikit-learn)", stands_for="MNIST", presets=["quick"])
    spec = {
        "claim": "c",
        "paper_ref": "p",
        "where": {"variant": "cat-1L"},
        "test": {"op": ">=", "value": 0.99},
    }
    claims = [
        Claim.model_validate(spec),
        Claim.model_validate({**spec, "source": "project", "stand_ins": []}),
    ]
    quick = evaluate_claims(claims, CELLS, M, stand_ins=[stand_in], preset="quick")
    assert [r["source"] for r in quick] == ["paper", "project"]
    assert quick[0]["stand_ins"] == ["8x8 digits (scikit-learn) for MNIST"] and quick[1]["stand_ins"] == []
    assert "on stand-in data: 8x8 digits (scikit-learn) for MNIST" in quick[0]["evidence"]
    assert verdict_label(quick[0]) == "reproduced on stand-in data"
    counts, own = count_verdicts(quick), count_verdicts(quick, "project")
    assert counts["reproduced on stand-in data"] == 1 and counts[REPRODUCED] == 0 and own[REPRODUCED] == 1
    paper = evaluate_claims(claims, CELLS, M, stand_ins=[stand_in], preset="paper")
    assert paper[0]["stand_ins"] == [] and count_verdicts(paper)[REPRODUCED] == 1


def test_metric_directions_built_in_and_declared():
    assert metric_direction("accuracy@1024") == metric_direction("ppl_decrease") == "higher"
    assert metric_direction("regbench_tvd") == metric_direction("bpc") == "lower"
    assert metric_direction("margin", {"margin": "higher"}) == "higher"
    with pytest.raises(ConfigError, match="direction unknown; add `metrics: {margin: higher}`"):
        metric_direction("margin")


def test_a_premise_or_trend_naming_an_unknown_variant_or_path_is_one_line(tmp_path):
    premise = {"where": {"variant": "nope"}, "test": {"op": ">=", "value": 0.9}, "why": "w"}
    bad = {"claim": "x", "paper_ref": "p", "test": {"op": ">", "value": 0}, "premise": premise}
    with pytest.raises(ConfigError, match=r"claims\[0\]: unknown variant 'nope'"):
        load_experiment({**SPEC, "claims": [bad]})
    trend = {"claim": "x", "paper_ref": "p", "trend": {"axis": "model.nope", "op": ">"}}
    with pytest.raises(ConfigError, match="nope") as err:
        load_experiment({**SPEC, "claims": [trend]})
    assert "\n" not in str(err.value)


def test_a_new_predicate_is_one_class():
    """A predicate is one class with its own evaluation: a claim schema built with it validates,
    judges and scopes claims that state it, with no other change to the claims package."""
    from mixerzoo.claims import PREDICATES, Predicate
    from mixerzoo.claims.predicates.base import Reading
    from mixerzoo.claims.schema import claim_model

    class Spread(Predicate):  # every selected cell within `width` of the others
        width: float

        def evaluate(self, reading: Reading):
            values = [c[reading.key] for c in reading.cells if reading.key in c]
            ok = max(values) - min(values) <= self.width
            return (
                (REPRODUCED if ok else NOT_REPRODUCED),
                f": spread {max(values) - min(values):.2f}",
                {
                    "cells": reading.cells,
                    "sigmas": [],
                },
            )

    claim_cls = claim_model({**PREDICATES, "spread": Spread})
    claim = claim_cls.model_validate({"claim": "all alike", "paper_ref": "p", "spread": {"width": 0.1}})
    cells = [{"variant": "a", "acc": 0.5}, {"variant": "b", "acc": 0.55}]
    (result,) = evaluate_claims([claim], cells, "acc")
    assert result["verdict"] == REPRODUCED and result["evidence"] == "acc: spread 0.05"
    assert result["strength"]["cells"] == 2
    with pytest.raises(ValueError, match="`compare`, `trend`, `share`, .* or `spread`"):
        claim_cls.model_validate({"claim": "x", "paper_ref": "p"})
