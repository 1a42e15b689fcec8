"""The las-lm-text8-enwik8 experiment (LaS Sec. 5.5, Table 8, App. C): claims on hand-made losses,
seed averaging, and a tiny run on small text8 / enwik8 files."""

from __future__ import annotations

import math

import pytest

from mixerzoo.claims import INCONCLUSIVE, NOT_REPRODUCED, NOT_RUN, REPRODUCED, evaluate_claims
from mixerzoo.registry import ConfigError
from mixerzoo.studies.computed.files import load_theory, resolve_params
from mixerzoo.studies.lm.las import PARAMS, model_specs, outcome_from, plan_cells, run

LN2 = math.log(2)
QUIET = {"log": lambda _m: None}
UNITS = {"text8": "char", "enwik8": "byte", "kjv": "char", "wikitext103": "token"}


def verdicts(bpc: dict[tuple[str, str], list[float]]) -> list[str]:
    exp = load_theory("las-lm-text8-enwik8")
    loss = {k: [b * LN2 for b in v] for k, v in bpc.items()}
    out = outcome_from(loss, UNITS, **QUIET)
    return [c["verdict"] for c in evaluate_claims(exp.claims, out.cells, out.metric, axes=out.axes)]


# LaS Table 8 (bpb)
TABLE8 = {
    ("text8", "attention"): [1.3557],
    ("text8", "las"): [1.3332],
    ("enwik8", "attention"): [1.2885],
    ("enwik8", "las"): [1.2826],
}


def test_table_8_reproduces_and_wikitext_is_not_run():
    assert verdicts(TABLE8) == [REPRODUCED, REPRODUCED, REPRODUCED, NOT_RUN]


def test_las_behind_on_enwik8_is_not_reproduced():
    bad = {**TABLE8, ("enwik8", "las"): [1.2900]}
    assert verdicts(bad) == [NOT_REPRODUCED, REPRODUCED, NOT_REPRODUCED, NOT_RUN]


def test_quick_corpus_and_wikitext_claims():
    quick = {("kjv", "attention"): [2.0, 2.01, 2.02], ("kjv", "las"): [2.2, 2.21, 2.22]}
    assert verdicts(quick) == [NOT_REPRODUCED, NOT_RUN, NOT_RUN, NOT_RUN]
    # 2.1167 vs 2.1 with a spread over seeds of 0.1 (SE 0.058 each side): a tie, not a failure
    noisy = {("kjv", "attention"): [2.0, 2.1, 2.2], ("kjv", "las"): [2.05, 2.1, 2.2]}
    assert verdicts(noisy) == [INCONCLUSIVE, NOT_RUN, NOT_RUN, NOT_RUN]
    wiki = {("wikitext103", "attention"): [3.0], ("wikitext103", "las"): [3.01]}
    assert verdicts(wiki) == [NOT_RUN, NOT_RUN, NOT_RUN, REPRODUCED]


def test_cells_average_the_seeds():
    out = outcome_from({("kjv", "las"): [1.0, 2.0, 3.0]}, UNITS, **QUIET)
    (cell,) = out.cells
    assert cell["loss"] == pytest.approx(2.0) and cell["bpc"] == pytest.approx(2.0 / LN2)
    assert cell["seeds"] == 3 and cell["sd:loss"] == pytest.approx(1.0)


def test_models_differ_only_in_the_mixer():
    specs = model_specs(PARAMS(models=["attention", "las", "l"], num_heads=4, decay_max=0.01, pool_size=5))
    assert specs["attention"] == {"mixer": {"name": "attention", "num_heads": 4}, "position": "learned"}
    assert specs["las"]["mixer"] == {
        "name": "las_attention",
        "num_heads": 4,
        "variant": "las",
        "decay_max": 0.01,
        "pool_size": 5,
    }
    assert specs["l"]["mixer"]["variant"] == "l" and specs["l"]["position"] == "learned"


@pytest.mark.parametrize("sets,field", [({"corpus": "text8"}, "corpora"), ({"models": ["alibi"]}, "models")])
def test_bad_parameters_are_one_line(sets, field):
    exp = load_theory("las-lm-text8-enwik8")
    with pytest.raises(ConfigError, match=field) as err:
        resolve_params(exp, "quick", sets)
    assert "\n" not in str(err.value)


def test_a_tiny_run_on_small_text8_and_enwik8_files(tmp_path):
    text = "abishai and asahel went up abishai saw asahel " * 60
    for name in ("text8", "enwik8"):
        (tmp_path / name).write_text(text)
    n = len(text)
    p = PARAMS(
        corpora=["text8", "enwik8"],
        data_dir=str(tmp_path),
        corpus_params={"n_train": n - 600, "n_val": 300, "n_test": 300},
        d_model=16,
        n_layers=1,
        num_heads=2,
        block_size=16,
        batch_size=2,
        steps=2,
        warmup=0,
        seeds=[0, 1],
        eval_tokens=128,
        threads=1,
        device="cpu",
        runs_dir=str(tmp_path / "runs"),
    )
    out = run(p, **QUIET)
    assert {(c["corpus"], c["model"]) for c in out.cells} == {
        (c, m) for c in ("text8", "enwik8") for m in ("attention", "las")
    }
    assert all(c["seeds"] == 2 and c["bpc"] > 0 for c in out.cells)
    assert (tmp_path / "runs" / "enwik8" / "las" / "seed-1" / "checkpoint.pt").is_file()
    assert plan_cells(p.model_dump(mode="json")) == [
        {"corpus": c["corpus"], "model": c["model"]} for c in out.cells
    ]


def test_a_missing_corpus_file_fails_before_any_training(tmp_path):
    (tmp_path / "text8").write_text("abishai and asahel went up " * 60)  # 1,620 characters
    sizes = {"n_train": 1000, "n_val": 300, "n_test": 300}
    p = PARAMS(
        corpora=["text8", "enwik8"],
        data_dir=str(tmp_path),
        corpus_params=sizes,
        runs_dir=str(tmp_path / "runs"),
    )
    with pytest.raises(ConfigError, match="'enwik8' or 'enwik8.zip'"):
        run(p, **QUIET)
    assert not (tmp_path / "runs").exists()
