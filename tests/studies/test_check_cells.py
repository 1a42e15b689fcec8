"""``check --template`` / ``--cells``: a study's planned cells written as a table to fill in, and its
claims judged on a filled table without a results store; the verdict logs and ``mixerzoo claims``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mixerzoo.claims import INCONCLUSIVE, NOT_REPRODUCED, NOT_RUN, REPRODUCED
from mixerzoo.registry import ConfigError
from mixerzoo.studies.dispatch import find_study
from mixerzoo.studies.verdict_log import append_verdicts, claims_matrix, log_path, matrix_markdown
from tests.studies.nulls import null_table

ROOT = Path(__file__).resolve().parents[2]
SWEEP = "cat-mqar"
M = "accuracy_per_query"


def filled(template: dict, value_of) -> dict:
    table = json.loads(json.dumps(template))
    for cell in table["cells"]:
        for metric in table["metrics"]:
            cell[metric] = value_of(cell, metric)
    return table


def test_a_sweep_template_lists_every_planned_cell_with_the_metrics_its_claims_read():
    study = find_study(SWEEP)
    template = study.template("quick", {})
    plan = study.claim_plan("quick", {})
    assert template["metrics"] == {M: "higher"}
    assert len(template["cells"]) == len(plan.cells) > 0
    assert all(cell[M] is None and "variant" in cell for cell in template["cells"])
    variants = {c["variant"] for c in template["cells"]}
    assert variants == set(study.load("quick").variants)


def test_a_sweep_judged_on_a_filled_template():
    study = find_study(SWEEP)
    template = study.template("quick", {})
    solved = study.judge_cells("quick", {}, filled(template, lambda c, m: 1.0))
    assert solved and all(v["verdict"] in (REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE, NOT_RUN) for v in solved)
    assert any(v["verdict"] == REPRODUCED for v in solved)
    null = study.judge_cells("quick", {}, null_table(template))
    assert not any(v["verdict"] == REPRODUCED for v in null)


def test_null_table_levels():
    template = {
        "metrics": {"accuracy": "higher", "loss": "lower"},
        "cells": [{"variant": "a"}, {"variant": "b"}],
    }
    table = null_table(template, {"loss": 3.4})
    assert [c["accuracy"] for c in table["cells"]] == [0.0, 0.0]
    assert [c["loss"] for c in table["cells"]] == [3.4, 3.4]
    assert null_table(template)["cells"][0]["loss"] == 1.0
    assert "accuracy" not in template["cells"][0]  # the template is kept


def test_a_computed_study_plans_its_cells_through_its_module(monkeypatch):
    study = find_study("cat-thm1-mqar")
    module = study.exp.module()
    monkeypatch.delattr(module, "plan_cells", raising=False)
    with pytest.raises(ConfigError, match="cat-thm1-mqar does not plan its cells before running"):
        study.template("quick", {})
    monkeypatch.setattr(
        module, "plan_cells", lambda p: [{"seq_len": L} for L in p["seq_lens"]], raising=False
    )
    template = study.template("quick", {})
    assert [c["seq_len"] for c in template["cells"]] == [64, 1024, 16384]
    assert template["metrics"] == {M: "higher"}
    assert {v["verdict"] for v in study.judge_cells("quick", {}, filled(template, lambda c, m: 1.0))} == {
        REPRODUCED
    }
    assert {v["verdict"] for v in study.judge_cells("quick", {}, null_table(template))} == {NOT_REPRODUCED}


def write_cells(tmp_path, study_name: str, value_of) -> Path:
    template = find_study(study_name).template("quick", {})
    path = tmp_path / "cells.json"
    path.write_text(json.dumps(filled(template, value_of)))
    return path


def test_cli_template_then_cells_exit_codes(tmp_path, run_cli):
    template = tmp_path / "template.json"
    code, out, err = run_cli(["study", "check", SWEEP, "--preset", "quick", "--template", template])
    assert code == 0 and "cells" in json.loads(template.read_text()), err
    # nothing learned: the comparison claims are inconclusive, the solved-it claims not reproduced
    null = tmp_path / "null.json"
    null.write_text(json.dumps(null_table(json.loads(template.read_text()))))
    code, out, err = run_cli(
        ["study", "check", SWEEP, "--preset", "quick", "--cells", null, "--json", tmp_path / "v.json"]
    )
    verdicts = [c["verdict"] for c in json.loads((tmp_path / "v.json").read_text())["claims"]]
    assert NOT_REPRODUCED in verdicts and code == 1
    assert "[inconclusive]" in out or INCONCLUSIVE not in verdicts


def test_cli_exit_0_on_inconclusive(tmp_path, run_cli):
    # a study whose only judged claim is inconclusive: a premise that fails
    spec = {
        "kind": "sweep",
        "name": "tiny-premise",
        "paper": "test Fig. 0",
        "base": {
            "data": {
                "task": {"name": "mqar_cat", "vocab_size": 30, "seq_len": 8},
                "n_train": 48,
                "n_test": 16,
            },
            "model": {"d_model": 8},
            "train": {"epochs": 1, "batch_size": 16, "device": "cpu"},
        },
        "variants": {
            "cat-1L": {"model": {"n_layers": 1, "mixer": "cat"}},
            "attention-1L": {"model": {"n_layers": 1, "mixer": "attention"}},
        },
        "aggregate": {"metric": M},
        "presets": {"quick": {}, "paper": {}},
        "claims": [
            {
                "claim": "attention fails",
                "paper_ref": "test",
                "where": {"variant": "attention-1L"},
                "test": {"op": "<", "value": 0.5},
                "premise": {
                    "where": {"variant": "cat-1L"},
                    "test": {"op": ">=", "value": 0.9},
                    "why": "CAT learned",
                },
            }
        ],
    }
    path = tmp_path / "tiny.yaml"
    path.write_text(json.dumps(spec))
    cells = tmp_path / "cells.json"
    cells.write_text(
        json.dumps({"cells": [{"variant": v, "seed": 0, M: 0.1} for v in ("cat-1L", "attention-1L")]})
    )
    code, out, err = run_cli(["study", "check", path, "--preset", "quick", "--cells", cells])
    assert code == 0, err
    assert "[inconclusive] attention fails" in out and "1 inconclusive" in out


@pytest.mark.parametrize(
    "content, message",
    [
        ("{not json", "not JSON"),
        ('{"rows": []}', 'expected {"metrics"'),
        ('{"cells": [{"data.task.name": "mqar_cat"}]}', "has no value for axis"),
        ('{"cells": [CELL]}', "not a number or null"),
    ],
)
def test_cli_a_bad_cells_file_is_one_line(tmp_path, run_cli, content, message):
    template = find_study(SWEEP).template("quick", {})
    cell = {**template["cells"][0], M: "high"}
    path = tmp_path / "bad.json"
    path.write_text(content.replace("CELL", json.dumps(cell)))
    code, out, err = run_cli(["study", "check", SWEEP, "--preset", "quick", "--cells", path])
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err
    code, _, err = run_cli(["study", "check", SWEEP, "--cells", tmp_path / "missing.json"])
    assert code == 2 and "no such file" in err


def test_verdict_logs_keep_the_latest_verdict_per_preset(tmp_path):
    rows = [find_study(SWEEP).claim_row()]
    first = rows[0]["claims"][0]["claim"]
    base = {"paper_ref": "p", "source": "paper", "evidence": "e", "stand_ins": []}
    results = tmp_path / "results"
    results.mkdir()
    assert append_verdicts(results, SWEEP, "quick", [{"claim": first, "verdict": NOT_REPRODUCED, **base}])
    path = append_verdicts(results, SWEEP, "quick", [{"claim": first, "verdict": REPRODUCED, **base}])
    assert path == log_path(results, SWEEP, "quick") and len(json.loads(path.read_text())) == 2
    matrix = claims_matrix(rows, [str(results)])
    assert matrix[0]["verdicts"]["quick"]["verdict"] in (REPRODUCED, NOT_REPRODUCED)
    assert matrix[0]["verdicts"]["paper"] == {"verdict": NOT_RUN, "results": None}
    assert matrix[0]["verdicts"]["quick"]["results"] == str(results)
    assert "| cat-mqar |" in matrix_markdown(matrix, [str(results)])
    # no results folder: nothing is created
    assert (
        append_verdicts(tmp_path / "absent", SWEEP, "quick", [{"claim": first, "verdict": NOT_RUN}]) is None
    )
    assert not (tmp_path / "absent").exists()


def test_the_readme_verdict_table_is_the_generators_output(monkeypatch):
    from mixerzoo.studies.verdict_table import matrix_markdown as generate

    monkeypatch.chdir(ROOT)
    readme = (ROOT / "README.md").read_text()
    begin, end = "<!-- verdicts:begin -->\n", "\n<!-- verdicts:end -->"
    assert begin in readme and end in readme
    block = readme[readme.index(begin) + len(begin) : readme.index(end)]
    assert block == generate(["docs/verdicts"]), (
        "regenerate the README's verdict block: mixerzoo claims --markdown --results docs/verdicts"
    )


def test_a_store_that_cannot_be_written_gets_one_note_and_no_log(tmp_path, monkeypatch):
    import mixerzoo.studies.verdict_log as verdict_log

    def refuse(path, text):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(verdict_log, "write_atomic", refuse)
    notes = []
    claim = {"claim": "c", "paper_ref": "p", "verdict": REPRODUCED}
    assert append_verdicts(tmp_path, SWEEP, "quick", [claim], note=notes.append) is None
    assert len(notes) == 1 and "verdicts not logged" in notes[0] and "Permission denied" in notes[0]
    assert not log_path(tmp_path, SWEEP, "quick").exists()


def test_cli_claims_json_lists_every_claim_with_its_source(tmp_path, run_cli):
    results = tmp_path / "results"
    results.mkdir()
    claim = find_study(SWEEP).claim_row()["claims"][0]["claim"]
    append_verdicts(results, SWEEP, "quick", [{"claim": claim, "verdict": INCONCLUSIVE, "source": "paper"}])
    code, out, err = run_cli(["claims", "--json", "--results", results])
    assert code == 0, err
    rows = json.loads(out)
    assert {"study", "paper", "paper_ref", "source", "claim", "verdicts"} <= set(rows[0])
    assert {r["study"] for r in rows} >= {SWEEP, "mad", "cat-fig4"}
    mine = [r for r in rows if r["study"] == SWEEP and r["claim"] == claim]
    assert mine[0]["verdicts"]["quick"]["verdict"] == INCONCLUSIVE
    assert mine[0]["verdicts"]["quick"]["results"] == str(results)
    others = [r for r in rows if r["study"] != SWEEP]
    assert all(v["verdict"] == NOT_RUN for r in others for v in r["verdicts"].values())
    code, out, _ = run_cli(["claims", "--markdown", "--results", results])
    assert code == 0 and "| inconclusive |" in out


def test_the_html_report_gives_inconclusive_its_own_colour_and_keeps_project_claims_apart():
    from mixerzoo.studies.sweep.report import STYLE, claims_table

    claims = [
        {"claim": "a", "paper_ref": "p", "source": "paper", "verdict": INCONCLUSIVE, "evidence": "e"},
        {"claim": "b", "paper_ref": "p", "source": "project", "verdict": REPRODUCED, "evidence": "e"},
    ]
    page = claims_table(claims)
    assert "tr.inconclusive td.v{background" in STYLE
    assert "<tr class='inconclusive'>" in page
    assert (
        page.index("<td class='l'>a</td>")
        < page.index("project's own predicates")
        < page.index("<td class='l'>b</td>")
    )


def test_a_template_lists_the_numbers_a_predicate_reads_beside_the_claims_metric():
    """ICLL Fig. 2 (d)'s overfitting claim reads each cell's training-split number, and Sec. 4.5's
    claims read the in-context baselines' scores: a template without them could not be judged."""
    depth = find_study("icll-fig2d").template("quick", {})
    assert "train_regbench_accuracy" in depth["metrics"]
    assert all("train_regbench_accuracy" in cell for cell in depth["cells"])
    baselines = find_study("icll-fig2").template("quick", {})["metrics"]
    assert {"baseline:2-gram:regbench_tvd", "baseline:3-gram:regbench_tvd"} <= set(baselines)


def test_the_evidence_column_says_paper_preset_only_where_the_preset_planned_nothing():
    from mixerzoo.studies.verdict_log import strength_cell

    why = {"verdict": NOT_RUN, "evidence": "paper preset only: the model stays on its plateau"}
    assert strength_cell(why).startswith("paper preset only")
    assert strength_cell({"verdict": NOT_RUN, "evidence": "no finished runs"}) == "–"
