"""The README's "Paper coverage" section stays in step with the shipped studies.

The section lists every figure and table of the four papers (CAT with its workshop version
CAT-ws, Zoology, LaS, ICLL), one table per paper, with the study that covers it or the reason none
does. These tests read it against ``mixerzoo/studies/configs/*.yaml``:

- every study the section names (in backticks) is a shipped study file;
- every figure, table and appendix that a shipped study names, in its ``paper`` / ``paper_ref``
  field or a claim's ``paper_ref``, appears in that paper's part of the section (a figure or table
  as a row of its own);
- the row of a figure or table that a study's own ``paper`` / ``paper_ref`` field names (outside
  parentheses, which give context such as "proof CAT-ws App. E.2") names that study, so a new
  study cannot leave its figure marked "not covered yet" (a study of a kind in ``NOT_REPRODUCING``,
  such as the scorecard, which reuses other studies' cells, is named in the section's text instead).

References are read leniently: "Fig. 2", "Figs. 9-10", "Figs. 3 and 5", "Figure 4", "Table 4",
"Tab. 8", "Tables 7, 9, 11", "App. D.1", "Appendix C". A reference belongs to the paper key last
written before it ("CAT-ws Fig. 4 / CAT Fig. 6"); a key inside parentheses holds only until they
close.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from mixerzoo.studies.files import shipped_files

REPO = Path(__file__).resolve().parents[2]

#: the four papers' keys (CAT-ws: the workshop version of CAT, listed in CAT's part)
PAPERS = ("CAT", "CAT-ws", "Zoology", "LaS", "ICLL")
#: README subsection (### title) -> the paper key a row label without a key belongs to
SUBSECTIONS = {"CAT and CAT-ws": "CAT", "Zoology": "Zoology", "LaS": "LaS", "ICLL": "ICLL"}
#: study kinds that reproduce no figure of their own (the rows need not name them)
NOT_REPRODUCING = {"scorecard"}
PART_OF = {
    "CAT": "CAT and CAT-ws",
    "CAT-ws": "CAT and CAT-ws",
    "Zoology": "Zoology",
    "LaS": "LaS",
    "ICLL": "ICLL",
}

# a paper key, or another citation (whose references are none of the four papers')
_KEYS = r"(?<![\w-])(?:CAT-ws|CAT|Zoology|LaS|ICLL|MAD|arXiv|[A-Z][a-z]+ et al\.)(?![\w-])"
_FIGTAB = (
    r"\b(?P<kind>Fig(?:ure)?s?|Tab(?:le)?s?)\.?\s+(?P<first>\d+)"
    r"(?P<more>(?:\s*(?:-|–|,|and)\s*\d+\b(?!\.\d))*)"  # "9-10", ", 11", " and 5"; not "3.8M"
)
_APP = r"\bApp(?:endix|endices|\.)\s*(?P<letter>[A-Z])\b"
TOKEN = re.compile(rf"(?P<open>\()|(?P<close>\))|(?P<key>{_KEYS})|{_FIGTAB}|{_APP}")
STUDY_NAME = re.compile(r"`([a-z0-9]+(?:-[a-z0-9]+)*)`")


def refs(text: str, key: str | None = None) -> list[tuple[str | None, str, str, bool]]:
    """``(paper key, "Fig." | "Table" | "App.", number or letter, inside parentheses)`` in order."""
    out: list[tuple[str | None, str, str, bool]] = []
    outer: list[str | None] = []
    for m in TOKEN.finditer(text):
        if m["open"]:
            outer.append(key)
        elif m["close"]:
            key = outer.pop() if outer else key
        elif m["key"]:
            key = m["key"] if m["key"] in PAPERS else None
        elif m["letter"]:
            out.append((key, "App.", m["letter"], bool(outer)))
        else:
            kind = "Fig." if m["kind"].startswith("Fig") else "Table"
            numbers = [int(m["first"])]
            for sep, n in re.findall(r"(-|–|,|and)\s*(\d+)", m["more"]):
                n = int(n)
                numbers += list(range(numbers[-1] + 1, n + 1)) if sep in "-–" else [n]
            out += [(key, kind, str(n), bool(outer)) for n in numbers]
    return out


@cache
def coverage_section() -> str:
    readme = (REPO / "README.md").read_text()
    assert "\n## Paper coverage\n" in readme, "README has no '## Paper coverage' section"
    section = readme.split("\n## Paper coverage\n", 1)[1]
    return section.split("\n## ", 1)[0]


@cache
def subsections() -> dict[str, str]:
    parts = re.split(r"^### (.+)$", coverage_section(), flags=re.M)
    found = {title.strip(): body for title, body in zip(parts[1::2], parts[2::2])}
    assert set(SUBSECTIONS) <= set(found), f"Paper coverage lacks {sorted(set(SUBSECTIONS) - set(found))}"
    return found


def table_rows(body: str) -> list[list[str]]:
    """The body rows of the figure/table tables (header ``| figure/table | ...``) in ``body``."""
    rows, in_table = [], False
    for line in body.splitlines():
        if not line.startswith("|"):
            in_table = False
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells[0] == "figure/table":
            in_table = True
        elif in_table and not set(cells[0]) <= set("-: "):
            rows.append(cells)
    return rows


@cache
def labelled_rows() -> dict[tuple[str, str, str], list[list[str]]]:
    """``(paper key, kind, number)`` -> the rows whose first cell names it."""
    out: dict[tuple[str, str, str], list[list[str]]] = {}
    for title, key in SUBSECTIONS.items():
        for row in table_rows(subsections()[title]):
            for k, kind, number, _ in refs(row[0], key):
                if kind != "App.":
                    out.setdefault((k or key, kind, number), []).append(row)
    return out


@cache
def study_files() -> dict[str, dict[str, Any]]:
    return {name: yaml.safe_load(path.read_text()) or {} for name, path in shipped_files().items()}


def nested_paper_refs(node: Any) -> list[str]:
    if isinstance(node, dict):
        return [v for k, v in node.items() if k == "paper_ref" and isinstance(v, str)] + [
            r for v in node.values() for r in nested_paper_refs(v)
        ]
    if isinstance(node, list):
        return [r for v in node for r in nested_paper_refs(v)]
    return []


def own_fields(study: dict[str, Any]) -> list[str]:
    return [study[k] for k in ("paper", "paper_ref") if isinstance(study.get(k), str)]


def test_the_reference_parser_reads_the_forms_the_studies_use():
    assert refs("CAT Sec. 4, Thm. 2 (proof CAT-ws App. E.2); Sec. 6.1, Fig. 6") == [
        ("CAT-ws", "App.", "E", True),
        ("CAT", "Fig.", "6", False),
    ]
    assert refs("CAT-ws App. D.1, Figs. 9-10") == [
        ("CAT-ws", "App.", "D", False),
        ("CAT-ws", "Fig.", "9", False),
        ("CAT-ws", "Fig.", "10", False),
    ]
    assert [r[1:3] for r in refs("Zoology App. D, Figs. 3 and 5")] == [
        ("App.", "D"),
        ("Fig.", "3"),
        ("Fig.", "5"),
    ]
    assert [r[1:3] for r in refs("ICLL Sec. 4.5, Fig. 2 (b, c), App. B Table 3")] == [
        ("Fig.", "2"),
        ("App.", "B"),
        ("Table", "3"),
    ]
    assert [r[1:3] for r in refs("Tables 7, 9, 11 and Tab. 8; Figure 4", "Zoology")] == [
        ("Table", "7"),
        ("Table", "9"),
        ("Table", "11"),
        ("Table", "8"),
        ("Fig.", "4"),
    ]
    assert refs("Table 2 (Wikitext ppl: CAT, RoPE 26.776 ...), 3.8M characters", "CAT") == [
        ("CAT", "Table", "2", False)
    ]
    assert refs("MAD (Poli et al. 2024) Fig. 3") == [(None, "Fig.", "3", False)]
    assert refs("tested: CAT / MH-CAT Fig. 1", "LaS") == [("CAT", "Fig.", "1", False)]


def test_every_study_the_coverage_section_names_is_shipped():
    shipped = set(shipped_files())
    named = set(STUDY_NAME.findall(coverage_section()))
    assert named, "the Paper coverage section names no study"
    assert not sorted(named - shipped), (
        f"Paper coverage names studies with no file: {sorted(named - shipped)}"
    )


def test_every_row_names_a_study_or_says_why_none():
    for title in SUBSECTIONS:
        for row in table_rows(subsections()[title]):
            assert len(row) == 4, f"{title}: row {row[0]!r} has {len(row)} cells, not 4"
            label, _, study, why = row
            assert refs(label, SUBSECTIONS[title]), f"{title}: row {label!r} names no figure or table"
            assert STUDY_NAME.search(study) or (study == "—" and why), (
                f"{title}: row {label!r} gives no study or reason"
            )


@pytest.mark.parametrize("name", sorted(shipped_files()))
def test_every_figure_and_table_a_study_names_is_in_the_coverage_section(name):
    study = study_files()[name]
    rows = labelled_rows()
    parts = subsections()
    missing = []
    for text in own_fields(study) + nested_paper_refs(study):
        for key, kind, number, _ in refs(text):
            if key is None:
                continue
            if kind == "App.":
                apps = {r[2] for r in refs(parts[PART_OF[key]], SUBSECTIONS[PART_OF[key]]) if r[1] == "App."}
                if number not in apps:
                    missing.append(f"{key} App. {number}")
            elif (key, kind, number) not in rows:
                missing.append(f"{key} {kind} {number}")
    assert not missing, f"{name} names {sorted(set(missing))}, which README 'Paper coverage' does not list"


@pytest.mark.parametrize("name", sorted(shipped_files()))
def test_the_row_of_each_figure_a_study_covers_names_the_study(name):
    study = study_files()[name]
    if study.get("kind") in NOT_REPRODUCING:
        assert f"`{name}`" in coverage_section(), f"README 'Paper coverage' does not mention {name}"
        return
    rows = labelled_rows()
    wrong = []
    for text in own_fields(study):
        for key, kind, number, in_parens in refs(text):
            if key is None or kind == "App." or in_parens:
                continue
            listed = rows.get((key, kind, number), [])
            if listed and not any(name in STUDY_NAME.findall(" | ".join(row)) for row in listed):
                wrong.append(f"{key} {kind} {number}")
    assert not wrong, f"README 'Paper coverage': the rows of {sorted(set(wrong))} do not name {name}"
