"""The names users, the admin, the API and their tests rely on stay importable."""

from __future__ import annotations

import ast
import importlib
import inspect

import pytest

import workflows
from workflows import errors


def test_public_names_are_importable_from_the_package():
    for name in [
        "start_run",
        "Workflow",
        "Task",
        "Sleep",
        "Retry",
        "PermanentError",
        "WorkflowError",
        "StaleState",
        "LeaseLost",
        "IdempotencyConflict",
        "DefinitionError",
        "DefinitionMissing",
        "DatabaseBusy",
        "InvalidInput",
        "UnknownSignal",
        "explain",
        "GateClaimed",
        "claim_gate",
        "unclaim_gate",
        "gates_for",
        "pause_run",
        "resume_run",
        "terminate_run",
        "rerun_from",
        "revoke_lease",
        "RunCancelled",
        "FailureClass",
        "signal_token",
        "send_signal_with_token",
        "pending_waits",
    ]:
        assert getattr(workflows, name) is not None, name
    from workflows.testing import run_pending

    assert callable(run_pending)


def test_start_run_signature():
    parameters = inspect.signature(workflows.start_run).parameters
    keywords = [
        "idempotency_key",
        "business_key",
        "user",
        "subject",
        "priority",
        "deadline",
        "variables",
        "title",
        "trigger",
        "tags",
    ]
    assert list(parameters) == ["workflow", "input", *keywords]
    assert all(parameters[name].kind is inspect.Parameter.KEYWORD_ONLY for name in keywords)


def test_every_engine_error_has_a_stable_code_and_default_message():
    codes = {}
    for name, value in vars(errors).items():
        if isinstance(value, type) and issubclass(value, errors.WorkflowError):
            error = value()
            assert error.message == (value.__doc__ or "").strip(), name
            codes[value.code] = name
    assert len(codes) == len(
        [
            v
            for v in vars(errors).values()
            if isinstance(v, type) and issubclass(v, errors.WorkflowError)
        ]
    )
    assert issubclass(errors.LeaseLost, errors.StaleState)
    assert errors.StaleState().as_dict() == {
        "code": "stale_state",
        "message": "Someone else changed this row first; nothing was written.",
        "details": {},
    }


def test_unknown_attribute_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no_such_thing"):
        workflows.no_such_thing  # noqa: B018


def test_bulk_is_the_function_even_after_its_module_is_imported():
    import workflows.services.bulk

    assert workflows.bulk is workflows.services.bulk.bulk
    parameters = inspect.signature(workflows.bulk).parameters
    assert list(parameters) == ["verb", "runs", "units", "dry_run", "user", "options"]
    assert parameters["dry_run"].default is True


def test_explain_is_the_function_even_after_its_module_is_imported():
    import workflows.queries.explain

    assert workflows.explain is workflows.queries.explain.explain
    parameters = inspect.signature(workflows.explain).parameters
    assert list(parameters) == ["run", "now"]
    assert parameters["now"].kind is inspect.Parameter.KEYWORD_ONLY


def test_every_public_name_resolves_and_the_lazy_ones_are_typed_where_they_live():
    """``__all__`` is the one list: each name resolves, and each name loaded on first
    access is imported under ``TYPE_CHECKING`` from the module ``_LAZY`` names, so type
    checkers see the real signature."""
    for name in workflows.__all__:
        assert getattr(workflows, name) is not None, name
    tree = ast.parse(inspect.getsource(workflows))
    typed = {
        alias.name: node.module
        for block in tree.body
        if isinstance(block, ast.If) and getattr(block.test, "id", "") == "TYPE_CHECKING"
        for node in block.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    assert typed == workflows._LAZY
    for name, module in workflows._LAZY.items():
        assert getattr(workflows, name) is getattr(importlib.import_module(module), name)


def test_the_verbs_and_limit_types_every_surface_uses_are_public():
    for name in ["change_priority", "raise_budget", "reset_budget", "budget_counters"]:
        assert name in workflows.__all__, name
    for name in ["get_run", "get_step", "list_runs", "Budget", "RateLimit", "Route"]:
        assert name in workflows.__all__, name


@pytest.mark.parametrize("name", ["start_run", "send_signal", "add_to_flow", "add_dependency"])
def test_a_verb_that_returns_the_value_alone_takes_its_once_variants_parameters(name):
    verb, once = getattr(workflows, name), getattr(workflows, f"{name}_once")
    assert verb.__name__ == name and verb.__doc__ != once.__doc__
    assert inspect.signature(verb).parameters == inspect.signature(once).parameters
    returned = inspect.signature(once).return_annotation
    assert returned == f"Created[{inspect.signature(verb).return_annotation}]"
