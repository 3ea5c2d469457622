"""Every permission the app checks is named once, in ``workflows.permissions``, and every
verb's permission once, in the verb table (``workflows.services.access``)."""

from __future__ import annotations

import ast
import re
from itertools import pairwise
from pathlib import Path

import pytest
from django.apps import apps
from django.contrib.auth.models import AnonymousUser
from django.core.exceptions import PermissionDenied

import workflows
from workflows import permissions
from workflows.engine.guards import RUN_VERBS, STEP_VERBS
from workflows.services.access import (
    BUILD_FLOWS,
    CHANGE_BUDGETS,
    DECIDE_GATES,
    OPERATE_RUNS,
    START_RUNS,
    VERBS,
)

APP = Path(workflows.__file__).parent
HOME = APP / "permissions.py"


def _codenames() -> set[str]:
    """The codename of every permission Django creates for the app's models."""
    found = set()
    for model in apps.get_app_config("workflows").get_models():
        opts = model._meta
        found |= {f"{action}_{opts.model_name}" for action in opts.default_permissions}
        found |= {codename for codename, _ in opts.permissions}
    return found


PERMISSION = re.compile(rf"\bworkflows\.({'|'.join(sorted(_codenames()))})\b")


def _strings(tree: ast.Module) -> list[ast.Constant]:
    """The string literals of a module, docstrings left out (they may name a permission
    in prose; they check nothing)."""
    prose = {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
    }
    return [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in prose
    ]


def test_no_permission_is_spelled_outside_the_permissions_module():
    found = [
        f"{path.relative_to(APP.parent)}:{node.lineno}: {node.value!r}"
        for path in sorted(APP.rglob("*.py"))
        if "migrations" not in path.parts and path != HOME
        for node in _strings(ast.parse(path.read_text()))
        if PERMISSION.search(node.value)
    ]
    assert found == []


def test_the_scan_sees_a_literal():
    tree = ast.parse('"""Needs ``workflows.operate_run``."""\nuser.has_perm("workflows.view_run")')
    assert [node.value for node in _strings(tree) if PERMISSION.search(node.value)] == [
        "workflows.view_run"
    ]


def test_each_named_permission_exists_and_says_what_it_allows():
    codenames = _codenames()
    tree = ast.parse(HOME.read_text())
    body = tree.body
    documented = {
        statement.targets[0].id
        for statement, following in pairwise(body)
        if isinstance(statement, ast.Assign)
        and isinstance(following, ast.Expr)
        and isinstance(following.value, ast.Constant)
    }
    for name in permissions.__all__:
        if name == "EVERY_PERMISSION":
            continue
        value = getattr(permissions, name)
        app_label, _, codename = value.partition(".")
        assert (app_label, codename in codenames) == ("workflows", True), name
        assert name in documented, f"{name} has no docstring"
        assert value in permissions.EVERY_PERMISSION
    assert len(set(permissions.EVERY_PERMISSION)) == len(permissions.__all__) - 1


def test_every_operator_verb_of_the_guards_is_in_the_table():
    assert {
        name: VERBS[name] for name in (*RUN_VERBS, *STEP_VERBS, "signal", "bulk")
    } == dict.fromkeys((*RUN_VERBS, *STEP_VERBS, "signal", "bulk"), OPERATE_RUNS)
    assert VERBS["start"] is START_RUNS
    assert VERBS["raise_budget"] is VERBS["reset_budget"] is CHANGE_BUDGETS
    assert {VERBS[name] for name in ("approve", "reject", "claim", "release")} == {DECIDE_GATES}


def test_building_a_flow_needs_start_run_and_a_refusal_says_why():
    building = ("create_flow", "add_to_flow", "add_dependency", "set_join", "seal_flow")
    assert {VERBS[name] for name in building} == {BUILD_FLOWS}
    assert BUILD_FLOWS.permission == START_RUNS.permission == permissions.START_RUN
    assert BUILD_FLOWS.refusal == (
        "Creating or changing a flow is refused: a flow starts its members as runs, so it "
        "needs the permission workflows.start_run."
    )
    assert START_RUNS.refusal == "starting runs needs the permission workflows.start_run"


class Holder:
    """A signed-in user holding ``held`` permissions only."""

    is_authenticated = True
    is_active = True

    def __init__(self, *held: str) -> None:
        self.held = set(held)

    def has_perm(self, permission: str) -> bool:
        return permission in self.held


@pytest.mark.parametrize("access", [OPERATE_RUNS, START_RUNS, CHANGE_BUDGETS])
def test_a_signed_in_user_needs_the_permission(access):
    assert access.allows(Holder(access.permission))
    assert not access.allows(Holder())
    assert not access.allows(AnonymousUser())
    assert not access.allows(None)


def test_named_users_are_held_to_it_only_where_the_verb_says_so():
    OPERATE_RUNS.check_named(Holder())  # recorded as the actor, not checked
    CHANGE_BUDGETS.check_named(None)  # trusted code
    CHANGE_BUDGETS.check_named(Holder(permissions.OPERATE_RUN))
    with pytest.raises(PermissionDenied, match="changing a budget needs"):
        CHANGE_BUDGETS.check_named(Holder())
    DECIDE_GATES.check_named(Holder())  # the gate's rule, checked by the gate services
