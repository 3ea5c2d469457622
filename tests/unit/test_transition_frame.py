"""Every engine transition is written in the one frame: ``@transition`` and a scope from
``engine/scope.py``. No other engine module builds a scope or an event log, or opens a
transaction of its own.

Read from the source with ``ast``, as ``test_engine_layout.py`` reads the imports.
"""

from __future__ import annotations

import ast
from pathlib import Path

import workflows

ENGINE = Path(workflows.__file__).parent / "engine"

# The modules that own the frame: the transaction and the scopes.
FRAME_MODULES = {"scope.py", "transaction.py"}
# What only they may do: build a scope or an event log, open a transaction.
FRAME_NAMES = {"RunScope", "TransitionScope", "EventLog", "atomic"}
# Deliberate exceptions, "module: function" → why. None today: the functions that are
# not transitions on a run (claims, fenced heartbeats, redispatch, starting queued runs)
# open unlocked_scope(), and retention's purge_batch is a @transition with no scope.
EXCEPTIONS: dict[str, str] = {}


def _frame_uses(tree: ast.Module) -> list[str]:
    """``function: name`` for each call of a frame name, and each mention of ``atomic``
    (a decorator or a call), anywhere in the module."""
    found = []
    called: set[int] = set()  # the func of a call already counted

    def visit(node: ast.AST, where: str) -> None:
        for child in ast.iter_child_nodes(node):
            inside = where
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                inside = child.name if where == "<module>" else f"{where}.{child.name}"
            name = None
            if isinstance(child, ast.Call):
                func = child.func
                name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
                called.add(id(func))
            elif isinstance(child, ast.Attribute | ast.Name) and id(child) not in called:
                mentioned = child.attr if isinstance(child, ast.Attribute) else child.id
                name = mentioned if mentioned == "atomic" else None
            if name in FRAME_NAMES:
                found.append(f"{inside}: {name}")
            visit(child, inside)

    visit(tree, "<module>")
    return found


def test_no_engine_module_outside_the_frame_builds_a_scope_an_event_log_or_a_transaction():
    found = {
        f"{path.relative_to(ENGINE)}: {use}"
        for path in sorted(ENGINE.rglob("*.py"))
        if path.name not in FRAME_MODULES or path.parent != ENGINE
        for use in _frame_uses(ast.parse(path.read_text()))
    }
    assert found - set(EXCEPTIONS) == set()
    assert set(EXCEPTIONS) <= found, "an exception listed here no longer exists"


def test_the_frame_check_sees_each_way_round_it():
    source = """
from django.db import transaction

def by_hand(run, workflow):
    events = EventLog()
    RunScope(run, workflow, events=events)
    with transaction.atomic():
        pass

@atomic
def decorated():
    pass
"""
    assert _frame_uses(ast.parse(source)) == [
        "by_hand: EventLog",
        "by_hand: RunScope",
        "by_hand: atomic",
        "decorated: atomic",
    ]
