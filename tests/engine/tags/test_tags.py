"""Run tags (issue #42): ``start_run(tags=...)``, ``ctx.set_tags(patch)`` fenced by the
attempt, inheritance by child runs and flow members, ``list_runs(tags=...)``; each
refusal names the tag and writes nothing; ``Run.tags`` and the ``RunTag`` rows agree."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

import workflows
from tests.support.runs import claimed, run_inline
from tests.support.workflows import ECHO
from workflows import FanOut, Retry, SubWorkflow, Task, Workflow
from workflows.engine import complete_work
from workflows.errors import DefinitionError, InvalidInput, LeaseLost
from workflows.models import Event, Flow, Run, RunTag, Step
from workflows.queries.tags import tag_keys, tag_values

pytestmark = pytest.mark.django_db

HERE = __name__
SEEN: list[tuple[str, int, dict[str, str]]] = []


@pytest.fixture(autouse=True)
def _reset() -> None:
    SEEN.clear()


def rows(run: Run) -> dict[str, str]:
    """The run's tags as its ``RunTag`` rows have them."""
    return dict(RunTag.objects.filter(run=run).values_list("key", "value"))


def agree(run: Run) -> dict[str, str]:
    """``run``'s tags, checked to be what its rows say."""
    run.refresh_from_db()
    assert run.tags == rows(run)
    return run.tags


def tag_writes(run: Run) -> list[dict[str, Any]]:
    return [e.payload for e in Event.objects.filter(run=run, type="run.tags_set").order_by("id")]


def tags_customer(ctx: Any) -> str:
    SEEN.append((ctx.step_name, ctx.attempt, ctx.tags))
    ctx.set_tags({"customer": "acme", "stage": None})
    assert ctx.tags["customer"] == "acme"
    return "ok"


def fails_after_tagging(ctx: Any) -> str:
    SEEN.append((ctx.step_name, ctx.attempt, ctx.tags))
    ctx.set_tags({f"attempt-{ctx.attempt}": "tried"})
    if ctx.attempt == 1:
        raise RuntimeError("the first attempt fails after tagging")
    return "done"


def revokes_itself(ctx: Any) -> str:
    ctx.set_tags({"stale": str(ctx.attempt)})
    if ctx.attempt == 1:
        step = Step.objects.get(run_id=ctx.run_id, name=ctx.step_name)
        workflows.revoke_lease(step, expected_attempt=1, reason="wedged")
    return "done"


def too_many(ctx: Any) -> None:
    ctx.set_tags({f"k{n}": "v" for n in range(10)})


def bad_patch(ctx: Any) -> None:
    ctx.set_tags({"Bad Key": "x"})


def reads(ctx: Any) -> dict[str, str]:
    return ctx.tags


class Tagging(Workflow):
    name = "tags_tagging"
    tag = Task(f"{HERE}.tags_customer")
    report = Task(f"{HERE}.reads")


class Retried(Workflow):
    name = "tags_retried"
    tag = Task(f"{HERE}.fails_after_tagging", retry=Retry(max_attempts=2))


class Revoked(Workflow):
    name = "tags_revoked"
    tag = Task(f"{HERE}.revokes_itself")


class TooMany(Workflow):
    name = "tags_too_many"
    tag = Task(f"{HERE}.too_many", retry=Retry(max_attempts=3))


class BadPatch(Workflow):
    name = "tags_bad_patch"
    tag = Task(f"{HERE}.bad_patch", retry=Retry(max_attempts=3))


class Child(Workflow):
    name = "tags_child"
    echo = Task(ECHO)


class Parent(Workflow):
    name = "tags_parent"
    child = SubWorkflow("tags_child")


class OwnParent(Workflow):
    name = "tags_own_parent"
    child = SubWorkflow("tags_child", tags=lambda ctx: {"team": ctx.input["team"]})


class ItemsParent(Workflow):
    name = "tags_items_parent"
    each = FanOut(items=lambda ctx: [{"n": 1}, {"n": 2}], workflow="tags_child")


def _later() -> datetime:
    return timezone.now() + timedelta(hours=1)


# -- start ------------------------------------------------------------------------------


def test_start_run_tags_the_run_and_writes_one_row_a_tag():
    run = workflows.start_run(Tagging, tags={"region": "eu", "customer": "globex"})
    assert Run.objects.get(pk=run.pk).tags == {"customer": "globex", "region": "eu"}
    assert rows(run) == {"customer": "globex", "region": "eu"}
    assert tag_writes(run) == [{"step": None, "tags": {"customer": "globex", "region": "eu"}}]


def test_a_run_without_tags_writes_no_row_and_no_statement_about_tags():
    with CaptureQueriesContext(connection) as untagged:
        run = workflows.start_run(Child, {"a": 1})
    assert Run.objects.get(pk=run.pk).tags == {}
    assert not RunTag.objects.exists()
    assert not any("runtag" in query["sql"].lower() for query in untagged.captured_queries)


def test_a_value_may_be_empty_or_255_characters_and_32_tags_are_allowed():
    tags = {f"k{n}": "v" for n in range(31)} | {"long": "x" * 255, "k0": ""}
    run = workflows.start_run(Child, {}, tags=tags)
    assert agree(run) == tags


@pytest.mark.parametrize(
    ("tags", "named", "problem"),
    [
        ({"Customer": "acme"}, "Customer", "must match"),
        ({"1st": "a"}, "1st", "must match"),
        ({"": "a"}, "", "must match"),
        ({"has space": "a"}, "has space", "must match"),
        ({"k" * 65: "a"}, "k" * 65, "must match"),
        ({"customer": 7}, "customer", "must be a string, got int"),
        ({"customer": None}, "customer", "must be a string, got NoneType"),
        ({"customer": ["a"]}, "customer", "must be a string, got list"),
        ({"customer": "x" * 256}, "customer", "256 characters long; the limit is 255"),
        ({"customer": "a\x00b"}, "customer", "NUL"),
        ({"customer": "\ud800"}, "customer", "lone surrogate"),
    ],
)
def test_a_bad_tag_at_start_is_refused_naming_it_and_nothing_is_written(tags, named, problem):
    with pytest.raises(InvalidInput) as refused:
        workflows.start_run(Child, {}, tags=tags)
    assert repr(named) in refused.value.message
    assert problem in refused.value.message
    assert refused.value.details == {"field": "tags", "tag": named}
    assert not Run.objects.exists()
    assert not RunTag.objects.exists()


def test_a_key_that_is_not_a_string_is_refused():
    with pytest.raises(InvalidInput, match="tag key 3 must be a string"):
        workflows.start_run(Child, {}, tags={3: "x"})  # type: ignore[dict-item]
    assert not Run.objects.exists()


@pytest.mark.parametrize("tags", [["customer", "acme"], "customer:acme", 5])
def test_tags_that_are_not_a_dict_are_refused(tags):
    with pytest.raises(InvalidInput, match="tags must be a dict"):
        workflows.start_run(Child, {}, tags=tags)
    assert not Run.objects.exists()


def test_more_than_32_tags_at_start_are_refused():
    with pytest.raises(InvalidInput, match="33 tags; a run has at most 32") as refused:
        workflows.start_run(Child, {}, tags={f"k{n}": "v" for n in range(33)})
    assert refused.value.details == {"field": "tags"}
    assert not Run.objects.exists()
    assert not RunTag.objects.exists()


def test_tags_are_not_part_of_the_idempotency_fingerprint():
    first = workflows.start_run_once(Child, {"n": 1}, idempotency_key="k", tags={"a": "1"})
    again = workflows.start_run_once(Child, {"n": 1}, idempotency_key="k", tags={"a": "2"})
    assert (first.created, again.created) == (True, False)
    assert again.value.pk == first.value.pk
    assert first.value.input_hash == again.value.input_hash
    assert agree(first.value) == {"a": "1"}
    assert RunTag.objects.count() == 1


# -- ctx.set_tags -----------------------------------------------------------------------


def test_set_tags_sets_and_removes_and_later_steps_see_the_commit():
    run = run_inline(Tagging, tags={"stage": "new", "region": "eu"})
    assert run.status == "completed"
    assert SEEN == [("tag", 1, {"region": "eu", "stage": "new"})]
    assert agree(run) == {"customer": "acme", "region": "eu"}
    assert run.steps.get(name="report").output == {"customer": "acme", "region": "eu"}
    writes = tag_writes(run)
    assert [(w["step"], w.get("attempt")) for w in writes] == [(None, None), ("tag", 1)]
    assert writes[1]["patches"] == [{"customer": "acme", "stage": None}]
    assert writes[1]["tags"] == {"customer": "acme", "region": "eu"}


def test_a_failed_attempts_tags_do_not_land_and_its_retry_starts_from_the_committed_ones():
    run = run_inline(Retried, tags={"start": "yes"}, until=_later())
    assert run.status == "completed"
    assert SEEN == [("tag", 1, {"start": "yes"}), ("tag", 2, {"start": "yes"})]
    assert agree(run) == {"start": "yes", "attempt-2": "tried"}
    assert [w.get("attempt") for w in tag_writes(run)] == [None, 2]


def test_a_stale_attempts_tags_do_not_land():
    run = run_inline(Revoked)
    assert run.status == "completed"
    assert agree(run) == {"stale": "2"}
    assert [w["attempt"] for w in tag_writes(run)] == [2]


def test_tags_fenced_out_with_their_completion_write_nothing():
    run = workflows.start_run(Tagging)
    lease = claimed(run, "tag", "worker-a")
    lease.tag_patches.append({"late": "yes"})
    workflows.revoke_lease(Step.objects.get(run=run, name="tag"), expected_attempt=1)
    with pytest.raises(LeaseLost):
        complete_work(lease, "late result")
    assert agree(run) == {}
    assert tag_writes(run) == []


def test_set_tags_past_32_merged_with_the_committed_tags_fails_the_attempt_for_good():
    run = run_inline(TooMany, tags={f"t{n}": "v" for n in range(25)})
    assert run.status == "failed"
    step = run.steps.get(name="tag")
    assert step.attempt == 1  # a PermanentError: not retried
    assert "35 tags; a run has at most 32" in step.error["message"]
    assert agree(run) == {f"t{n}": "v" for n in range(25)}


def test_set_tags_with_a_bad_key_fails_the_attempt_naming_the_tag():
    run = run_inline(BadPatch)
    assert run.status == "failed"
    step = run.steps.get(name="tag")
    assert "tag key 'Bad Key' must match" in step.error["message"]
    assert agree(run) == {}


def test_the_commit_checks_the_count_again_against_what_was_committed_since():
    run = workflows.start_run(Tagging, tags={f"t{n}": "v" for n in range(30)})
    lease = claimed(run, "tag", "worker-a")
    lease.tag_patches.append({"x1": "a", "x2": "b", "x3": "c"})
    from workflows.engine.tags import TagsRefused

    with pytest.raises(TagsRefused, match="33 tags"):
        complete_work(lease, "result")
    assert agree(run) == {f"t{n}": "v" for n in range(30)}


def test_set_tags_outside_a_running_handler_is_refused():
    from workflows.context import Context

    ctx = Context(run_id=Run().pk, input={}, step_names=())
    with pytest.raises(workflows.WorkflowError, match="only available inside a running handler"):
        ctx.set_tags({"a": "b"})


# -- inheritance ------------------------------------------------------------------------


def test_a_child_run_inherits_its_parents_tags():
    parent = run_inline(Parent, {"n": 1}, tags={"customer": "acme", "region": "eu"})
    child = Run.objects.get(parent_run=parent)
    assert agree(child) == {"customer": "acme", "region": "eu"}
    assert parent.status == "completed"


def test_a_child_given_its_own_tags_keeps_them():
    parent = run_inline(OwnParent, {"team": "ops"}, tags={"customer": "acme"})
    child = Run.objects.get(parent_run=parent)
    assert agree(child) == {"team": "ops"}


def test_a_fan_out_items_child_runs_inherit_the_parents_tags():
    parent = run_inline(ItemsParent, {}, tags={"customer": "acme"})
    children = Run.objects.filter(parent_run=parent)
    assert children.count() == 2
    assert all(agree(child) == {"customer": "acme"} for child in children)


def test_a_bad_subworkflow_tag_is_refused_by_the_definition():
    with pytest.raises(DefinitionError, match="tag key 'Team' must match"):

        class Broken(Workflow):
            name = "tags_broken"
            child = SubWorkflow("tags_child", tags={"Team": "ops"})


def test_a_flow_member_inherits_the_flows_tags_unless_given_its_own():
    flow = workflows.create_flow("tagged", tags={"customer": "acme"})
    assert Flow.objects.get(pk=flow.pk).tags == {"customer": "acme"}
    inherited = workflows.add_to_flow(flow, Child, {}, member="a")
    own = workflows.add_to_flow(flow, Child, {}, member="b", tags={"customer": "globex"})
    assert agree(inherited) == {"customer": "acme"}
    assert agree(own) == {"customer": "globex"}


def test_a_bad_tag_of_a_flow_or_member_is_refused_before_anything_is_written():
    with pytest.raises(InvalidInput, match="'Bad'"):
        workflows.create_flow("tagged", tags={"Bad": "x"})
    assert not Flow.objects.exists()
    flow = workflows.create_flow("tagged")
    with pytest.raises(InvalidInput, match="'x'"):
        workflows.add_to_flow(flow, Child, {}, member="a", tags={"x": 1})
    assert not Run.objects.exists()


# -- finding runs by tag ----------------------------------------------------------------


def test_list_runs_with_two_tags_returns_exactly_the_runs_carrying_both():
    both = workflows.start_run(Child, {}, tags={"customer": "acme", "region": "eu"})
    workflows.start_run(Child, {}, tags={"customer": "acme", "region": "us"})
    workflows.start_run(Child, {}, tags={"customer": "globex", "region": "eu"})
    workflows.start_run(Child, {})
    found = workflows.list_runs(tags={"customer": "acme", "region": "eu"})
    assert [run["id"] for run in found] == [str(both.pk)]
    assert found[0]["tags"] == {"customer": "acme", "region": "eu"}
    assert len(workflows.list_runs(tags={"customer": "acme"})) == 2
    assert workflows.list_runs(tags={"customer": "initech"}) == []


def test_list_runs_refuses_a_malformed_tag_naming_it():
    with pytest.raises(InvalidInput, match="'Customer'"):
        workflows.list_runs(tags={"Customer": "acme"})


def test_the_keys_and_values_in_use_are_read_by_a_loose_index_scan():
    for customer in ("acme", "globex", "initech", "acme"):
        workflows.start_run(Child, {}, tags={"customer": customer, "region": "eu"})
    assert tag_keys() == ["customer", "region"]
    assert tag_values("customer") == ["acme", "globex", "initech"]
    assert tag_values("customer", limit=2) == ["acme", "globex"]
    assert tag_values("nothing") == []


@pytest.mark.parametrize("rare_up_to", [0, 1, 10_000])
def test_a_rare_and_a_common_tag_find_the_same_runs(monkeypatch, rare_up_to):
    """A tag carried by more than ``RARE_TAG_RUNS`` runs is asked as a semi-join, a rarer
    one as a join on its index: each form lists the same runs, once each, newest first."""
    monkeypatch.setattr("workflows.queries.tags.RARE_TAG_RUNS", rare_up_to)
    both = workflows.start_run(Child, {}, tags={"customer": "acme", "region": "eu"})
    acme_us = workflows.start_run(Child, {}, tags={"customer": "acme", "region": "us"})
    globex = workflows.start_run(Child, {}, tags={"customer": "globex", "region": "eu"})
    found = workflows.list_runs(tags={"customer": "acme"})
    assert [run["id"] for run in found] == [str(acme_us.pk), str(both.pk)]
    found = workflows.list_runs(tags={"customer": "globex", "region": "eu"})  # rare + common
    assert [run["id"] for run in found] == [str(globex.pk)]
    found = workflows.list_runs(tags={"customer": "acme", "region": "eu"})
    assert [run["id"] for run in found] == [str(both.pk)]
