"""The definitions DSL: graph building, validation errors, registry, snapshots, checks."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.support.handlers import NOOP, noop
from workflows import DefinitionError, DefinitionMissing, Retry, Sleep, Task, Workflow
from workflows.checks import check_definitions
from workflows.definitions import registry


class Linear(Workflow, register=False):
    name = "defs_linear"
    first = Task(NOOP)
    second = Task(noop)
    nap = Sleep(timedelta(seconds=5))


class Diamond(Workflow, register=False):
    name = "defs_diamond"
    version = 3
    start = Task(NOOP)
    left = Task(NOOP, after=["start"])
    right = Task(NOOP, after="start")
    join = Task(NOOP, after=["left", "right"], retry=Retry(max_attempts=7))


def test_default_upstream_is_the_previous_step():
    assert Linear.graph.upstream == {"first": (), "second": ("first",), "nap": ("second",)}
    assert Linear.graph.roots == ("first",)
    assert Linear.graph.sinks == ("nap",)


def test_split_and_join_edges():
    assert Diamond.graph.downstream["start"] == ("left", "right")
    assert Diamond.graph.upstream["join"] == ("left", "right")
    assert Diamond.graph.sinks == ("join",)


def test_callable_handler_becomes_its_dotted_path():
    assert Linear.nodes["second"].handler_path == NOOP


def test_snapshot_describes_graph_and_policies():
    snapshot = Diamond.snapshot()
    assert snapshot["name"] == "defs_diamond"
    assert snapshot["version"] == 3
    join = snapshot["steps"][3]
    assert join["name"] == "join"
    assert join["after"] == ["left", "right"]
    assert join["handler"] == NOOP
    assert join["retry"]["max_attempts"] == 7


def _definition_error(body: dict) -> str:
    with pytest.raises(DefinitionError) as caught:
        type("Broken", (Workflow,), {"__module__": __name__, "name": "broken", **body})
    return str(caught.value)


def test_unknown_upstream_names_workflow_and_step():
    message = _definition_error({"a": Task(NOOP), "b": Task(NOOP, after=["nope"])})
    assert "workflow 'broken' v1, step 'b'" in message
    assert "unknown upstream 'nope'" in message


def test_cycle_is_reported_with_its_path():
    message = _definition_error(
        {"a": Task(NOOP, after=["c"]), "b": Task(NOOP, after=["a"]), "c": Task(NOOP, after=["b"])}
    )
    assert "cycle" in message
    assert "a -> b -> c -> a" in message


def test_self_dependency_is_rejected():
    assert "lists itself" in _definition_error({"a": Task(NOOP, after=["a"])})


def test_unresolvable_handler_path():
    message = _definition_error({"a": Task("tests.unit.test_definitions.missing")})
    assert "step 'a'" in message
    assert "cannot be imported" in message


def test_lambda_handler_is_rejected():
    assert "not a module-level function" in _definition_error({"a": Task(lambda ctx: 1)})


@pytest.mark.parametrize(
    ("retry", "complaint"),
    [
        (Retry(max_attempts=0), "max_attempts must be an integer >= 1"),
        (Retry(backoff=0.5), "backoff must be a number >= 1"),
        (Retry(initial_interval=timedelta(seconds=-1)), "initial_interval"),
        (Retry(non_retryable=("no.such.Error",)), "cannot be imported"),
        (Retry(non_retryable=(42,)), "must be exception classes"),
    ],
)
def test_bad_retry_numbers(retry, complaint):
    message = _definition_error({"a": Task(NOOP, retry=retry)})
    assert "step 'a'" in message
    assert complaint in message


def test_bad_timeout_and_sleep_arguments():
    assert "timeout must be a positive" in _definition_error(
        {"a": Task(NOOP, timeout=timedelta(0))}
    )
    assert "exactly one of a duration or until" in _definition_error({"a": Sleep()})
    assert "non-negative" in _definition_error({"a": Sleep(timedelta(seconds=-1))})


def test_missing_name_and_bad_version():
    with pytest.raises(DefinitionError, match="name must be a non-empty string"):

        class Nameless(Workflow):
            a = Task(NOOP)

    with pytest.raises(DefinitionError, match="version must be an integer >= 1"):

        class Versionless(Workflow):
            name = "defs_versionless"
            version = 0
            a = Task(NOOP)


def test_empty_workflow_is_rejected():
    assert "declares no steps" in _definition_error({})


def test_duplicate_name_and_version_is_rejected():
    class First(Workflow):
        name = "defs_duplicate"
        a = Task(NOOP)

    try:
        with pytest.raises(DefinitionError, match="already registered by"):
            type(
                "Second",
                (Workflow,),
                {"__module__": __name__, "name": "defs_duplicate", "a": Task(NOOP)},
            )
    finally:
        registry.unregister("defs_duplicate", 1)


def test_registry_resolves_latest_version_and_reports_missing():
    class V1(Workflow):
        name = "defs_versions"
        a = Task(NOOP)

    class V2(Workflow):
        name = "defs_versions"
        version = 2
        a = Task(NOOP)

    try:
        assert registry.resolve("defs_versions") is V2
        assert registry.resolve(V1) is V1
        assert registry.get("defs_versions", 1) is V1
        with pytest.raises(DefinitionMissing, match="'defs_versions' v9 is not registered"):
            registry.get("defs_versions", 9)
        with pytest.raises(DefinitionMissing, match="no workflow named 'nope'"):
            registry.resolve("nope")
    finally:
        registry.unregister("defs_versions", 1)
        registry.unregister("defs_versions", 2)


def test_system_check_reports_a_registered_workflow_gone_bad(monkeypatch):
    class Checked(Workflow):
        name = "defs_checked"
        a = Task(NOOP)

    try:
        assert [e for e in check_definitions() if "defs_checked" in e.msg] == []
        monkeypatch.setattr(Checked.nodes["a"], "handler", "tests.unit.gone.handler")
        errors = [e for e in check_definitions() if "defs_checked" in e.msg]
        assert [e.id for e in errors] == ["workflows.E001"]
        assert "step 'a'" in errors[0].msg
    finally:
        registry.unregister("defs_checked", 1)


def test_retry_delays_grow_and_cap():
    retry = Retry(
        initial_interval=timedelta(seconds=1), backoff=3.0, max_interval=timedelta(seconds=20)
    )
    assert [retry.delay_after(n).total_seconds() for n in (1, 2, 3, 4)] == [1, 3, 9, 20]


def test_system_check_reports_unknown_child_workflows():
    from workflows import SubWorkflow
    from workflows.checks import check_child_workflows

    class Orphaned(Workflow):
        name = "defs_orphaned"
        child = SubWorkflow("defs_no_such_child")

    try:
        errors = [e for e in check_child_workflows() if "defs_orphaned" in e.msg]
        assert [e.id for e in errors] == ["workflows.E009"]
        assert "child workflow 'defs_no_such_child' is not registered" in errors[0].msg
    finally:
        registry.unregister("defs_orphaned", 1)


def test_gate_and_fanout_definitions_are_validated():
    from workflows import FanOut, Gate, Option

    message = _definition_error(
        {
            "g": Gate(
                prompt="?",
                options=[Option("a"), Option("a")],
                min_selections=3,
                on_timeout="explode",
            )
        }
    )
    assert "duplicate option values ['a']" in message
    assert "min_selections=3 but only 2 options exist" in message
    assert "on_timeout must be one of" in message
    message = _definition_error({"f": FanOut(NOOP, items=[1, 2], max_parallel=0)})
    assert "items= must be callable" in message
    assert "max_parallel must be an integer >= 1" in message
    assert "exactly one of a handler or workflow=" in _definition_error(
        {"f": FanOut(items=lambda ctx: [])}
    )


@pytest.mark.parametrize(
    ("example", "problem"),
    [
        (["a list"], "input_example must be a JSON object (a dict), got list"),
        ({"when": timedelta(days=1)}, "input_example must be JSON: "),
        ({"ratio": float("nan")}, "input_example must be JSON: "),
    ],
)
def test_an_input_example_must_be_a_json_object(example, problem):
    with pytest.raises(DefinitionError, match="defs_example") as refused:

        class Example(Workflow, register=False):
            name = "defs_example"
            input_example = example
            only = Task(NOOP)

    assert problem in str(refused.value)


def test_an_input_example_is_optional_and_kept_as_declared():
    class Example(Workflow, register=False):
        name = "defs_example"
        input_example = {"order": "A-1", "lines": [{"sku": "X", "quantity": 1}]}
        only = Task(NOOP)

    assert Example.input_example == {"order": "A-1", "lines": [{"sku": "X", "quantity": 1}]}
    assert Linear.input_example is None


@pytest.mark.parametrize("name", ["label", "problems", "validate"])
def test_a_step_named_after_a_workflow_attribute_is_refused_naming_it(name):
    message = _definition_error({name: Task(NOOP)})
    assert f"workflow 'broken' v1, step {name!r}: the name is an attribute of Workflow" in message
