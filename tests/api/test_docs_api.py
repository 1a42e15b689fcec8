"""The worked example of docs/api.md runs as it is written: its ``python`` cells, in order, in
one namespace, in an empty folder (they write ``nb-results`` and ``nb-study.yaml`` there)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest.importorskip("pandas", reason="mixerzoo.results() needs pandas: pip install 'mixerzoo[notebook]'")

DOC = Path(__file__).resolve().parents[2] / "docs" / "api.md"


def cells() -> list[str]:
    return re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)


def test_the_worked_example_runs(tmp_path, monkeypatch, capsys):
    from mixerzoo.mixers import SEQUENCE_MIXERS
    from mixerzoo.store.results import ResultsStore

    assert len(cells()) == 3
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": "notebook"}
    try:
        for cell in cells():
            exec(compile(cell, str(DOC), "exec"), namespace)
        exec(compile(cells()[1], str(DOC), "exec"), namespace)  # a cell that registers runs again
    finally:
        SEQUENCE_MIXERS._items.pop("cumulative_mean", None)
    table = namespace["table"]
    store = ResultsStore(tmp_path / "nb-results", read_only=True)
    assert len(table) == len(store.runs()) == 4  # cat, cumulative_mean, the two runs of the study
    assert set(table["mixer"]) == {"cat", "cumulative_mean"} and set(table["task"]) == {"mqar_cat"}
    assert "passed shape, causality, determinism, gradient" in capsys.readouterr().out
