"""Run tags with every operator verb and every structure (issue #42's bar: each pair works
or is refused with a reason that names the rule; docs/guide/tags.md, "With the operator
verbs").

After each verb the run's tags are checked three ways: ``Run.tags`` equals its
``RunTag`` rows (each dated with the run's creation), the last ``run.tags_set`` event
made exactly those tags, and ``list_runs(tags=...)`` finds the run by each of them.
The semantics, verb by verb:

- tags are never rolled back: retry, rerun, skip, cancel, terminate, pause and resume,
  revoke, a gate's decision, a signal and dismiss leave the committed tags as they are;
- only an attempt whose result is recorded commits its ``ctx.set_tags`` patches (a
  completion, or the parking of an awaiting handler): a failed, revoked, terminated,
  failed-by-operator or skipped attempt writes none;
- a rerun or retried step sets its tags again on top of the committed ones;
- loop rounds and fan-out items commit one by one, the later commit winning a key;
- a child run (SubWorkflow, a fan-out item's child) copies its parent's tags as they
  are when it starts, rerun or retried ones included.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

import workflows
from tests.support.runs import claimed
from workflows import Await, FanOut, Gate, Loop, Retry, SubWorkflow, Task, WaitForSignal, Workflow
from workflows.engine import complete_work
from workflows.errors import InvalidTransition, LeaseLost, PermanentError
from workflows.models import Event, FanOutItem, Run, RunTag, Step
from workflows.services.steps import fail_step
from workflows.testing import run_pending

pytestmark = pytest.mark.django_db

HERE = __name__

# What each step's handler sets (a patch, or a function of the context giving one), and
# which of its attempts fail after setting it: (step, attempt) → "transient" | "permanent".
PLAN: dict[str, dict[str, str | None] | Callable[[Any], dict[str, str | None]]] = {}
FAILS: dict[tuple[str, int], str] = {}


@pytest.fixture(autouse=True)
def _reset() -> None:
    PLAN.clear()
    FAILS.clear()


def tagging(ctx: Any) -> str:
    """Set the step's planned tags, then fail if planned, else succeed."""
    patch = PLAN.get(ctx.step_name)
    if callable(patch):
        patch = patch(ctx)
    if patch:
        ctx.set_tags(patch)
    failure = FAILS.get((ctx.step_name, ctx.attempt))
    if failure == "transient":
        raise RuntimeError(f"{ctx.step_name} attempt {ctx.attempt} fails after tagging")
    if failure == "permanent":
        raise PermanentError(f"{ctx.step_name} fails for good after tagging")
    return "ok"


def tagging_then_awaiting(ctx: Any) -> Any:
    """Tag, await signal ``go``; once resumed, tag again."""
    if ctx.resumed is None:
        ctx.set_tags({"asked": "yes"})
        return Await("go")
    ctx.set_tags({"answered": ctx.resumed["payload"]["by"]})
    return "answered"


def undo_tagging(ctx: Any) -> None:
    """A compensation that tags its run as it undoes a step."""
    ctx.set_tags({f"undone-{ctx.step_name}": "yes"})


def fails_item_one(ctx: Any) -> dict[str, str | None]:
    """Item 1 tags, then fails for good; item 2 plans its own tag."""
    if ctx.item == 1:
        ctx.set_tags({"item-1": "failing"})
        raise PermanentError("item 1 fails for good after tagging")
    return {"item-2": "set"}


def three_rounds(ctx: Any) -> bool:
    return len(ctx.steps["body"].iterations) < 3


def two_items(ctx: Any) -> list[int]:
    return [1, 2]


T = f"{HERE}.tagging"
RETRIED = Retry(max_attempts=3, initial_interval=timedelta(seconds=1))


class Chain(Workflow):
    name = "tagcomp_chain"
    tag = Task(T, retry=RETRIED)
    after = Task(T, retry=RETRIED)


class Compensated(Workflow):
    name = "tagcomp_compensated"
    tag = Task(T, compensate=f"{HERE}.undo_tagging")
    after = Task(T)


class Gated(Workflow):
    name = "tagcomp_gated"
    tag = Task(T)
    check = Gate(prompt="go on?")
    done = Task(T)


class Signalled(Workflow):
    name = "tagcomp_signalled"
    tag = Task(T)
    wait = WaitForSignal("go")
    done = Task(T)


class Awaiting(Workflow):
    name = "tagcomp_awaiting"
    ask = Task(f"{HERE}.tagging_then_awaiting", awaits=["go"])


class Looping(Workflow):
    name = "tagcomp_looping"
    body = Task(T)
    again = Loop(back_to="body", while_=three_rounds, max_iterations=5)
    done = Task(T)


class Fanned(Workflow):
    name = "tagcomp_fanned"
    fan = FanOut(T, items=two_items, retry=RETRIED)
    done = Task(T)


class Batched(Workflow):
    name = "tagcomp_batched"
    fan = FanOut(T, items=two_items, batch_size=2)


class BatchedTolerant(Workflow):
    name = "tagcomp_batched_tolerant"
    fan = FanOut(T, items=two_items, batch_size=2, tolerated_failures=1)


class Leaf(Workflow):
    name = "tagcomp_leaf"
    leaf = Task(T)


class Parent(Workflow):
    name = "tagcomp_parent"
    tag = Task(T)
    child = SubWorkflow("tagcomp_leaf")
    after = Task(T)


class ChildrenFanned(Workflow):
    """One child at a time, beside a step that changes the parent's tags meanwhile."""

    name = "tagcomp_children_fanned"
    each = FanOut(items=two_items, workflow="tagcomp_leaf", max_parallel=1)
    mark = Task(T, after=[])


def later() -> datetime:
    return timezone.now() + timedelta(hours=1)


def rows(run: Run) -> dict[str, str]:
    return dict(RunTag.objects.filter(run_id=run.pk).values_list("key", "value"))


def tag_writes(run: Run) -> list[dict[str, Any]]:
    events = Event.objects.filter(run_id=run.pk, type="run.tags_set").order_by("id")
    return list(events.values_list("payload", flat=True))


def check(run: Run, expected: dict[str, str]) -> Run:
    """``run``'s tags are ``expected``: the dict, its rows (dated with the run), the last
    ``run.tags_set`` event, and ``list_runs`` finding it by each tag and by all."""
    run.refresh_from_db()
    assert run.tags == expected
    assert rows(run) == expected
    dates = set(RunTag.objects.filter(run_id=run.pk).values_list("created_at", flat=True))
    assert dates <= {run.created_at}
    writes = tag_writes(run)
    assert (writes[-1]["tags"] if writes else {}) == expected
    for key, value in expected.items():
        found = workflows.list_runs(tags={key: value}, limit=1000)
        assert str(run.pk) in {row["id"] for row in found}, (key, value)
    if expected:
        found = workflows.list_runs(tags=expected, limit=1000)
        assert str(run.pk) in {row["id"] for row in found}
    return run


def finish(run: Run, step: str, patch: dict[str, str | None] | None = None) -> None:
    """Claim ``step`` and complete it as a worker whose handler set ``patch``."""
    lease = claimed(run, step, "worker-a")
    if patch:
        lease.tag_patches.append(patch)
    complete_work(lease, "ok")


@pytest.fixture
def operator() -> User:
    return User.objects.create_superuser("tag-operator")


# -- retry ------------------------------------------------------------------------------


def test_a_retried_steps_failed_attempt_writes_nothing_and_its_retry_writes_its_own():
    PLAN["tag"] = lambda ctx: {f"attempt-{ctx.attempt}": "tried", "shared": str(ctx.attempt)}
    FAILS[("tag", 1)] = "transient"
    run = workflows.start_run(Chain, tags={"customer": "acme"})
    run_pending(until=later())
    run = check(run, {"customer": "acme", "attempt-2": "tried", "shared": "2"})
    assert run.status == "completed"
    assert [write.get("attempt") for write in tag_writes(run)] == [None, 2]


def test_retry_step_after_a_permanent_failure_keeps_the_tags_and_adds_the_new_attempts():
    PLAN["tag"] = lambda ctx: {"tier": f"attempt-{ctx.attempt}"}
    FAILS[("tag", 1)] = "permanent"
    run = workflows.start_run(Chain, tags={"customer": "acme"})
    run_pending()
    run = check(run, {"customer": "acme"})
    assert run.status == "failed"
    workflows.retry_step(Step.objects.get(run=run, name="tag"))
    check(run, {"customer": "acme"})  # a retry writes no tags by itself
    run_pending()
    run = check(run, {"customer": "acme", "tier": "attempt-2"})
    assert run.status == "completed"


def test_retry_run_keeps_the_tags_and_the_retried_steps_set_theirs():
    PLAN["tag"] = {"stage": "tagged"}
    PLAN["after"] = lambda ctx: {"after": f"attempt-{ctx.attempt}"}
    FAILS[("after", 1)] = "permanent"
    run = workflows.start_run(Chain, tags={"customer": "acme"})
    run_pending()
    run = check(run, {"customer": "acme", "stage": "tagged"})
    assert run.status == "failed"
    workflows.retry_run(run)
    run_pending()
    run = check(run, {"customer": "acme", "stage": "tagged", "after": "attempt-2"})
    assert run.status == "completed"


# -- rerun ------------------------------------------------------------------------------


def test_a_rerun_keeps_the_tags_and_the_rerun_steps_set_theirs_again():
    """Not rolled back: a key the first pass set stays even when the rerun's pass no
    longer sets it; a key set again takes the rerun's value."""
    passes = iter(("first", "second"))
    PLAN["tag"] = lambda ctx: {"pass": next(passes)}
    PLAN["after"] = {"after": "done"}
    run = workflows.start_run(Chain, tags={"customer": "acme"})
    run_pending()
    run = check(run, {"customer": "acme", "pass": "first", "after": "done"})
    del PLAN["after"]
    workflows.rerun_from(run, "tag")
    check(run, {"customer": "acme", "pass": "first", "after": "done"})
    run_pending()
    run = check(run, {"customer": "acme", "pass": "second", "after": "done"})
    assert run.status == "completed"
    assert [write.get("step") for write in tag_writes(run)] == [None, "tag", "after", "tag"]


def test_a_rerun_step_may_remove_a_tag_it_set():
    PLAN["after"] = {"draft": "yes"}
    run = workflows.start_run(Chain)
    run_pending()
    check(run, {"draft": "yes"})
    PLAN["after"] = {"draft": None}
    workflows.rerun_from(run, "after")
    run_pending()
    check(run, {})
    assert workflows.list_runs(tags={"draft": "yes"}) == []


# -- skip and fail by an operator ------------------------------------------------------


def test_a_skipped_steps_tags_never_land(operator):
    """The skipped step's failed attempt had set tags: none land, and the skip (an
    operator's output, no handler) sets none either; the steps after it set theirs."""
    PLAN["tag"] = {"skipped": "no"}
    PLAN["after"] = {"after": "ran"}
    FAILS[("tag", 1)] = "transient"
    run = workflows.start_run(Chain, tags={"customer": "acme"})
    run_pending()  # the retry is not due yet
    assert Step.objects.get(run=run, name="tag").status == "retry_scheduled"
    workflows.skip_step(Step.objects.get(run=run, name="tag"), user=operator, output="by hand")
    check(run, {"customer": "acme"})
    run_pending(until=later())
    run = check(run, {"customer": "acme", "after": "ran"})
    assert run.status == "completed"


def test_failing_a_running_step_by_hand_fences_its_tags_out(operator):
    run = workflows.start_run(Chain, tags={"customer": "acme"})
    lease = claimed(run, "tag", "worker-a")
    lease.tag_patches.append({"late": "yes"})
    fail_step(Step.objects.get(run=run, name="tag"), expected_attempt=1, user=operator)
    with pytest.raises(LeaseLost):
        complete_work(lease, "late result")
    run = check(run, {"customer": "acme"})
    assert run.status == "failed"


def test_a_compensation_commits_its_tags_and_the_failed_steps_do_not_land():
    PLAN["tag"] = {"stage": "tagged"}
    PLAN["after"] = {"stage": "after"}
    FAILS[("after", 1)] = "permanent"
    run = workflows.start_run(Compensated, tags={"customer": "acme"})
    run_pending()
    run = check(run, {"customer": "acme", "stage": "tagged", "undone-tag": "yes"})
    assert run.status == "compensated"


def test_a_cancelled_runs_compensation_commits_its_tags():
    run = workflows.start_run(Compensated, tags={"customer": "acme"})
    finish(run, "tag", {"stage": "tagged"})
    workflows.cancel_run(run, reason="not needed")
    run_pending()
    run = check(run, {"customer": "acme", "stage": "tagged", "undone-tag": "yes"})
    assert run.status == "cancelled"


# -- cancel, terminate, pause and resume ------------------------------------------------


def test_a_cancelled_run_keeps_its_tags_and_an_attempt_finishing_in_flight_commits_its_own():
    """Cancel waits for work in flight: an attempt still holding its lease is recorded,
    its tags with its result, then the run is cancelled with every tag it had."""
    run = workflows.start_run(Chain, tags={"customer": "acme"})
    lease = claimed(run, "tag", "worker-a")
    lease.tag_patches.append({"in-flight": "yes"})
    workflows.cancel_run(run, reason="not needed")
    check(run, {"customer": "acme"})
    complete_work(lease, "finished in flight")
    run_pending()
    run = check(run, {"customer": "acme", "in-flight": "yes"})
    assert run.status == "cancelled"


def test_a_late_attempt_of_a_cancelled_run_is_refused_as_stale_and_writes_no_tags():
    """The wedged attempt of a cancelling run is revoked so the cancel can end; its late
    completion is fenced out with its tags."""
    run = workflows.start_run(Chain, tags={"customer": "acme"})
    lease = claimed(run, "tag", "worker-a")
    lease.tag_patches.append({"late": "yes"})
    workflows.cancel_run(run, reason="not needed")
    workflows.revoke_lease(Step.objects.get(run=run, name="tag"), expected_attempt=1)
    run_pending()
    assert Run.objects.get(pk=run.pk).status == "cancelled"
    with pytest.raises(LeaseLost):
        complete_work(lease, "late result")
    check(run, {"customer": "acme"})
    assert workflows.list_runs(tags={"late": "yes"}) == []


def test_a_terminated_runs_running_attempt_writes_no_tags():
    run = workflows.start_run(Chain, tags={"customer": "acme"})
    lease = claimed(run, "tag", "worker-a")
    lease.tag_patches.append({"late": "yes"})
    workflows.terminate_run(run, reason="stop now")
    with pytest.raises(LeaseLost):
        complete_work(lease, "late result")
    run = check(run, {"customer": "acme"})
    assert run.status == "terminated"


def test_a_paused_run_records_the_tags_of_work_in_flight_and_goes_on_after_the_resume():
    PLAN["after"] = {"after": "ran"}
    run = workflows.start_run(Chain, tags={"customer": "acme"})
    lease = claimed(run, "tag", "worker-a")
    lease.tag_patches.append({"in-flight": "yes"})
    workflows.pause_run(run, reason="hold on")
    complete_work(lease, "finished while paused")
    run_pending()
    run = check(run, {"customer": "acme", "in-flight": "yes"})
    assert run.status == "paused"
    workflows.resume_run(run)
    run_pending()
    run = check(run, {"customer": "acme", "in-flight": "yes", "after": "ran"})
    assert run.status == "completed"


def test_an_ended_run_refuses_the_verbs_that_would_run_it_again_naming_the_rule():
    run = workflows.start_run(Chain, tags={"customer": "acme"})
    run_pending()
    with pytest.raises(InvalidTransition, match="run is completed; pause needs"):
        workflows.pause_run(run)
    with pytest.raises(InvalidTransition, match="run is completed; retry needs"):
        workflows.retry_run(run)
    check(run, {"customer": "acme"})


# -- revoke -----------------------------------------------------------------------------


def test_a_revoked_attempts_tags_do_not_land_and_the_next_attempts_do():
    run = workflows.start_run(Chain, tags={"customer": "acme"})
    lease = claimed(run, "tag", "worker-a")
    lease.tag_patches.append({"wedged": "yes"})
    workflows.revoke_lease(Step.objects.get(run=run, name="tag"), expected_attempt=1)
    with pytest.raises(LeaseLost):
        complete_work(lease, "late result")
    check(run, {"customer": "acme"})
    finish(run, "tag", {"fresh": "yes"})
    check(run, {"customer": "acme", "fresh": "yes"})


# -- gates and signals ------------------------------------------------------------------


@pytest.mark.parametrize("decision", ["approve", "reject"])
def test_a_gates_decision_keeps_the_tags(operator, decision):
    PLAN["tag"] = {"stage": "asked"}
    PLAN["done"] = {"stage": "done"}
    run = workflows.start_run(Gated, tags={"customer": "acme"})
    run_pending()
    check(run, {"customer": "acme", "stage": "asked"})
    gate = Step.objects.get(run=run, name="check")
    verb = workflows.approve_gate if decision == "approve" else workflows.reject_gate
    verb(gate, user=operator)
    run_pending()
    run = check(run, {"customer": "acme", "stage": "done" if decision == "approve" else "asked"})
    assert run.status == ("completed" if decision == "approve" else "failed")


def test_skipping_a_gate_keeps_the_tags(operator):
    run = workflows.start_run(Gated, tags={"customer": "acme"})
    run_pending()
    workflows.skip_step(Step.objects.get(run=run, name="check"), user=operator)
    run_pending()
    run = check(run, {"customer": "acme"})
    assert run.status == "completed"


def test_a_signal_keeps_the_tags():
    PLAN["done"] = {"signalled": "yes"}
    run = workflows.start_run(Signalled, tags={"customer": "acme"})
    run_pending()
    workflows.send_signal(run, "go", {"by": "ops"})
    run_pending()
    run = check(run, {"customer": "acme", "signalled": "yes"})
    assert run.status == "completed"


def test_an_awaiting_handlers_tags_land_when_it_parks_and_again_when_it_resumes():
    run = workflows.start_run(Awaiting, tags={"customer": "acme"})
    run_pending()
    assert Step.objects.get(run=run, name="ask").status == "waiting"
    check(run, {"customer": "acme", "asked": "yes"})
    workflows.send_signal(run, "go", {"by": "ops"})
    run_pending()
    run = check(run, {"customer": "acme", "asked": "yes", "answered": "ops"})
    assert run.status == "completed"
    assert [write.get("attempt") for write in tag_writes(run)] == [None, 1, 2]


def test_skipping_an_awaiting_step_keeps_what_it_committed_when_it_parked(operator):
    run = workflows.start_run(Awaiting, tags={"customer": "acme"})
    run_pending()
    workflows.skip_step(Step.objects.get(run=run, name="ask"), user=operator)
    run = check(run, {"customer": "acme", "asked": "yes"})
    assert run.status == "completed"


# -- loops and fan-outs -----------------------------------------------------------------


def test_a_loop_body_tags_round_by_round_the_latest_round_winning_a_key():
    PLAN["body"] = lambda ctx: {"round": str(ctx.iteration), f"round-{ctx.iteration}": "ran"}
    run = workflows.start_run(Looping, tags={"customer": "acme"})
    run_pending()
    run = check(
        run,
        {"customer": "acme", "round": "3", "round-1": "ran", "round-2": "ran", "round-3": "ran"},
    )
    assert run.status == "completed"
    assert [write["tags"].get("round") for write in tag_writes(run)] == [None, "1", "2", "3"]


def test_a_loops_rerun_keeps_the_rounds_tags_and_runs_its_rounds_again():
    PLAN["body"] = lambda ctx: {"round": str(ctx.iteration)}
    run = workflows.start_run(Looping)
    run_pending()
    check(run, {"round": "3"})
    PLAN["body"] = lambda ctx: {"rerun-round": str(ctx.iteration)}
    workflows.rerun_from(run, "body")
    check(run, {"round": "3"})
    run_pending()
    body = Step.objects.get(run=run, name="body")
    assert body.iteration > 3  # a body's iterations count on across the run
    check(run, {"round": "3", "rerun-round": str(body.iteration)})


def test_fan_out_items_commit_their_tags_one_by_one_and_a_failed_items_do_not_land():
    PLAN["fan"] = lambda ctx: {f"item-{ctx.item}": f"attempt-{ctx.attempt}", "last": str(ctx.item)}
    FAILS[("fan", 1)] = "transient"  # each item's first attempt fails after tagging
    run = workflows.start_run(Fanned, tags={"customer": "acme"})
    run_pending(until=later())
    run = check(
        run,
        {"customer": "acme", "item-1": "attempt-2", "item-2": "attempt-2", "last": "2"},
    )
    assert run.status == "completed"
    items = [write["item"] for write in tag_writes(run)[1:]]
    assert sorted(items) == ["0", "1"]


def test_a_batch_of_items_commits_each_items_tags():
    PLAN["fan"] = lambda ctx: {f"item-{ctx.item}": "done"}
    run = workflows.start_run(Batched, tags={"customer": "acme"})
    run_pending()
    run = check(run, {"customer": "acme", "item-1": "done", "item-2": "done"})
    assert run.status == "completed"


def test_retry_step_of_a_fan_out_reruns_the_failed_items_whose_tags_then_land():
    PLAN["fan"] = lambda ctx: {f"item-{ctx.item}": "failed" if FAILS else "ok"}
    FAILS.update({("fan", 1): "transient", ("fan", 2): "transient", ("fan", 3): "transient"})
    run = workflows.start_run(Fanned, tags={"customer": "acme"})
    run_pending(until=later())
    run = check(run, {"customer": "acme"})
    assert run.status == "failed"
    FAILS.clear()
    workflows.retry_step(Step.objects.get(run=run, name="fan"))
    run_pending(until=later())
    run = check(run, {"customer": "acme", "item-1": "ok", "item-2": "ok"})
    assert run.status == "completed"


def test_a_batch_commits_the_tags_of_its_completed_items_only():
    """Each item of a batch has its own patches: the failed item's tags do not ride in
    with the completed item's commit."""
    PLAN["fan"] = fails_item_one
    run = workflows.start_run(BatchedTolerant, tags={"customer": "acme"})
    run_pending()
    run = check(run, {"customer": "acme", "item-2": "set"})
    assert run.status == "completed"
    assert [write["patches"] for write in tag_writes(run)[1:]] == [[{"item-2": "set"}]]


def test_a_batch_whose_second_items_tags_overflow_records_the_first_and_fails_the_second():
    """Each item's tags fit at its call, but the two together pass 32: the batch falls
    back to recording item by item, so the first item's tags land and the second
    attempt fails for good naming the limit."""
    PLAN["fan"] = lambda ctx: {f"item-{ctx.item}": "set"}
    run = workflows.start_run(BatchedTolerant, tags={f"t{n}": "v" for n in range(31)})
    run_pending()
    run.refresh_from_db()
    expected = {f"t{n}": "v" for n in range(31)}
    landed = {key for key in ("item-1", "item-2") if key in run.tags}
    assert len(landed) == 1
    check(run, expected | {key: "set" for key in landed})
    failed = FanOutItem.objects.get(step__run=run, status="failed")
    assert "33 tags; a run has at most 32" in failed.error["message"]
    assert run.status == "completed"  # one failure tolerated


# -- children ---------------------------------------------------------------------------


def test_a_child_inherits_the_tags_its_parent_has_when_it_starts_and_keeps_its_own_after():
    PLAN["tag"] = {"tier": "gold", "draft": None}
    PLAN["leaf"] = {"leaf": "done"}
    PLAN["after"] = {"after": "done"}
    parent = workflows.start_run(Parent, tags={"customer": "acme", "draft": "yes"})
    run_pending()
    child = Run.objects.get(parent_run=parent)
    check(child, {"customer": "acme", "tier": "gold", "leaf": "done"})
    parent = check(parent, {"customer": "acme", "tier": "gold", "after": "done"})
    assert parent.status == "completed"


def test_a_rerun_child_step_starts_a_child_with_the_parents_current_tags():
    PLAN["after"] = {"after": "done"}
    parent = workflows.start_run(Parent, tags={"customer": "acme"})
    run_pending()
    first = Run.objects.get(parent_run=parent)
    check(first, {"customer": "acme"})
    workflows.rerun_from(parent, "child")
    run_pending()
    second = Run.objects.filter(parent_run=parent).exclude(pk=first.pk).get()
    check(second, {"customer": "acme", "after": "done"})
    check(first, {"customer": "acme"})  # a copy: the first child keeps its own


def test_a_fan_outs_next_child_inherits_the_parents_tags_as_changed_meanwhile():
    parent = workflows.start_run(ChildrenFanned, tags={"customer": "acme"})
    first = Run.objects.get(parent_run=parent)
    check(first, {"customer": "acme"})
    finish(parent, "mark", {"marked": "yes"})  # the parallel step changes the parent's tags
    run_pending()
    second = Run.objects.filter(parent_run=parent).exclude(pk=first.pk).get()
    check(second, {"customer": "acme", "marked": "yes"})
    check(first, {"customer": "acme"})
    assert check(parent, {"customer": "acme", "marked": "yes"}).status == "completed"


def test_cancelling_a_parent_cancels_its_children_with_their_tags():
    parent = workflows.start_run(Parent, tags={"customer": "acme"})
    finish(parent, "tag", {"tier": "gold"})  # the child starts with the completion
    child = Run.objects.get(parent_run=parent)
    workflows.cancel_run(parent, reason="not needed")
    run_pending()
    assert check(parent, {"customer": "acme", "tier": "gold"}).status == "cancelled"
    assert check(child, {"customer": "acme", "tier": "gold"}).status == "cancelled"


# -- flows ------------------------------------------------------------------------------


def test_flow_members_keep_their_tags_through_the_flows_verbs():
    PLAN["leaf"] = lambda ctx: {"member": "done"}
    flow = workflows.create_flow("tagged", tags={"customer": "acme"})
    first = workflows.add_to_flow(flow, Leaf, {}, member="first")
    second = workflows.add_to_flow(flow, Leaf, {}, member="second", after=["first"])
    own = workflows.add_to_flow(flow, Leaf, {}, member="own", tags={"team": "ops"})
    check(second, {"customer": "acme"})  # blocked, tagged from its start
    FAILS[("leaf", 1)] = "permanent"
    run_pending()
    assert check(first, {"customer": "acme"}).status == "failed"
    assert check(own, {"team": "ops"}).status == "failed"
    assert check(second, {"customer": "acme"}).status == "cancelled"  # its dependency failed
    FAILS.clear()
    workflows.retry_run(first)
    run_pending()
    assert check(first, {"customer": "acme", "member": "done"}).status == "completed"
    assert check(second, {"customer": "acme", "member": "done"}).status == "completed"
    workflows.cancel_flow(flow, "cancel_all", reason="done with it")
    check(own, {"team": "ops"})
    found = {row["id"] for row in workflows.list_runs(tags={"customer": "acme"})}
    assert found == {str(first.pk), str(second.pk)}


def test_cancelling_a_flow_keeps_its_members_tags():
    flow = workflows.create_flow("tagged", tags={"customer": "acme"})
    member = workflows.add_to_flow(flow, Leaf, {}, member="only")
    blocked = workflows.add_to_flow(flow, Leaf, {}, member="next", after=["only"])
    workflows.cancel_flow(flow, "cancel_all", reason="not needed")
    run_pending()
    assert check(member, {"customer": "acme"}).status == "cancelled"
    assert check(blocked, {"customer": "acme"}).status == "cancelled"


# -- dismiss ----------------------------------------------------------------------------


def test_a_dismissed_run_keeps_its_tags_and_is_found_by_them(operator):
    FAILS[("tag", 1)] = "permanent"
    run = workflows.start_run(Chain, tags={"customer": "acme"})
    run_pending()
    workflows.dismiss_run(run, user=operator)
    check(run, {"customer": "acme"})
