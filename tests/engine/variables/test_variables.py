"""Run variables (issue #41, point 1): ``start_run(variables=...)``, ``ctx.variables`` and
``ctx.set_variables(patch)``, fenced by the attempt and committed with its result, every
write in the history with its step; each refusal names its rule and writes nothing."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.utils import timezone

import workflows
from tests.support.runs import claimed, run_inline
from workflows import FanOut, Loop, Retry, Task, Workflow
from workflows.conf import workflow_settings
from workflows.context import Context
from workflows.engine import complete_work
from workflows.errors import InvalidInput, LeaseLost
from workflows.models import Event, Run, Step
from workflows.testing import run_pending
from workflows.variables import patched
from workflows.workers.runner import run_attempt

pytestmark = pytest.mark.django_db

HERE = __name__
# What each handler call saw: (step, attempt or item, ctx.variables as a dict).
SEEN: list[tuple[str, Any, dict[str, Any]]] = []


@pytest.fixture(autouse=True)
def _reset() -> None:
    SEEN.clear()


def _saw(ctx: Any, which: Any = None) -> None:
    SEEN.append((ctx.step_name, ctx.attempt if which is None else which, ctx.variables.as_dict()))


def counts(ctx: Any) -> int:
    """Reads the counter, adds one, and reads its own write back."""
    _saw(ctx)
    count = ctx.variables.get("count", 0) + 1
    ctx.set_variables({"count": count, "by": ctx.step_name})
    assert ctx.variables["count"] == count
    return count


def reads(ctx: Any) -> dict[str, Any]:
    _saw(ctx)
    return ctx.variables.as_dict()


def fails_after_writing(ctx: Any) -> str:
    """Writes, then fails its first attempt; the second writes and completes."""
    _saw(ctx)
    ctx.set_variables({"attempt": ctx.attempt, f"wrote_{ctx.attempt}": True})
    if ctx.attempt == 1:
        raise RuntimeError("first attempt fails after its write")
    return "done"


def writes_too_much(ctx: Any) -> None:
    ctx.set_variables({"blob": "x" * 2000})


def patches_with_a_list(ctx: Any) -> None:
    ctx.set_variables(["not", "an", "object"])  # type: ignore[arg-type]


def patches_with_a_set(ctx: Any) -> None:
    ctx.set_variables({"tags": {"a", "b"}})


def revokes_itself(ctx: Any) -> str:
    """Writes, then loses its lease to a revoke before its result is recorded."""
    _saw(ctx)
    ctx.set_variables({"stale": ctx.attempt})
    if ctx.attempt == 1:
        step = Step.objects.get(run_id=ctx.run_id, name=ctx.step_name)
        workflows.revoke_lease(step, expected_attempt=1, reason="wedged")
    return "done"


def item_writes(ctx: Any) -> str:
    _saw(ctx, ctx.item)
    ctx.set_variables({"items": {str(ctx.item): ctx.item * 10}})
    return "ok"


def undo(ctx: Any) -> None:
    _saw(ctx)
    ctx.set_variables({"undone": True})


def boom(ctx: Any) -> None:
    raise workflows.PermanentError("the last step fails")


def round_counts(ctx: Any) -> int:
    _saw(ctx, ctx.iteration)
    rounds = [*ctx.variables.get("rounds", []), ctx.iteration]
    ctx.set_variables({"rounds": rounds})
    return len(rounds)


def another_round(ctx: Any) -> bool:
    return len(ctx.variables["rounds"]) < 3


class Counter(Workflow):
    name = "variables_counter"
    first = Task(f"{HERE}.counts")
    second = Task(f"{HERE}.counts")
    report = Task(f"{HERE}.reads")


class RetriedWrite(Workflow):
    name = "variables_retried_write"
    write = Task(f"{HERE}.fails_after_writing", retry=Retry(max_attempts=2))
    report = Task(f"{HERE}.reads")


class TooMuch(Workflow):
    name = "variables_too_much"
    write = Task(f"{HERE}.writes_too_much", retry=Retry(max_attempts=3))


class ListPatch(Workflow):
    name = "variables_list_patch"
    write = Task(f"{HERE}.patches_with_a_list", retry=Retry(max_attempts=3))


class SetPatch(Workflow):
    name = "variables_set_patch"
    write = Task(f"{HERE}.patches_with_a_set", retry=Retry(max_attempts=3))


class Revoked(Workflow):
    name = "variables_revoked"
    write = Task(f"{HERE}.revokes_itself")


class Items(Workflow):
    name = "variables_items"
    each = FanOut(f"{HERE}.item_writes", items=lambda ctx: [1, 2, 3])
    report = Task(f"{HERE}.reads")


class BatchedItems(Workflow):
    """Its items recorded together, in one transaction (``batch_size``)."""

    name = "variables_batched_items"
    each = FanOut(f"{HERE}.item_writes", items=lambda ctx: [1, 2, 3], batch_size=3)
    report = Task(f"{HERE}.reads")


def item_writes_then_two_fails(ctx: Any) -> str:
    ctx.set_variables({"items": {str(ctx.item): ctx.item * 10}})
    if ctx.item == 2:
        raise workflows.PermanentError("item 2 fails for good after writing")
    return "ok"


class BatchedOneFails(Workflow):
    """A batch of three items whose second fails after writing (one failure tolerated)."""

    name = "variables_batched_one_fails"
    each = FanOut(
        f"{HERE}.item_writes_then_two_fails",
        items=lambda ctx: [1, 2, 3],
        batch_size=3,
        tolerated_failures=1,
    )


class Undone(Workflow):
    name = "variables_undone"
    book = Task(f"{HERE}.counts", compensate=f"{HERE}.undo")
    fail = Task(f"{HERE}.boom")


class Rounds(Workflow):
    name = "variables_rounds"
    work = Task(f"{HERE}.round_counts")
    again = Loop(back_to="work", while_=another_round, max_iterations=5)
    report = Task(f"{HERE}.reads")


def _later() -> datetime:
    return timezone.now() + timedelta(hours=1)


def writes(run: Run) -> list[dict[str, Any]]:
    return [
        event.payload
        for event in Event.objects.filter(run=run, type="run.variables_set").order_by("id")
    ]


def replayed(run: Run) -> dict[str, Any]:
    """The run's variables as its history makes them: every write's patches, in order."""
    variables: dict[str, Any] = {}
    for write in writes(run):
        variables = patched(variables, write["patches"])
    return variables


# -- start ------------------------------------------------------------------------------


def test_start_sets_the_first_variables_and_later_steps_see_each_commit():
    run = run_inline(Counter, variables={"region": "eu", "count": 10})
    assert run.status == "completed"
    assert run.variables == {"region": "eu", "count": 12, "by": "second"}
    assert [(step, seen) for step, _, seen in SEEN] == [
        ("first", {"region": "eu", "count": 10}),
        ("second", {"region": "eu", "count": 11, "by": "first"}),
        ("report", {"region": "eu", "count": 12, "by": "second"}),
    ]
    assert run.steps.get(name="report").output == run.variables


def test_each_write_is_in_the_history_with_its_step_and_attempt():
    run = run_inline(Counter, variables={"count": 0})
    history = writes(run)
    assert [(write["step"], write.get("attempt")) for write in history] == [
        (None, None),
        ("first", 1),
        ("second", 1),
    ]
    assert history[1]["patches"] == [{"count": 1, "by": "first"}]
    assert history[1]["kind"] == "step"
    step_ids = list(
        Event.objects.filter(run=run, type="run.variables_set")
        .order_by("id")
        .values_list("step__name", flat=True)
    )
    assert step_ids == [None, "first", "second"]
    assert replayed(run) == run.variables


def test_a_run_started_without_variables_has_none_and_no_write_event():
    run = run_inline(Counter)
    assert Run.objects.get(pk=run.pk).variables == {"count": 2, "by": "second"}
    assert writes(run)[0]["step"] == "first"


def test_start_applies_the_variables_as_a_patch_to_nothing_so_a_null_is_not_stored():
    run = workflows.start_run(Counter, variables={"kept": 1, "gone": None, "nested": {"x": None}})
    assert Run.objects.get(pk=run.pk).variables == {"kept": 1, "nested": {}}


@pytest.mark.parametrize(
    ("variables", "problem"),
    [
        (["a", "list"], "must be a JSON object"),
        ("text", "must be a JSON object"),
        ({"at": {1, 2}}, "not JSON-serialisable"),
        ({"ratio": float("nan")}, "not storable JSON"),
        ({"bad\x00key": 1}, "NUL"),
        ({"text": "nul \x00 inside"}, "NUL"),
        ({"blob": "x" * 2000}, 'WORKFLOWS["MAX_VARIABLES_BYTES"] = 1024'),
    ],
)
def test_a_start_with_bad_variables_is_refused_naming_the_rule_and_writes_nothing(
    settings: Any, variables: Any, problem: str
):
    settings.WORKFLOWS = {**settings.WORKFLOWS, "MAX_VARIABLES_BYTES": 1024}
    with pytest.raises(InvalidInput, match="variables") as refused:
        workflows.start_run(Counter, variables=variables)
    assert problem in refused.value.message
    assert refused.value.details == {"field": "variables"}
    assert not Run.objects.exists()
    assert not Event.objects.exists()


def test_start_run_once_takes_variables_and_a_repeat_returns_the_first_run_with_its_own():
    first = workflows.start_run_once(Counter, {}, idempotency_key="k", variables={"a": 1})
    again = workflows.start_run_once(Counter, {}, idempotency_key="k", variables={"a": 2})
    assert (first.created, again.created) == (True, False)
    assert again.value.pk == first.value.pk
    assert Run.objects.get(pk=first.value.pk).variables == {"a": 1}


# -- RFC 7386 ---------------------------------------------------------------------------


def merges(ctx: Any) -> None:
    ctx.set_variables({"gone": None, "nested": {"b": 2, "drop": None}, "list": [3]})
    ctx.set_variables({"nested": {"c": {"deep": True}}})


class Merges(Workflow):
    name = "variables_merges"
    patch = Task(f"{HERE}.merges")


def test_a_patch_removes_on_null_merges_objects_and_replaces_lists():
    run = run_inline(
        Merges,
        variables={"gone": 1, "nested": {"a": 1, "drop": 0}, "list": [1, 2], "kept": "k"},
    )
    assert run.variables == {
        "nested": {"a": 1, "b": 2, "c": {"deep": True}},
        "list": [3],
        "kept": "k",
    }
    assert writes(run)[-1]["patches"] == [
        {"gone": None, "nested": {"b": 2, "drop": None}, "list": [3]},
        {"nested": {"c": {"deep": True}}},
    ]
    assert replayed(run) == run.variables


# -- fencing ----------------------------------------------------------------------------


def test_a_failed_attempts_patch_does_not_land_and_its_retry_sees_the_committed_values():
    run = run_inline(RetriedWrite, variables={"start": True}, until=_later())
    assert run.status == "completed"
    assert SEEN[0] == ("write", 1, {"start": True})
    assert SEEN[1] == ("write", 2, {"start": True})  # not attempt 1's write
    assert run.variables == {"start": True, "attempt": 2, "wrote_2": True}
    assert [(write["step"], write.get("attempt")) for write in writes(run)] == [
        (None, None),
        ("write", 2),
    ]


def test_a_stale_attempts_patch_does_not_land():
    run = run_inline(Revoked)
    assert run.status == "completed"
    assert [attempt for _, attempt, _ in SEEN] == [1, 2]
    assert run.variables == {"stale": 2}
    assert [write["attempt"] for write in writes(run)] == [2]


def test_a_patch_fenced_out_with_its_completion_writes_nothing():
    run = workflows.start_run(Counter)
    lease = claimed(run, "first", "worker-a")
    lease.variable_patches.append({"late": True})
    workflows.revoke_lease(Step.objects.get(run=run, name="first"), expected_attempt=1)
    with pytest.raises(LeaseLost):
        complete_work(lease, "late result")
    assert Run.objects.get(pk=run.pk).variables == {}
    assert writes(run) == []


def test_terminate_fences_out_a_running_attempts_patch():
    run = workflows.start_run(Counter, variables={"count": 0})
    lease = claimed(run, "first", "worker-a")
    lease.variable_patches.append({"count": 99})
    workflows.terminate_run(run, reason="stop now")
    with pytest.raises(LeaseLost):
        complete_work(lease, "late")
    assert Run.objects.get(pk=run.pk).variables == {"count": 0}


def test_a_cancelled_runs_attempt_that_finishes_commits_its_patch_with_its_result():
    """Cancel lets running attempts finish (then compensates): the result is recorded,
    and so are the variables written with it."""
    run = workflows.start_run(Counter, variables={"count": 0})
    lease = claimed(run, "first", "worker-a")
    lease.variable_patches.append({"count": 1})
    workflows.cancel_run(run, reason="changed mind", compensate=False)
    complete_work(lease, 1)
    run.refresh_from_db()
    assert run.status == "cancelled"
    assert run.variables == {"count": 1}
    assert replayed(run) == run.variables


def test_pause_keeps_the_committed_values_for_the_steps_after_resume():
    run = workflows.start_run(Counter, variables={"count": 5})
    workflows.pause_run(run, reason="look first")
    run_pending()
    workflows.resume_run(run)
    run_pending()
    run.refresh_from_db()
    assert (run.status, run.variables["count"]) == ("completed", 7)


def test_a_patch_past_the_limit_fails_the_attempt_for_good_naming_the_rule(settings: Any):
    settings.WORKFLOWS = {**settings.WORKFLOWS, "MAX_VARIABLES_BYTES": 1024}
    run = run_inline(TooMuch, variables={"small": 1})
    assert run.status == "failed"
    step = run.steps.get(name="write")
    assert step.attempt == 1  # permanent: not retried
    assert 'WORKFLOWS["MAX_VARIABLES_BYTES"] = 1024' in step.error["message"]
    assert run.variables == {"small": 1}
    assert [write["step"] for write in writes(run)] == [None]


def test_a_patch_that_grows_past_the_limit_only_at_the_commit_fails_and_writes_nothing(
    settings: Any,
):
    """A parallel branch committed meanwhile: the handler's own check passed, the
    commit's sees the committed values and refuses; the result is not written either."""
    settings.WORKFLOWS = {**settings.WORKFLOWS, "MAX_VARIABLES_BYTES": 1024}
    run = workflows.start_run(Counter)
    lease = claimed(run, "first", "worker-a")
    lease.variable_patches.append({"mine": "y" * 600})
    Run.objects.filter(pk=run.pk).update(variables={"theirs": "z" * 600})
    lease.handler_path = f"{HERE}.reads"
    run_attempt(lease, chain=False)
    step = Step.objects.get(run=run, name="first")
    assert step.status == "failed"
    assert step.output is None
    assert "MAX_VARIABLES_BYTES" in step.error["message"]
    assert Run.objects.get(pk=run.pk).variables == {"theirs": "z" * 600}


@pytest.mark.parametrize(
    ("workflow", "problem"),
    [(ListPatch, "must be a JSON object"), (SetPatch, "not JSON-serialisable")],
)
def test_a_patch_that_is_not_a_storable_object_fails_the_attempt_for_good(
    workflow: type[Workflow], problem: str
):
    run = run_inline(workflow)
    assert run.status == "failed"
    step = run.steps.get(name="write")
    assert step.attempt == 1
    assert problem in step.error["message"]
    assert "ctx.set_variables" in step.error["message"]
    assert run.variables == {}
    assert writes(run) == []


# -- structures -------------------------------------------------------------------------


@pytest.mark.parametrize("workflow", [Items, BatchedItems])
def test_fan_out_items_read_and_write_fenced_each_write_naming_its_item(
    workflow: type[Workflow],
):
    run = run_inline(workflow, variables={"items": {}})
    assert run.status == "completed"
    assert run.variables == {"items": {"1": 10, "2": 20, "3": 30}}
    item_writes = [write for write in writes(run) if write["step"] == "each"]
    assert sorted(write["item"] for write in item_writes) == ["0", "1", "2"]
    assert {write["kind"] for write in item_writes} == {"item"}
    assert replayed(run) == run.variables


def test_each_item_of_a_batch_commits_only_its_own_patches():
    """The items of a batch are leased from one template, yet each keeps its own
    patches: the failed item's write lands neither alone nor with another's commit."""
    run = run_inline(BatchedOneFails, variables={"items": {}})
    assert run.status == "completed"
    assert run.variables == {"items": {"1": 10, "3": 30}}
    item_patches = [write["patches"] for write in writes(run) if write["step"] == "each"]
    assert sorted(item_patches, key=str) == [
        [{"items": {"1": 10}}],
        [{"items": {"3": 30}}],
    ]
    assert replayed(run) == run.variables


def test_a_compensation_reads_and_writes_the_variables():
    run = run_inline(Undone, variables={"count": 0})
    assert run.status == "compensated"
    assert SEEN[-1] == ("book", 1, {"count": 1, "by": "book"})
    assert run.variables == {"count": 1, "by": "book", "undone": True}
    assert writes(run)[-1]["kind"] == "compensation"


def test_loop_rounds_see_the_values_the_rounds_before_committed():
    run = run_inline(Rounds)
    assert run.status == "completed"
    assert [(round_, seen.get("rounds", [])) for _, round_, seen in SEEN[:3]] == [
        (1, []),
        (2, [1]),
        (3, [1, 2]),
    ]
    assert run.variables == {"rounds": [1, 2, 3]}


def test_rerun_from_sees_the_committed_values_which_it_does_not_roll_back():
    run = run_inline(Counter, variables={"count": 0})
    SEEN.clear()
    workflows.rerun_from(run, "second")
    run_pending()
    run.refresh_from_db()
    assert run.status == "completed"
    assert SEEN[0] == ("second", SEEN[0][1], {"count": 2, "by": "second"})
    assert run.variables == {"count": 3, "by": "second"}
    assert replayed(run) == run.variables


def test_a_when_condition_reads_the_variables():
    run = run_inline(Guarded, variables={"skip": True})
    assert run.steps.get(name="maybe").status == "skipped"
    run = run_inline(Guarded, variables={"skip": False})
    assert run.steps.get(name="maybe").status == "completed"


class Guarded(Workflow):
    name = "variables_guarded"
    maybe = Task(f"{HERE}.reads", when=lambda ctx: not ctx.variables["skip"])


def awaits_after_writing(ctx: Any) -> Any:
    """Writes, parks behind an await; when resumed, reads its own earlier write."""
    _saw(ctx)
    if ctx.resumed is None:
        ctx.set_variables({"asked": True})
        return workflows.Await("answer")
    return ctx.variables["asked"]


class Asks(Workflow):
    name = "variables_asks"
    ask = Task(f"{HERE}.awaits_after_writing", awaits=["answer"])


def test_an_attempt_that_parks_behind_an_await_commits_its_patches_with_the_parking():
    run = run_inline(Asks)
    assert run.status == "waiting"
    assert run.variables == {"asked": True}
    workflows.send_signal(run, "answer", {})
    run_pending()
    run.refresh_from_db()
    assert run.status == "completed"
    assert run.steps.get().output is True
    assert SEEN[-1][2] == {"asked": True}


def writes_branch(ctx: Any) -> str:
    """Each branch writes the same key (``last``) and one of its own."""
    ctx.set_variables({"last": ctx.step_name, "seen": {ctx.step_name: ctx.attempt}})
    return ctx.step_name


class Branches(Workflow):
    """Two parallel branches writing one key (the two-process race of
    tests/acceptance/test_variables_two_processes.py runs them on two workers)."""

    name = "variables_branches"
    left = Task(f"{HERE}.writes_branch", after=[])
    right = Task(f"{HERE}.writes_branch", after=[])


def test_of_two_parallel_branches_writing_one_key_the_later_commit_wins():
    run = workflows.start_run(Branches)
    right = claimed(run, "right", "worker-r")
    left = claimed(run, "left", "worker-l")
    for lease in (right, left):
        lease.variable_patches.append({"last": lease.step_name, "seen": {lease.step_name: 1}})
    complete_work(left, "left")
    complete_work(right, "right")
    run.refresh_from_db()
    assert run.status == "completed"
    assert run.variables == {"last": "right", "seen": {"left": 1, "right": 1}}
    assert [write["step"] for write in writes(run)] == ["left", "right"]


def writes_in_transaction(ctx: Any) -> str:
    ctx.set_variables({"booked": ctx.attempt})
    if ctx.attempt == 1:
        raise RuntimeError("rolled back with everything the attempt wrote")
    return "booked"


class Transactional(Workflow):
    name = "variables_transactional"
    book = Task(f"{HERE}.writes_in_transaction", transactional=True, retry=Retry(max_attempts=2))


def test_a_transactional_handlers_patch_commits_with_its_completion_or_not_at_all():
    run = run_inline(Transactional, until=_later())
    assert run.status == "completed"
    assert run.variables == {"booked": 2}
    assert [write["attempt"] for write in writes(run)] == [2]


def test_set_variables_outside_a_running_handler_is_refused():
    run = workflows.start_run(Counter, variables={"a": 1})
    ctx = Context(run_id=run.pk, input={}, step_names=())
    assert dict(ctx.variables) == {"a": 1}
    with pytest.raises(workflows.WorkflowError, match="only available inside a running"):
        ctx.set_variables({"a": 2})


@pytest.mark.parametrize("value", [0, -1, True, 1.5, "64k"])
def test_the_size_limit_setting_refuses_anything_but_a_whole_number_of_one_or_more(
    settings: Any, value: Any
):
    settings.WORKFLOWS = {**settings.WORKFLOWS, "MAX_VARIABLES_BYTES": value}
    with pytest.raises(ImproperlyConfigured, match="MAX_VARIABLES_BYTES"):
        _ = workflow_settings.MAX_VARIABLES_BYTES
