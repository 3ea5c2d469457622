"""Node kinds are named once: ``NodeKind`` in ``workflows/status.py``, each node class's
``kind`` one of its members, and no code outside ``definitions/`` spelling a kind's name.

Read from the source with ``ast``, as ``test_engine_layout.py`` reads imports: a string
literal that is a kind's name, compared with something that holds a kind (``.kind``,
``["kind"]``, a ``step.waiting`` event's ``reason``), passed as an ORM ``kind=`` /
``step__kind=`` / ``kind__in=`` filter, stored under a ``"kind"`` key, or keying a table
by kind, is a bare kind; so is ``kind == "gate"`` in a template.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import workflows
import workflows.engine
from workflows.definitions import FanOut, Gate, Node, Sleep, SubWorkflow, Task, WaitForSignal
from workflows.engine.advance import NODE_ENTRIES
from workflows.models import Step
from workflows.status import NodeKind

APP = Path(workflows.__file__).parent
KIND_NAMES = frozenset(NodeKind.values)
# What may spell a kind's name: the DSL that declares the kinds, and migrations (frozen).
ALLOWED = (APP / "definitions", APP / "migrations")
# An expression that holds a kind, by what it is called.
HOLDS_A_KIND = re.compile(r"\bkind\b|\breason\b|\[['\"](kind|reason)['\"]\]")
KIND_KEYWORD = re.compile(r"^(kind|\w+__kind)(__in)?$")
TEMPLATE_COMPARISON = re.compile(
    r"kind\s*(==|!=|in)\s*['\"](" + "|".join(sorted(KIND_NAMES)) + r")['\"]"
)


def _kind_literals(node: ast.expr) -> list[str]:
    """The kinds' names ``node`` spells: a string, or a tuple, list or set of them."""
    if isinstance(node, ast.Constant) and node.value in KIND_NAMES:
        return [node.value]
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return [name for element in node.elts for name in _kind_literals(element)]
    return []


def bare_kinds(source: str) -> list[str]:
    """Where ``source`` names a kind by a string literal: ``line: code``, one each."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            literals = [name for operand in operands for name in _kind_literals(operand)]
            others = [operand for operand in operands if not _kind_literals(operand)]
            bare = literals and any(HOLDS_A_KIND.search(ast.unparse(o)) for o in others)
        elif isinstance(node, ast.keyword):
            bare = bool(node.arg and KIND_KEYWORD.match(node.arg) and _kind_literals(node.value))
        elif isinstance(node, ast.Dict):
            keys = [key for key in node.keys if key is not None]
            stored = any(
                isinstance(key, ast.Constant)
                and key.value in ("kind", "reason")
                and _kind_literals(value)
                for key, value in zip(node.keys, node.values, strict=True)
            )
            table = len(keys) >= 2 and all(_kind_literals(key) for key in keys)
            bare = stored or table
        else:
            continue
        if bare:
            found.append(f"{node.lineno}: {ast.unparse(node)}")
    return found


def _outside_definitions(suffix: str) -> Iterator[Path]:
    for path in sorted(APP.rglob(f"*{suffix}")):
        if not any(path.is_relative_to(allowed) for allowed in ALLOWED):
            yield path


def test_no_module_outside_definitions_spells_a_kind():
    bare = [
        f"{path.relative_to(APP.parent)}:{where}"
        for path in _outside_definitions(".py")
        for where in bare_kinds(path.read_text())
    ]
    assert bare == [], "name a kind by its node class (Gate.kind), isinstance or NodeKind"


def test_no_template_compares_a_kind_with_a_literal():
    bare = [
        f"{path.relative_to(APP.parent)}: {match.group(0)}"
        for path in _outside_definitions(".html")
        for match in TEMPLATE_COMPARISON.finditer(path.read_text())
    ]
    assert bare == []


def test_the_scan_sees_each_way_of_spelling_a_kind():
    assert len(bare_kinds('step.kind == "gate"')) == 1
    assert len(bare_kinds('"fanout" != node.kind')) == 1
    assert len(bare_kinds('row["kind"] in ("task", "sleep")')) == 1
    assert len(bare_kinds('payload.get("reason") == "gate"')) == 1
    assert len(bare_kinds('Step.objects.filter(kind="gate")')) == 1
    assert len(bare_kinds('Event.objects.filter(step__kind="task")')) == 1
    assert len(bare_kinds('Step.objects.filter(kind__in=["signal", "gate"])')) == 1
    assert len(bare_kinds('cas_update(where={"kind": "fanout"})')) == 1
    assert len(bare_kinds('HOLDS = {"gate": gate, "signal": signal}')) == 1
    assert len(TEMPLATE_COMPARISON.findall('{% if step.kind == "gate" %}')) == 1


def test_the_scan_lets_other_strings_and_named_kinds_be():
    assert bare_kinds('request.POST.get("next") == "gate"') == []
    assert bare_kinds('context = {"gate": gate, "run": run}') == []
    assert bare_kinds("step.kind == Gate.kind") == []
    assert bare_kinds('Step.objects.filter(kind=NodeKind.GATE, name="gate")') == []
    assert bare_kinds('HOLDS = {"gate": gate, "callback": callback}') == []


def test_every_node_class_the_engine_enters_is_of_a_named_kind():
    kinds = {node_type: node_type.kind for node_type in NODE_ENTRIES}
    assert all(isinstance(kind, NodeKind) for kind in kinds.values()), kinds
    # one class per kind, and every kind entered by one
    assert sorted(kinds.values()) == sorted(NodeKind), kinds


def test_each_node_class_of_the_dsl_has_its_kind():
    assert {cls: cls.kind for cls in (Task, Sleep, Gate, FanOut, WaitForSignal, SubWorkflow)} == {
        Task: NodeKind.TASK,
        Sleep: NodeKind.SLEEP,
        Gate: NodeKind.GATE,
        FanOut: NodeKind.FANOUT,
        WaitForSignal: NodeKind.SIGNAL,
        SubWorkflow: NodeKind.SUBWORKFLOW,
    }
    assert Node.kind == ""  # the base class is of no kind: it is never entered


def test_a_step_stores_a_kind_as_one_of_its_choices():
    field = Step._meta.get_field("kind")
    assert field.choices == NodeKind.choices
    # the admin shows a kind as it is stored
    assert all(value == label for value, label in NodeKind.choices)
