"""No function needs a scroll: every function of the package fits on one screen (60 lines, from
``def`` to its last line, docstring included)."""

from __future__ import annotations

import ast
from pathlib import Path

import mixerzoo

PACKAGE = Path(mixerzoo.__file__).parent
MAX_LINES = 60


def long_functions(root: Path, limit: int) -> list[str]:
    """``path:line name (N lines)`` for every function under ``root`` longer than ``limit``."""
    out = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > limit:
                    out.append(f"{path.relative_to(root.parent)}:{node.lineno} {node.name} ({n} lines)")
    return out


def test_no_function_of_the_package_is_longer_than_a_screen():
    too_long = long_functions(PACKAGE, MAX_LINES)
    assert not too_long, "split these functions:\n" + "\n".join(too_long)


def test_the_check_finds_a_long_function(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_LINES))
    (pkg / "m.py").write_text(f"def short():\n    return 1\n\n\ndef long():\n{body}\n")
    assert long_functions(pkg, MAX_LINES) == [f"pkg/m.py:5 long ({MAX_LINES + 1} lines)"]
