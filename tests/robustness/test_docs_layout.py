"""The README's Layout and docs/architecture.md describe the tree that is there."""

from __future__ import annotations

import re
from pathlib import Path

import mixerzoo

PACKAGE = Path(mixerzoo.__file__).parent
REPO = PACKAGE.parent


def layout_block() -> str:
    readme = (REPO / "README.md").read_text()
    section = readme[readme.index("## Layout") :]
    return section[section.index("```") + 3 : section.index("```", section.index("```") + 3)]


def test_the_readme_layout_names_every_package_folder_and_top_level_module():
    block = layout_block()
    folders = {p.name + "/" for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").is_file()}
    modules = {p.name for p in PACKAGE.glob("*.py") if p.name != "__init__.py"}
    named = [name for name in folders | modules if re.search(rf"(^|[\s,]){re.escape(name)}", block)]
    missing = sorted((folders | modules) - set(named))
    assert not missing, f"README Layout leaves out {missing}"


def test_the_architecture_doc_names_every_layer_of_the_layering_test():
    from tests.robustness.test_layering import LAYER_ORDER

    doc = (REPO / "docs" / "architecture.md").read_text()
    named = {name for names in LAYER_ORDER for name in names} - {"mixerzoo"}
    assert not [n for n in sorted(named) if f"`{n}" not in doc]


def test_no_issue_numbers_in_the_package_or_the_docs():
    texts = [*PACKAGE.rglob("*.py"), *PACKAGE.rglob("*.yaml"), REPO / "README.md"]
    texts += (REPO / "docs").rglob("*.md")
    issue = re.compile(r"\b[Ii]ssue \d+")
    hits = [f"{p.relative_to(REPO)}: {m.group(0)}" for p in texts for m in issue.finditer(p.read_text())]
    assert not hits, hits
