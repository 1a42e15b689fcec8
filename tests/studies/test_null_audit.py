"""The null audit: no shipped study that trains models reads "reproduced" when nothing was learned.

For every shipped study of a trained kind (sweep, MAD, language model, probe) and both presets,
the claims are judged on a results table in which every metric sits at its untrained level
(:func:`null_table`: higher-is-better metrics at 0, lower-is-better
ones at one constant in every cell). A claim added later without the premise it needs fails
here. Hand-set constructions (kind ``computed``) are exempt. Nothing trains.
"""

from __future__ import annotations

import pytest
import yaml

from mixerzoo.claims import REPRODUCED
from mixerzoo.studies.dispatch import find_study
from mixerzoo.studies.files import shipped_files, shipped_kind
from tests.studies.nulls import null_table

TRAINED_KINDS = ("sweep", "mad", "lm", "probe")
PRESETS = ("quick", "paper")
TRAINED = [name for name, path in shipped_files().items() if shipped_kind(path) in TRAINED_KINDS]


def null_verdicts(study, preset: str) -> list[dict]:
    table = null_table(study.template(preset, {}))
    return study.judge_cells(preset, {}, table)


def test_every_trained_kind_is_audited():
    kinds = {shipped_kind(path) for name, path in shipped_files().items() if name in TRAINED}
    assert kinds == set(TRAINED_KINDS)


@pytest.mark.parametrize("preset", PRESETS)
@pytest.mark.parametrize("name", TRAINED)
def test_no_claim_reads_reproduced_when_nothing_was_learned(name, preset):
    verdicts = null_verdicts(find_study(name), preset)
    reproduced = [v["claim"][:70] for v in verdicts if v["verdict"] == REPRODUCED]
    assert not reproduced, f"{name} ({preset}): reproduced on the null table: {reproduced}"


def without_premise(name: str, index: int, tmp_path):
    """The shipped study file with the premise of claim ``index`` deleted, as a study."""
    raw = yaml.safe_load(shipped_files()[name].read_text())
    del raw["claims"][index]["premise"]
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return find_study(str(path))


@pytest.mark.parametrize(
    "name,index,preset",
    [
        ("cat-1layer-length-generalization", 1, "paper"),  # "all other models decline": < 0.5 at 8 L
        ("zoology-window-attention", 3, "quick"),  # "window 8 does not perform well": <= 0.5
        ("icll-fig4", 2, "quick"),  # count probes "not meaningfully different": within 0.1
    ],
)
def test_deleting_a_premise_makes_the_audit_fail(name, index, preset, tmp_path):
    shipped = null_verdicts(find_study(name), preset)[index]
    assert shipped["verdict"] != REPRODUCED and shipped["premise"]
    bare = null_verdicts(without_premise(name, index, tmp_path), preset)[index]
    assert bare["claim"] == shipped["claim"]
    assert bare["verdict"] == REPRODUCED
