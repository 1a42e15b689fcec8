"""``study list`` counts a sweep's runs without validating each: the count equals the plan's."""

from __future__ import annotations

import pytest

from mixerzoo.studies.dispatch import find_study
from mixerzoo.studies.files import shipped_kind
from mixerzoo.studies.kinds import of_family
from mixerzoo.studies.sweep.config import shipped_experiments

CASES = [
    pytest.param(name, preset, id=f"{name}-{preset}")
    for name, path in shipped_experiments().items()
    if shipped_kind(path) in of_family("grid")
    for preset in find_study(name).file().presets
]


@pytest.mark.parametrize("name,preset", CASES)
def test_the_listed_run_count_is_the_number_of_planned_runs(name, preset):
    exp = find_study(name).load(preset)
    assert exp.count_runs() == len(exp.expand())
