"""A kind of study is declared once: a study class and one line in ``mixerzoo.studies.kinds``."""

from __future__ import annotations

import pytest
import yaml

from mixerzoo.registry import ConfigError
from mixerzoo.studies import kinds
from mixerzoo.studies.base import Study
from mixerzoo.studies.dispatch import find_study
from mixerzoo.studies.kinds import KINDS, Kind


class CountStudy(Study):
    """A tiny kind: it counts to the file's ``up_to`` and records nothing."""

    kind = "count"

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.spec = yaml.safe_load(open(name))

    def run(self, preset, sets, where, opts, out) -> int:
        n = int(sets.get("up_to", self.spec["up_to"]))
        out.echo(f"{self.spec['name']}: " + " ".join(str(i) for i in range(1, n + 1)))
        return 0


@pytest.fixture
def count_kind(monkeypatch):
    monkeypatch.setitem(KINDS, "count", Kind("count", CountStudy, "other", "counts to a number"))


def test_a_new_kind_is_one_class_and_one_line(count_kind, run_cli, tmp_path):
    path = tmp_path / "count.yaml"
    path.write_text(yaml.safe_dump({"kind": "count", "name": "to-three", "up_to": 3}))
    assert isinstance(find_study(str(path)), CountStudy)
    code, out, err = run_cli(["study", "run", path, "--set", "up_to=4"])
    assert code == 0 and out.strip() == "to-three: 1 2 3 4", err


def test_an_undeclared_kind_is_one_line_naming_the_kinds(run_cli, tmp_path):
    path = tmp_path / "count.yaml"
    path.write_text(yaml.safe_dump({"kind": "count", "name": "to-three", "up_to": 3}))
    code, _, err = run_cli(["study", "run", path])
    assert code == 2 and "kind 'count' is not one of sweep, mad, computed, lm, probe" in err
    assert len(err.strip().splitlines()) == 1


def test_the_shipped_kinds_name_their_classes_and_families():
    assert list(KINDS) == ["sweep", "mad", "computed", "lm", "probe", "scorecard"]
    assert kinds.of_family("grid") == ("sweep", "mad")
    assert kinds.of_family("computed") == ("computed", "lm", "probe")
    assert kinds.of_family("other") == ("scorecard",)
    assert [KINDS[k].study_class().__name__ for k in KINDS] == [
        "SweepStudy",
        "MadStudy",
        "ComputedStudy",
        "ComputedStudy",
        "ComputedStudy",
        "ScorecardStudy",
    ]
    assert find_study("cat-fig4").kind == "computed" and find_study("mad").kind == "mad"


def test_a_kind_is_declared_once(monkeypatch):
    monkeypatch.setattr(kinds, "KINDS", dict(KINDS))
    with pytest.raises(ConfigError, match="already declared"):
        kinds.register(Kind("sweep", CountStudy, "grid", "again"))
    with pytest.raises(ConfigError, match="family 'tree'"):
        kinds.register(Kind("tree", CountStudy, "tree", "a new family"))
    kinds.register(Kind("count", CountStudy, "other", "counts"))
    assert kinds.family("count") == "other"
