"""The app's layers depend downward only, the engine's sub-layers too, and the engine's
modules on each other in one direction: the architecture, pinned.

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
    "workflows.text": 0,
    "workflows.validation": 0,
    "workflows.merge_patch": 0,
    "workflows.variables": 0,
    "workflows.tags": 0,
    "workflows.conf": 0,
    "workflows.permissions": 0,
    "workflows.definitions": 0,
    "workflows.backends": 0,
    # OpenTelemetry spans: the API only, imported lazily; nothing of the app's above it.
    "workflows.tracing": 0,
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


def layer_of(module: str, layers: dict[str, int] = LAYERS) -> int:
    """The layer of ``module``: its longest prefix in ``layers`` (:data:`LAYERS`)."""
    parts = module.split(".")
    for end in range(len(parts), 0, -1):
        prefix = ".".join(parts[:end])
        if prefix in layers:
            return layers[prefix]
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


def _function_level_imports(module: str, tree: ast.Module) -> list[str]:
    """What ``module`` imports of the engine inside a function, in any form (``from``,
    ``import``, relative)."""
    return [
        f"{where} imports {target}"
        for where, target in _runtime_imports(module, tree)
        if where != "module level" and target.startswith("workflows.engine")
    ]


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


# Each engine module's sub-layer, lowest first, by the longest dotted prefix that names it
# (every module of the engine is named, the package itself is above them all). A module
# may import from its own sub-layer and those below, never from one above: not at module
# level (``if TYPE_CHECKING:`` blocks aside, they never run), and not in a function.
ENGINE_LAYERS: dict[str, int] = {
    # every statement of the engine
    "workflows.engine.sql": 0,
    # what a transition is written with, knowing no run: the transaction and its retry,
    # events and the wake-ups they cause, event consumers, the verbs' guards, routing,
    # what makes a create idempotent, kept signals
    "workflows.engine.transaction": 1,
    # the unique index of live business keys, as the transaction names its refusal
    "workflows.engine.business_keys": 1,
    "workflows.engine.wakeups": 1,
    "workflows.engine.events": 1,
    "workflows.engine.guards": 1,
    "workflows.engine.routing": 1,
    "workflows.engine.created": 1,
    "workflows.engine.fingerprint": 1,
    "workflows.engine.consumers": 1,
    # a run's kept signals, which WaitForSignal steps and awaits consume alike
    "workflows.engine.signal_buffer": 1,
    # leased units of work: their kinds, leases, failures, live telemetry, and the port
    # that hands them to a worker; the event types, some made from the work kinds
    "workflows.engine.work_kinds": 2,
    "workflows.engine.event_types": 2,
    "workflows.engine.executor": 2,
    "workflows.engine.dispatch": 2,
    "workflows.engine.lease": 2,
    "workflows.engine.failures": 2,
    "workflows.engine.telemetry": 2,
    # a run inside one transition: its status, its graph moving on, the scope holding it,
    # whether it asks its work to stop, what a replay does again
    "workflows.engine.runs": 3,
    "workflows.engine.advance": 3,
    "workflows.engine.scope": 3,
    "workflows.engine.cancellation": 3,
    "workflows.engine.replay": 3,
    "workflows.engine.variables": 3,
    "workflows.engine.tags": 3,
    # work over time: admission limits, claims and outcomes, recovery, timers, deadlines,
    # loops going round
    "workflows.engine.limits": 4,
    "workflows.engine.claims": 4,
    "workflows.engine.outcomes": 4,
    "workflows.engine.recovery": 4,
    "workflows.engine.timers": 4,
    "workflows.engine.deadlines": 4,
    "workflows.engine.loops": 4,
    "workflows.engine.external": 4,
    # retention: whole ended runs deleted in batches
    "workflows.engine.retention": 4,
    # a whole run begins (a child, a flow member too) or is cancelled (a flow's member too)
    "workflows.engine.start": 5,
    "workflows.engine.verbs.cancel": 5,
    # one module per node kind
    "workflows.engine.nodes": 6,
    # graphs of runs
    "workflows.engine.flows": 7,
    # schedules start runs (start) in their own transitions
    "workflows.engine.schedules": 7,
    # the operator verbs, which compose all of the above
    "workflows.engine.verbs": 8,
}


def engine_layer_of(module: str) -> int:
    """The sub-layer of engine module ``module``: its longest prefix in
    :data:`ENGINE_LAYERS`; the package itself (``workflows.engine``) is above them all."""
    if module == "workflows.engine":
        return max(ENGINE_LAYERS.values()) + 1
    return layer_of(module, ENGINE_LAYERS)


def _runtime_imports(module: str, tree: ast.Module) -> Iterator[tuple[str, str]]:
    """``(where, module)`` for every ``workflows`` module that ``module`` imports when it
    runs: ``where`` is ``"module level"`` or the function that imports it lazily.
    ``if TYPE_CHECKING:`` blocks are left out; relative imports are resolved."""
    is_package = (APP.parent / Path(*module.split("."))).is_dir()
    package = (module if is_package else module.rpartition(".")[0]).split(".")

    def visit(node: ast.AST, where: str) -> Iterator[tuple[str, str]]:
        if isinstance(node, ast.If) and _is_type_checking(node):
            children: list[ast.AST] = list(node.orelse)
        else:
            children = list(ast.iter_child_nodes(node))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            where = node.name
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # from . import x, from ..y import x
                anchor = package[: len(package) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                yield where, _resolve(base, alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                yield where, alias.name
        for child in children:
            yield from visit(child, where)

    for where, target in visit(tree, "module level"):
        if target == "workflows" or target.startswith("workflows."):
            yield where, target


def _upward_in_engine(name: str, tree: ast.Module) -> list[str]:
    return [
        f"{name} (engine layer {engine_layer_of(name)}) imports {target} "
        f"(engine layer {engine_layer_of(target)}) at {where}"
        for where, target in _runtime_imports(name, tree)
        if target.startswith("workflows.engine") and engine_layer_of(target) > engine_layer_of(name)
    ]


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
        and (found := _function_level_imports(name, ast.parse(path.read_text())))
    }
    assert lazy == {}


def test_every_engine_module_has_its_engine_layer():
    unplaced = []
    for name, _ in _app_modules():
        if name.startswith("workflows.engine."):
            try:
                engine_layer_of(name)
            except KeyError:
                unplaced.append(name)
    assert unplaced == [], "name these in ENGINE_LAYERS"


def test_engine_modules_import_only_their_own_engine_layer_and_those_below():
    upward = [
        found
        for name, path in _app_modules()
        if name.startswith("workflows.engine.")
        for found in _upward_in_engine(name, ast.parse(path.read_text()))
    ]
    assert upward == []


def test_the_engine_layer_check_sees_an_upward_import():
    assert engine_layer_of("workflows.engine.sql.rows") < engine_layer_of("workflows.engine.scope")
    assert engine_layer_of("workflows.engine.verbs.cancel") < engine_layer_of(
        "workflows.engine.flows.cancellation"
    )
    assert engine_layer_of("workflows.engine.flows.heal") < engine_layer_of(
        "workflows.engine.verbs.retry"
    )
    node = "workflows.engine.nodes.subworkflow"
    at_module_level = ast.parse("from workflows.engine.verbs.terminate import terminate_run")
    in_a_function = ast.parse("def stop():\n    from workflows.engine.verbs import pause\n")
    relative = ast.parse("from ..verbs import skip")
    guarded = ast.parse(
        "if TYPE_CHECKING:\n    from workflows.engine.verbs.terminate import terminate_run\n"
    )
    assert _upward_in_engine(node, at_module_level) == [
        f"{node} (engine layer 6) imports workflows.engine.verbs.terminate (engine layer 8) "
        "at module level"
    ]
    assert _upward_in_engine(node, in_a_function) == [
        f"{node} (engine layer 6) imports workflows.engine.verbs.pause (engine layer 8) at stop"
    ]
    assert _upward_in_engine(node, relative) == [
        f"{node} (engine layer 6) imports workflows.engine.verbs.skip (engine layer 8) "
        "at module level"
    ]
    assert _upward_in_engine(node, guarded) == []


def test_graph_evaluation_knows_no_node_module():
    assert NODE_MODULES
    assert _engine_graph()["workflows.engine.advance"].isdisjoint(NODE_MODULES)


def test_every_node_module_is_loaded_by_the_engine_package():
    package = ast.parse((ENGINE / "__init__.py").read_text())
    assert _imported(package) >= NODE_MODULES


def test_no_module_shadows_the_standard_library():
    stems = {path.stem for _, path in _app_modules()} - {"__init__"}
    assert stems.isdisjoint(sys.stdlib_module_names), stems & sys.stdlib_module_names
