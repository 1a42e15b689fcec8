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
    above = {"evaluation", "training", "experiments", "cli", "model", "mixers", "config"}
    bad = {(u, v) for u, vs in module_graph().items() if layer(u) == "tasks" for v in vs if layer(v) in above}
    assert not bad


#: The layer order of docs/architecture.md, lowest first; a module may import its own rank or below.
LAYER_ORDER: list[set[str]] = [
    {"mixerzoo", "registry", "params"},
    {"ops"},
    {"mixers"},
    {"model", "testing"},
    {"tasks", "corpora"},
    {"config", "checkpoint"},
    {"evaluation"},
    {"training"},
    {"baselines", "analysis"},
    {"experiments", "theory"},
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
        "mixerzoo.cli.main": {"mixerzoo.experiments.sweep"},
        "mixerzoo.ops.conv": {"mixerzoo.newlayer.x"},
    }
    assert upward_imports(graph) == [
        "mixerzoo.ops.conv (ops) imports mixerzoo.newlayer.x (newlayer)",
        "mixerzoo.tasks.mqar (tasks) imports mixerzoo.evaluation.evaluate (evaluation)",
    ]
