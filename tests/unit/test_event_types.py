"""Every event type the engine writes literally is in ``EVENT_TYPES``, the list an event
consumer's ``kinds`` are checked against: a new type cannot be left out of it."""

from __future__ import annotations

import ast
from pathlib import Path

import workflows
from workflows.engine.event_types import EVENT_TYPES

ENGINE = Path(workflows.__file__).parent / "engine"
# The calls that record an event, and where each takes the event's type.
_TYPE_ARGUMENT = {"add": 1, "add_to_flow": 1, "member_event": 2}


def _written_types() -> set[str]:
    written = set()
    for path in ENGINE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            index = _TYPE_ARGUMENT.get(name)
            if index is None or len(node.args) <= index:
                continue
            argument = node.args[index]
            if isinstance(argument, ast.Constant) and isinstance(argument.value, str):
                written.add(argument.value)
    return written


def test_every_literal_event_type_is_listed() -> None:
    written = _written_types()
    assert len(written) > 40  # the scan finds the engine's events
    assert written - EVENT_TYPES == set()


def test_types_made_from_statuses_and_kinds_are_listed() -> None:
    assert {"run.completed", "run.started", "flow.sealed", "item.ready", "step.started"} <= (
        EVENT_TYPES
    )
