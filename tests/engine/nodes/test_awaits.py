"""Awaits: a task's handler ends its attempt to wait for a signal named at run time."""

from __future__ import annotations

from datetime import timedelta
from typing import Any
from uuid import uuid4

import pytest
from django.utils import timezone

import workflows
from workflows import Await, FanOut, Loop, PermanentError, Retry, Task, Workflow
from workflows.context import Context
from workflows.engine import claim_step
from workflows.models import Event, Signal, Timer
from workflows.status import TimerKind, TimerStatus
from workflows.testing import run_pending
from workflows.workers.runner import run_attempt

pytestmark = pytest.mark.django_db

HERE = "tests.engine.nodes.test_awaits"
SEEN: list[Any] = []


def ask_mapping(ctx: Context) -> Any:
    """Await a mapping decision once; then use it (or a default after a timeout)."""
    SEEN.append(ctx.resumed)
    if ctx.resumed is None:
        return Await("mapping", timeout=timedelta(hours=1))
    if ctx.resumed.get("timed_out"):
        return {"mapping": "default"}
    return {"mapping": ctx.resumed["payload"]}


def ask_twice(ctx: Context) -> Any:
    """Await ``first``, then one of ``yes`` / ``no`` (no timeout), then finish."""
    SEEN.append(ctx.resumed)
    if ctx.resumed is None:
        return Await("first")
    if ctx.resumed["signal"] == "first":
        return Await(["yes", "no"])
    return {"answer": ctx.resumed["signal"]}


def flaky_after_resume(ctx: Context) -> Any:
    """Await, then fail once after the resume: the retry still sees the signal."""
    SEEN.append(ctx.resumed)
    if ctx.resumed is None:
        return Await("go")
    if len(SEEN) == 2:
        raise RuntimeError("flaky")
    return ctx.resumed["payload"]


def bad_await(ctx: Context) -> Any:
    return Await(ctx.input["signal"], timeout=ctx.input.get("timeout"))


def item_awaits(ctx: Context) -> Any:
    return Await("mapping")


class Import(Workflow):
    name = "await_import"
    load = Task(f"{HERE}.ask_mapping", awaits=["mapping"], retry=Retry(max_attempts=3))


class Twice(Workflow):
    name = "await_twice"
    ask = Task(f"{HERE}.ask_twice", awaits=["first", "yes", "no"])


class Flaky(Workflow):
    name = "await_flaky"
    step = Task(
        f"{HERE}.flaky_after_resume",
        awaits="go",
        retry=Retry(max_attempts=2, initial_interval=timedelta(seconds=0)),
    )


class FlakyOnce(Workflow):
    name = "await_flaky_once"
    step = Task(f"{HERE}.flaky_after_resume", awaits="go", retry=Retry(max_attempts=1))


class Bad(Workflow):
    name = "await_bad"
    step = Task(f"{HERE}.bad_await", awaits=["ok"])


class Items(Workflow):
    name = "await_items"
    each = FanOut(f"{HERE}.item_awaits", items=lambda ctx: [1])


class Looped(Workflow):
    name = "await_looped"
    ask = Task(f"{HERE}.ask_mapping", awaits=["mapping"])
    again = Loop(back_to="ask", while_=lambda ctx: ctx.iteration < 2, max_iterations=3)


@pytest.fixture(autouse=True)
def _clear_seen():
    SEEN.clear()


def types(run) -> list[str]:
    return list(
        Event.objects.filter(run=run, type__in=("step.awaiting", "step.resumed"))
        .order_by("id")
        .values_list("type", flat=True)
    )


def test_an_await_parks_the_step_without_using_up_an_attempt_and_a_signal_resumes_it():
    run = workflows.start_run(Import)
    run_pending()
    step = run.steps.get()
    assert step.status == "waiting"
    assert step.awaiting["signals"] == ["mapping"]
    assert step.awaiting["until"] is not None
    assert (step.attempt, step.max_attempts) == (1, 4)
    assert step.lease_owner == "" and step.lease_expires_at is None
    assert Timer.objects.get(step=step).kind == TimerKind.AWAIT_TIMEOUT
    run.refresh_from_db()
    assert run.status == "waiting"

    workflows.send_signal(run, "mapping", {"sku": "code"})
    step.refresh_from_db()
    assert step.status == "ready" and step.awaiting is None
    assert Timer.objects.get(step=step).status == TimerStatus.CANCELLED
    run_pending()
    run.refresh_from_db()
    assert run.status == "completed"
    assert run.output == {"load": {"mapping": {"sku": "code"}}}
    assert SEEN == [None, {"signal": "mapping", "payload": {"sku": "code"}}]
    assert types(run) == ["step.awaiting", "step.resumed"]
    resumed = run.events.get(type="step.resumed")
    assert resumed.payload["signal"] == "mapping"
    assert Signal.objects.get(run=run).consumed_by_id == step.pk


def test_a_signal_sent_before_the_await_is_kept_and_consumed_when_the_handler_awaits():
    run = workflows.start_run(Import)
    workflows.send_signal(run, "mapping", "early")
    assert Signal.objects.get(run=run).consumed_by is None
    run_pending()
    run.refresh_from_db()
    assert run.status == "completed"
    assert run.output == {"load": {"mapping": "early"}}
    assert not Timer.objects.filter(run=run, kind=TimerKind.AWAIT_TIMEOUT).exists()
    assert types(run) == ["step.awaiting", "step.resumed"]


def test_the_timeout_resumes_the_handler_with_timed_out():
    run = workflows.start_run(Import)
    run_pending(until=timezone.now() + timedelta(hours=2))
    run.refresh_from_db()
    assert run.status == "completed"
    assert run.output == {"load": {"mapping": "default"}}
    assert SEEN == [None, {"timed_out": True}]
    assert run.events.get(type="step.resumed").payload["timed_out"] is True


def test_a_handler_awaits_more_than_once_and_the_first_of_several_names_wins():
    run = workflows.start_run(Twice)
    run_pending()
    workflows.send_signal(run, "first", 1)
    run_pending()
    step = run.steps.get()
    assert step.awaiting["signals"] == ["yes", "no"] and step.awaiting["until"] is None
    assert not Timer.objects.filter(step=step, kind=TimerKind.AWAIT_TIMEOUT).exists()
    assert step.max_attempts == step.attempt + Retry().max_attempts - 1 + 1
    workflows.send_signal(run, "no", None)
    workflows.send_signal(run, "yes", None)  # kept: nothing awaits it any more
    run_pending()
    run.refresh_from_db()
    assert run.output == {"ask": {"answer": "no"}}
    assert types(run) == ["step.awaiting", "step.resumed", "step.awaiting", "step.resumed"]
    assert Signal.objects.get(run=run, name="yes").consumed_by is None


def test_a_retry_after_a_resume_sees_the_same_signal_and_keeps_its_retries():
    run = workflows.start_run(Flaky)
    run_pending()
    workflows.send_signal(run, "go", 7)
    run_pending(until=timezone.now() + timedelta(seconds=5))
    run.refresh_from_db()
    assert run.status == "completed" and run.output == {"step": 7}
    assert SEEN[1:] == [{"signal": "go", "payload": 7}] * 2
    step = run.steps.get()
    assert (step.attempt, step.max_attempts) == (3, 3)


@pytest.mark.parametrize(
    ("signal", "problem"),
    [
        ("", "non-empty string"),
        ([], "a signal name or a list"),
        (["ok", 3], "non-empty string"),
        ("x" * 201, "the limit is 200"),
        ("nope", "does not declare"),
    ],
)
def test_a_bad_await_fails_the_step_for_good_naming_the_problem(signal, problem):
    run = workflows.start_run(Bad, input={"signal": signal})
    run_pending()
    step = run.steps.get()
    assert step.status == "failed"
    assert problem in step.error["message"]
    assert step.attempt == 1


def test_a_timeout_that_is_not_a_positive_timedelta_is_refused():
    with pytest.raises(PermanentError, match="positive timedelta"):
        Await("ok", timeout=timedelta(0))
    with pytest.raises(PermanentError, match="positive timedelta"):
        Await("ok", timeout=5)  # type: ignore[arg-type]


def test_a_fan_out_item_cannot_await():
    run = workflows.start_run(Items)
    run_pending()
    run.refresh_from_db()
    assert run.status == "failed"
    error = run.steps.get().items.get().error
    assert "only a task step's handler can await" in error["message"]


def test_an_await_inside_a_loop_iteration_resumes_in_that_iteration():
    run = workflows.start_run(Looped)
    run_pending()
    workflows.send_signal(run, "mapping", "round 1")
    run_pending()
    step = run.steps.get(name="ask")
    assert step.status == "waiting" and step.iteration == 2
    assert step.resumed is None  # the next iteration starts afresh
    workflows.send_signal(run, "mapping", "round 2")
    run_pending()
    run.refresh_from_db()
    assert run.status == "completed"
    assert [s for s in SEEN if s] == [
        {"signal": "mapping", "payload": "round 1"},
        {"signal": "mapping", "payload": "round 2"},
    ]


def test_signal_names_a_task_declares_are_accepted_before_anything_awaits_them():
    run = workflows.start_run(Twice)
    with pytest.raises(workflows.UnknownSignal, match="'first', 'yes', 'no'"):
        workflows.send_signal(run, "maybe", None)


# -- with the operator's verbs ---------------------------------------------------------


def parked(workflow: type[Workflow] = Import, **options: Any) -> tuple[Any, Any]:
    """A run whose ``load`` step awaits ``mapping``: the run and the step."""
    run = workflows.start_run(workflow, **options)
    run_pending()
    step = run.steps.get(name="load")
    assert step.status == "waiting" and step.awaiting is not None
    return run, step


def timer_status(step) -> str:
    return Timer.objects.get(step=step, kind=TimerKind.AWAIT_TIMEOUT).status


def test_cancelling_the_run_cancels_the_awaiting_step_and_its_timer():
    run, step = parked()
    workflows.cancel_run(run, reason="wrong file")
    step.refresh_from_db()
    run.refresh_from_db()
    assert (run.status, step.status) == ("cancelled", "cancelled")
    assert timer_status(step) == TimerStatus.CANCELLED
    with pytest.raises(workflows.InvalidTransition, match="is cancelled"):
        workflows.send_signal(run, "mapping", 1)


def test_a_signal_while_paused_makes_the_step_ready_and_it_starts_at_the_resume():
    run, step = parked()
    workflows.pause_run(run, reason="audit")
    workflows.send_signal(run, "mapping", "while paused")
    step.refresh_from_db()
    assert step.status == "ready"
    run_pending()
    step.refresh_from_db()
    assert step.status == "ready" and step.attempt == 1  # nothing starts while paused
    workflows.resume_run(run)
    run_pending()
    run.refresh_from_db()
    assert run.status == "completed" and run.output == {"load": {"mapping": "while paused"}}


def test_the_timeout_of_a_paused_run_waits_for_the_resume():
    run, step = parked()
    workflows.pause_run(run)
    run_pending(until=timezone.now() + timedelta(hours=2))
    step.refresh_from_db()
    assert step.status == "waiting" and timer_status(step) == TimerStatus.SCHEDULED
    workflows.resume_run(run)
    run_pending(until=timezone.now() + timedelta(hours=2))
    run.refresh_from_db()
    assert run.output == {"load": {"mapping": "default"}}


def test_skipping_the_awaiting_step_ends_its_await():
    run, step = parked()
    workflows.skip_step(step, output={"mapping": "by hand"})
    step.refresh_from_db()
    run.refresh_from_db()
    assert (step.status, step.output, run.status) == (
        "completed",
        {"mapping": "by hand"},
        "completed",
    )
    assert timer_status(step) == TimerStatus.CANCELLED
    assert SEEN == [None]  # the handler does not run again


def test_rerun_from_the_step_forgets_the_await_and_the_handler_starts_afresh():
    run, step = parked()
    workflows.send_signal(run, "mapping", "first")
    run_pending()
    workflows.rerun_from(run, "load")
    run_pending()
    step.refresh_from_db()
    assert step.status == "waiting" and step.resumed is None
    assert SEEN == [None, {"signal": "mapping", "payload": "first"}, None]


def test_a_revoke_of_an_awaiting_step_is_refused_nothing_runs():
    _run, step = parked()
    revoked = workflows.revoke_lease(step, expected_attempt=step.attempt)
    assert (revoked.revoked, revoked.reason) == (False, "not_leased")
    step.refresh_from_db()
    assert step.status == "waiting"


def test_the_run_deadline_fails_an_awaiting_run_and_cancels_its_timer():
    run, step = parked(deadline=timedelta(minutes=30))
    run_pending(until=timezone.now() + timedelta(minutes=31))
    run.refresh_from_db()
    step.refresh_from_db()
    assert run.status == "failed" and run.error["code"] == "deadline_exceeded"
    assert step.status == "cancelled"
    assert timer_status(step) == TimerStatus.CANCELLED


def test_retrying_a_step_that_failed_after_its_resume_runs_it_with_the_same_signal():
    run = workflows.start_run(FlakyOnce)
    run_pending()
    workflows.send_signal(run, "go", "once")
    run_pending()
    run.refresh_from_db()
    assert run.status == "failed"
    workflows.retry_step(run.steps.get())
    run_pending()
    run.refresh_from_db()
    assert run.status == "completed" and run.output == {"step": "once"}
    assert SEEN == [None, {"signal": "go", "payload": "once"}, {"signal": "go", "payload": "once"}]


def test_a_signal_token_for_an_awaited_name_resumes_the_handler():
    run, step = parked()
    token = workflows.signal_token(run, "mapping")
    workflows.send_signal_with_token(token, {"from": "partner"})
    step.refresh_from_db()
    assert step.resumed == {"signal": "mapping", "payload": {"from": "partner"}}
    assert run.events.get(type="signal.received").payload["via"] == "token"


def test_an_await_returned_after_the_run_was_cancelled_stops_the_attempt():
    run = workflows.start_run(Import)
    step = run.steps.get()
    lease = claim_step(step.pk, "worker-1")
    workflows.cancel_run(run)  # the handler is running: the run is cancelling
    run_attempt(lease, chain=False)  # ... and its handler returns Await
    run.refresh_from_db()
    step.refresh_from_db()
    assert (run.status, step.status, step.failure_class) == ("cancelled", "failed", "cancelled")
    assert step.awaiting is None
    assert not Timer.objects.filter(run=run, kind=TimerKind.AWAIT_TIMEOUT).exists()
    assert not run.events.filter(type="step.awaiting").exists()


def test_ctx_resumed_is_read_once_on_first_access_and_never_without_one():
    reads: list[int] = []

    def read() -> dict[str, Any]:
        reads.append(1)
        return {"timed_out": True}

    def context() -> Context:
        return Context(run_id=uuid4(), input={}, step_names=("a",), read_resumed=read)

    context()  # a handler that never looks
    assert reads == []
    looked = context()
    assert looked.resumed == {"timed_out": True} and looked.resumed == {"timed_out": True}
    assert reads == [1]
    assert Context(run_id=uuid4(), input={}, step_names=("a",)).resumed is None
