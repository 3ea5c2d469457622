"""The app's layers depend downward only, and the engine's modules on each other in one
direction: the architecture, pinned.

Read from the source with ``ast``: what each module imports at module level (``if
TYPE_CHECKING:`` blocks excluded, they never run), and whether any function imports an
engine module lazily to dodge a cycle.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

import workflows

APP = Path(workflows.__file__).parent
ENGINE = APP / "engine"

# Each module's layer, lowest first, by the longest dotted prefix that names it. A module
# may import from its own layer and those below; the engine from nothing above it.
LAYERS: dict[str, int] = {
    # the vocabulary every layer speaks
    "workflows.errors": 0,
    "workflows.status": 0,
    "workflows.holds": 0,
    "workflows.validation": 0,
    "workflows.conf": 0,
    "workflows.permissions": 0,
    "workflows.definitions": 0,
    "workflows.backends": 0,
    # the data, and what a handler sees of it; the webhook models' validator and
    # defaults (event types, secrets, message ids) come with them
    "workflows.models": 1,
    "workflows.context": 1,
    "workflows.webhooks.event_types": 1,
    "workflows.webhooks.signing": 1,
    # the only code that writes workflow state
    "workflows.engine": 2,
    # the read side, and who may decide a gate
    "workflows.queries": 3,
    "workflows.approvals": 3,
    # the write verbs every surface calls
    "workflows.services": 4,
    # the runtime and the integrations it drives
    "workflows.workers": 5,
    "workflows.hooks": 5,
    "workflows.webhooks": 5,
    "workflows.metrics": 5,
    # the surfaces
    "workflows.admin": 6,
    "workflows.api": 6,
    "workflows.management": 6,
    "workflows.templatetags": 6,
    "workflows.tasks": 6,
    "workflows.testing": 6,
    "workflows.checks": 6,
    "workflows.apps": 6,
    "workflows": 6,
}


def layer_of(module: str) -> int:
    """The layer of ``module``: its longest prefix in :data:`LAYERS`."""
    parts = module.split(".")
    for end in range(len(parts), 0, -1):
        prefix = ".".join(parts[:end])
        if prefix in LAYERS:
            return LAYERS[prefix]
    raise KeyError(module)


def _module_name(path: Path) -> str:
    parts = path.relative_to(APP.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _app_modules() -> Iterator[tuple[str, Path]]:
    for path in sorted(APP.rglob("*.py")):
        if "migrations" not in path.parts:
            yield _module_name(path), path


def _is_type_checking(node: ast.If) -> bool:
    return isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"


def _imported(tree: ast.Module) -> set[str]:
    """The ``workflows`` modules a module imports at module level (a name imported from a
    package counts as its submodule when there is one)."""
    found = set()
    for node in tree.body:
        if isinstance(node, ast.If) and _is_type_checking(node):
            continue
        for child in ast.walk(node):
            if isinstance(child, ast.ImportFrom) and child.level == 0 and child.module:
                for alias in child.names:
                    found.add(_resolve(child.module, alias.name))
            elif isinstance(child, ast.Import):
                found.update(alias.name for alias in child.names)
    return {name for name in found if name == "workflows" or name.startswith("workflows.")}


def _resolve(module: str, name: str) -> str:
    candidate = f"{module}.{name}"
    path = APP.parent / Path(*candidate.split("."))
    return candidate if path.with_suffix(".py").exists() or path.is_dir() else module


def _engine_graph() -> dict[str, set[str]]:
    graph = {}
    for name, path in _app_modules():
        if name.startswith("workflows.engine.") and path.stem != "__init__":
            imported = _imported(ast.parse(path.read_text()))
            graph[name] = {
                target
                for target in imported
                if target.startswith("workflows.engine.")
                and target != name
                # a subpackage's __init__ names no code of its own
                and not (APP.parent / Path(*target.split("."))).is_dir()
            }
    return graph


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


NODE_MODULES = {
    f"workflows.engine.nodes.{path.stem}"
    for path in (ENGINE / "nodes").glob("*.py")
    if path.stem != "__init__"
}


def test_every_layer_imports_only_its_own_and_those_below():
    upward = [
        f"{name} (layer {layer_of(name)}) imports {target} (layer {layer_of(target)})"
        for name, path in _app_modules()
        for target in sorted(_imported(ast.parse(path.read_text())))
        if layer_of(target) > layer_of(name)
    ]
    assert upward == []


def test_the_layer_check_sees_an_upward_import():
    assert layer_of("workflows.engine.nodes.gate") < layer_of("workflows.services.gates")
    assert layer_of("workflows.webhooks.signing") < layer_of("workflows.webhooks.sender")
    assert _resolve("workflows.engine.nodes", "gate") == "workflows.engine.nodes.gate"
    assert _resolve("workflows.engine", "claim_step") == "workflows.engine"


def test_engine_modules_import_each_other_without_a_cycle():
    assert _cycle(_engine_graph()) is None, " → ".join(_cycle(_engine_graph()) or [])


def test_the_cycle_finder_finds_a_cycle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_no_engine_module_imports_an_engine_module_inside_a_function():
    lazy = {
        name: found
        for name, path in _app_modules()
        if name.startswith("workflows.engine")
        and (found := _function_level_imports(ast.parse(path.read_text())))
    }
    assert lazy == {}


def test_graph_evaluation_knows_no_node_module():
    assert NODE_MODULES
    assert _engine_graph()["workflows.engine.advance"].isdisjoint(NODE_MODULES)


def test_every_node_module_is_loaded_by_the_engine_package():
    package = ast.parse((ENGINE / "__init__.py").read_text())
    assert _imported(package) >= NODE_MODULES


def test_no_module_shadows_the_standard_library():
    stems = {path.stem for _, path in _app_modules()} - {"__init__"}
    assert stems.isdisjoint(sys.stdlib_module_names), stems & sys.stdlib_module_names
