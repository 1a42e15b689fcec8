"""The package's imports, read from the source (including imports inside functions).

One-way layers in the order of docs/architecture.md: a task describes data and never runs a
model, so nothing under ``tasks/`` imports ``evaluation/`` (or anything above it); and no module
imports itself back through others. Before the fix ``tasks/regbench.py`` imported
``evaluation/regbench_metrics.py`` (inside ``Task.extra_metrics``), which imports
``tasks/regbench.py``: a cycle.
"""

from __future__ import annotations

import ast
from pathlib import Path

import mixerzoo

ROOT = Path(mixerzoo.__file__).parent


def module_graph() -> dict[str, set[str]]:
    """``mixerzoo.a.b`` -> the mixerzoo modules it imports anywhere in its source."""
    modules: dict[str, Path] = {}
    for f in ROOT.rglob("*.py"):
        parts = list(f.relative_to(ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = f
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text())):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative import
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*anchor, base] if base else anchor)
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            for target in targets:
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    graph[name].add(target)
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(u: str) -> list[str] | None:
        state[u] = 1
        stack.append(u)
        for v in sorted(graph[u]):
            if state.get(v) == 1:
                return stack[stack.index(v) :] + [v]
            if v not in state and (found := visit(v)):
                return found
        stack.pop()
        state[u] = 2
        return None

    for u in sorted(graph):
        if u not in state and (found := visit(u)):
            return found
    return None


def layer(module: str) -> str:
    return module.split(".")[1] if module.count(".") else "mixerzoo"


def test_the_graph_sees_function_level_imports():
    graph = module_graph()
    assert (
        "mixerzoo.evaluation.regbench_metrics" in graph["mixerzoo.evaluation.task_metrics"]
    )  # inside a function
    assert "mixerzoo.tasks.base" in graph["mixerzoo.tasks.mqar"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]


def test_no_import_cycle_between_modules():
    assert find_cycle(module_graph()) is None


def test_no_cycle_between_layers():
    layers: dict[str, set[str]] = {}
    for u, vs in module_graph().items():
        layers.setdefault(layer(u), set()).update(layer(v) for v in vs if layer(v) != layer(u))
    for vs in list(layers.values()):
        for v in vs:
            layers.setdefault(v, set())
    assert find_cycle(layers) is None


def test_tasks_import_nothing_above_them():
    above = {"evaluation", "training", "studies", "cli", "model", "mixers", "config"}
    bad = {(u, v) for u, vs in module_graph().items() if layer(u) == "tasks" for v in vs if layer(v) in above}
    assert not bad


#: The layer order of docs/architecture.md, lowest first; a module may import its own rank or below.
LAYER_ORDER: list[set[str]] = [
    {"mixerzoo", "registry", "params", "json_cache"},
    {"ops"},
    {"mixers"},
    {"model", "testing"},
    {"tasks", "corpora"},
    {"config", "config_paths", "checkpoint", "outputs"},
    {"evaluation"},
    {"training"},
    {"baselines", "analysis"},
    {"store", "claims", "theory"},
    {"runs"},
    {"studies"},
    {"cli", "train_lm", "api"},
]
RANK = {name: i for i, names in enumerate(LAYER_ORDER) for name in names}


def test_every_package_folder_has_a_place_in_the_layer_order():
    assert {layer(m) for m in module_graph()} <= set(RANK)


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """Each edge from a module to one of a higher rank (an unknown layer counts as out of order)."""
    return sorted(
        f"{u} ({layer(u)}) imports {v} ({layer(v)})"
        for u, vs in graph.items()
        for v in vs
        if RANK.get(layer(v), len(LAYER_ORDER)) > RANK.get(layer(u), -1)
    )


def test_every_import_points_down_the_layer_order():
    upward = upward_imports(module_graph())
    assert not upward, "\n".join(upward)


def test_the_order_check_catches_an_upward_import():
    graph = {
        "mixerzoo.tasks.mqar": {"mixerzoo.evaluation.evaluate", "mixerzoo.params"},
        "mixerzoo.cli.main": {"mixerzoo.studies.sweep.runner"},
        "mixerzoo.ops.conv": {"mixerzoo.newlayer.x"},
    }
    assert upward_imports(graph) == [
        "mixerzoo.ops.conv (ops) imports mixerzoo.newlayer.x (newlayer)",
        "mixerzoo.tasks.mqar (tasks) imports mixerzoo.evaluation.evaluate (evaluation)",
    ]


def test_the_python_api_stands_below_the_command_line():
    """``api.py`` and ``cli/`` share what both need from the layers below; the API imports nothing
    from the command line (a library user never loads click's commands)."""
    graph = module_graph()
    assert not {v for v in graph["mixerzoo.api"] if layer(v) == "cli"}


def reexported_names(root: Path = ROOT) -> dict[str, list[str]]:
    """module -> the names it imports from the package at top level and never uses: names it only
    passes on. A package's ``__init__`` may present its package's names; no other module may."""
    found = {}
    for f in root.rglob("*.py"):
        if f.name == "__init__.py":
            continue
        tree = ast.parse(f.read_text())
        imported = [
            a.asname or a.name
            for node in tree.body
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("mixerzoo")
            for a in node.names
        ]
        used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
        if unused := [n for n in imported if n not in used]:
            found[str(f.relative_to(root.parent))] = unused
    return found


def test_no_module_re_exports_a_name_it_does_not_define():
    assert reexported_names() == {}


def test_the_re_export_check_finds_one(tmp_path):
    pkg = tmp_path / "mixerzoo"
    pkg.mkdir()
    (pkg / "a.py").write_text("from mixerzoo.b import used, passed_on\n\nx = used()\n")
    (pkg / "__init__.py").write_text("from mixerzoo.a import x\n")
    assert reexported_names(pkg) == {"mixerzoo/a.py": ["passed_on"]}
