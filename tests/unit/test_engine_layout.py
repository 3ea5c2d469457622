"""The engine's modules depend on each other in one direction, and say so at the top.

Read from the source with ``ast``: what each engine module imports at module level
(``if TYPE_CHECKING:`` blocks excluded, they never run), and whether any function
imports an engine module lazily to dodge a cycle.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import workflows.engine

ENGINE = Path(workflows.engine.__file__).parent
NODE_MODULES = {"callbacks", "children", "fanout", "gates", "signals", "sleeps", "tasks"}


def _engine_module(name: str | None) -> str | None:
    prefix = "workflows.engine."
    if name and name.startswith(prefix):
        return name[len(prefix) :].split(".")[0]
    return None


def _is_type_checking(node: ast.If) -> bool:
    return isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"


def _module_level_imports(tree: ast.Module) -> set[str]:
    found = set()
    for node in tree.body:
        if isinstance(node, ast.If) and _is_type_checking(node):
            continue
        for child in ast.walk(node):
            if isinstance(child, ast.ImportFrom) and child.level == 0:
                target = _engine_module(child.module)
                if target is not None:
                    found.add(target)
                elif child.module == "workflows.engine":
                    found.update(alias.name for alias in child.names)
            elif isinstance(child, ast.Import):
                found.update(filter(None, (_engine_module(a.name) for a in child.names)))
    return found


def _function_level_imports(tree: ast.Module) -> list[str]:
    lazy = []
    for function in ast.walk(tree):
        if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for child in ast.walk(function):
            if (
                isinstance(child, ast.ImportFrom)
                and child.module
                and (child.module.startswith("workflows.engine"))
            ):
                lazy.append(f"{function.name} imports {child.module}")
    return lazy


def _graph() -> dict[str, set[str]]:
    graph = {}
    for path in sorted(ENGINE.glob("*.py")):
        if path.stem == "__init__":
            continue
        tree = ast.parse(path.read_text())
        graph[path.stem] = _module_level_imports(tree) - {path.stem}
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A cycle of the graph as a path, or ``None`` (depth-first search)."""
    state: dict[str, str] = {}

    def visit(node: str, path: list[str]) -> list[str] | None:
        state[node] = "open"
        for target in sorted(graph.get(node, ())):
            if state.get(target) == "open":
                return [*path[path.index(target) :], target] if target in path else [node, target]
            if target not in state:
                found = visit(target, [*path, target])
                if found:
                    return found
        state[node] = "done"
        return None

    for start in sorted(graph):
        if start not in state:
            found = visit(start, [start])
            if found:
                return found
    return None


def test_engine_modules_import_each_other_without_a_cycle():
    assert _cycle(_graph()) is None, " → ".join(_cycle(_graph()) or [])


def test_the_cycle_finder_finds_a_cycle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_no_engine_module_imports_an_engine_module_inside_a_function():
    lazy = {
        path.stem: found
        for path in ENGINE.glob("*.py")
        if (found := _function_level_imports(ast.parse(path.read_text())))
    }
    assert lazy == {}


def test_graph_evaluation_knows_no_node_module():
    assert _graph()["advance"].isdisjoint(NODE_MODULES)


def test_every_node_module_is_loaded_by_the_engine_package():
    package = ast.parse((ENGINE / "__init__.py").read_text())
    assert _module_level_imports(package) >= NODE_MODULES


def test_no_engine_module_shadows_the_standard_library():
    assert {path.stem for path in ENGINE.glob("*.py")}.isdisjoint(sys.stdlib_module_names)
