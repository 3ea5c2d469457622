"""Live telemetry of a task step's attempt: progress, log frames and summary, written by
fenced flushes (a lost lease writes nothing), numbered on across attempts, trimmed per
attempt, coalesced so that a tight loop costs one write per interval."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

import workflows
from tests.support.handlers import CALLS
from workflows import FanOut, LeaseLost, PermanentError, Retry, Task, Workflow, WorkflowError
from workflows.context import Context
from workflows.engine import claim_step, reclaim
from workflows.engine.work_kinds import STEP
from workflows.models import Event, Frame, Step
from workflows.testing import run_pending
from workflows.workers import telemetry as telemetry_buffer
from workflows.workers.telemetry import AttemptTelemetry

pytestmark = pytest.mark.django_db

HERE = __name__


def reports(ctx: Any) -> str:
    ctx.progress(1, 4, "starting")
    ctx.log("first line")
    ctx.log("oops", stream="stderr")
    ctx.summary({"rows": 10, "meta": {"source": "a", "tmp": 1}})
    ctx.summary({"meta": {"tmp": None}})
    ctx.progress(4, 4, "done")
    return "ok"


def logs_then_fails(ctx: Any) -> None:
    for line in range(3):
        ctx.log(f"attempt {ctx.attempt} line {line}")
    if ctx.attempt == 1:
        raise RuntimeError("first attempt fails after logging")


def spins(ctx: Any) -> None:
    for done in range(10_000):
        ctx.progress(done, 10_000)


def tries_telemetry(ctx: Any) -> None:
    for verb, args in (("progress", (1,)), ("log", ("x",)), ("summary", ({},))):
        try:
            getattr(ctx, verb)(*args)
        except WorkflowError as refused:
            CALLS.append(refused.message)


def logs_in_transaction(ctx: Any) -> None:
    ctx.log("inside the attempt's transaction")
    ctx.progress(1, 1)
    if ctx.input.get("fail"):
        raise PermanentError("rolled back, telemetry included")


class Transactional(Workflow):
    name = "telemetry_transactional"
    work = Task(f"{HERE}.logs_in_transaction", transactional=True, retry=Retry(max_attempts=1))


class Reporting(Workflow):
    name = "telemetry_reporting"
    work = Task(f"{HERE}.reports")


class Retried(Workflow):
    name = "telemetry_retried"
    work = Task(
        f"{HERE}.logs_then_fails", retry=Retry(max_attempts=2, initial_interval=timedelta(0))
    )


class Spinning(Workflow):
    name = "telemetry_spinning"
    work = Task(f"{HERE}.spins")


class Held(Workflow):
    name = "telemetry_held"
    work = Task(f"{HERE}.reports", timeout=timedelta(seconds=30))


class Items(Workflow):
    name = "telemetry_items"
    each = FanOut(f"{HERE}.tries_telemetry", items=lambda ctx: ["a"], key=lambda item: item)


class Undoing(Workflow):
    name = "telemetry_undoing"
    first = Task(f"{HERE}.reports", compensate=f"{HERE}.tries_telemetry")
    then = Task("tests.support.handlers.boom", retry=Retry(max_attempts=1))


def step_of(run: Any, name: str = "work") -> Step:
    return Step.objects.get(run=run, name=name)


def texts(step: Step) -> list[tuple[int, int, str, str]]:
    return list(
        Frame.objects.filter(step=step)
        .order_by("seq")
        .values_list("seq", "attempt", "stream", "text")
    )


def test_a_step_reports_progress_log_and_summary_written_at_its_end():
    run = workflows.start_run(Reporting)
    run_pending()
    step = step_of(run)
    assert step.status == "completed"
    assert (step.progress_done, step.progress_total, step.progress_message) == (4, 4, "done")
    assert step.progress_at is not None
    assert step.summary == {"rows": 10, "meta": {"source": "a"}}
    assert step.summary_version == 2
    assert texts(step) == [(1, 1, "stdout", "first line"), (2, 1, "stderr", "oops")]
    assert (step.frames_written, step.frames_dropped) == (2, 0)
    assert [f.as_dict()["text"] for f in workflows.frames(step, after=1)] == ["oops"]
    assert [f.seq for f in workflows.frames(step.pk, stream="stdout")] == [1]


def test_frames_of_a_failed_attempt_stay_and_the_next_attempt_numbers_on():
    run = workflows.start_run(Retried)
    run_pending(until=timezone.now() + timedelta(minutes=1))
    step = step_of(run)
    assert step.status == "completed" and step.attempt == 2
    assert texts(step) == [
        (1, 1, "stdout", "attempt 1 line 0"),
        (2, 1, "stdout", "attempt 1 line 1"),
        (3, 1, "stdout", "attempt 1 line 2"),
        (4, 2, "stdout", "attempt 2 line 0"),
        (5, 2, "stdout", "attempt 2 line 1"),
        (6, 2, "stdout", "attempt 2 line 2"),
    ]
    assert step.frames_written == 6


def held(workflow: type[Workflow] = Held, owner: str = "worker-a") -> tuple[Any, Any]:
    run = workflows.start_run(workflow)
    return run, claim_step(step_of(run).pk, owner)


def test_a_flush_moves_the_lease_version_on_as_a_heartbeat_does():
    run, lease = held()
    telemetry = AttemptTelemetry(lease)
    telemetry.progress(1, 2, "half")
    telemetry.log("hello")
    telemetry.flush()
    step = step_of(run)
    assert step.version == lease.version
    assert (step.progress_done, step.frames_written) == (1, 1)
    telemetry.heartbeat()  # the fence still holds after the flush
    telemetry.summary({"k": 1})
    telemetry.close()
    assert step_of(run).summary == {"k": 1}


def assert_nothing_written(step: Step) -> None:
    step.refresh_from_db()
    assert (step.progress_done, step.summary, step.summary_version) == (None, {}, 0)
    assert (step.frames_written, step.frames_dropped) == (0, 0)
    assert not Frame.objects.filter(step=step).exists()


@pytest.mark.parametrize("flush", ["flush", "heartbeat", "close"])
def test_a_revoked_attempt_writes_nothing(flush):
    run, lease = held()
    telemetry = AttemptTelemetry(lease)
    telemetry.progress(1, 2)
    telemetry.log("from a revoked attempt")
    telemetry.summary({"k": 1})
    workflows.revoke_lease(step_of(run), expected_attempt=lease.attempt)
    if flush == "close":
        telemetry.close()  # quiet: the outcome's own fenced write reports the loss
    else:
        with pytest.raises(LeaseLost):
            getattr(telemetry, flush)()
    assert_nothing_written(step_of(run))


def test_a_stopped_then_resumed_worker_cannot_write_into_the_new_attempt():
    run, old = held()
    stale = AttemptTelemetry(old)
    stale.log("before the pause")
    Step.objects.filter(pk=old.step_id).update(lease_expires_at="2000-01-01T00:00:00Z")
    assert reclaim(STEP, old.step_id, wait=False) == "ready"
    new = claim_step(old.step_id, "worker-b")
    fresh = AttemptTelemetry(new)
    fresh.log("new attempt")
    fresh.flush()
    with pytest.raises(LeaseLost):
        stale.flush()
    with pytest.raises(LeaseLost):  # and every later call, without a write
        stale.progress(1)
    step = step_of(run)
    assert texts(step) == [(1, 2, "stdout", "new attempt")]
    assert step.progress_done is None


def test_trimming_keeps_the_newest_frames_of_the_attempt(settings):
    settings.WORKFLOWS = {**settings.WORKFLOWS, "FRAMES_PER_ATTEMPT": 3}
    run, lease = held()
    telemetry = AttemptTelemetry(lease)
    for line in range(5):
        telemetry.log(f"line {line}")
    telemetry.flush()  # two of the batch itself never inserted
    telemetry.log("line 5")
    telemetry.flush()  # the oldest kept frame deleted
    step = step_of(run)
    assert [row[0] for row in texts(step)] == [4, 5, 6]
    assert (step.frames_written, step.frames_dropped) == (6, 3)


def test_trimming_by_bytes_drops_oldest_first_and_counts_them(settings):
    settings.WORKFLOWS = {**settings.WORKFLOWS, "FRAME_BYTES_PER_ATTEMPT": 10}
    run, lease = held()
    telemetry = AttemptTelemetry(lease)
    telemetry.log("aaaa")
    telemetry.log("ééé")  # six bytes in UTF-8
    telemetry.flush()
    telemetry.log("bb")
    telemetry.flush()  # 4 + 6 + 2 > 10: "aaaa" goes
    step = step_of(run)
    assert [row[3] for row in texts(step)] == ["ééé", "bb"]
    assert (step.frames_written, step.frames_dropped) == (3, 1)
    telemetry.log("x" * 11)  # larger than the whole bound: all older frames go, and it too
    telemetry.flush()
    step.refresh_from_db()
    assert texts(step) == []
    assert (step.frames_written, step.frames_dropped) == (4, 4)


def test_the_bound_is_per_attempt(settings):
    settings.WORKFLOWS = {**settings.WORKFLOWS, "FRAMES_PER_ATTEMPT": 3}
    run = workflows.start_run(Retried)
    run_pending(until=timezone.now() + timedelta(minutes=1))
    step = step_of(run)
    assert [row[:2] for row in texts(step)] == [(1, 1), (2, 1), (3, 1), (4, 2), (5, 2), (6, 2)]
    assert step.frames_dropped == 0


def updates_of_steps(captured: CaptureQueriesContext) -> list[str]:
    return [q["sql"] for q in captured.captured_queries if "progress_done" in q["sql"]]


def test_ten_thousand_progress_calls_coalesce_into_one_write(settings):
    settings.WORKFLOWS = {**settings.WORKFLOWS, "PROGRESS_INTERVAL": timedelta(hours=1)}
    run = workflows.start_run(Spinning)
    with CaptureQueriesContext(connection) as captured:
        run_pending()
    assert len(updates_of_steps(captured)) == 1  # at the attempt's end
    assert step_of(run).progress_done == 9_999


def test_with_the_default_interval_progress_writes_stay_few():
    run = workflows.start_run(Spinning)
    with CaptureQueriesContext(connection) as captured:
        run_pending()
    # At most one write per PROGRESS_INTERVAL (0.25 s) and the last one: far from 10,000.
    assert 1 <= len(updates_of_steps(captured)) < 100
    assert step_of(run).progress_done == 9_999


def test_fan_out_items_and_compensations_report_too():
    """Once refused (issue #35, point 6): now written on the item's or compensation's
    row (tests/engine/telemetry/test_unit_telemetry.py)."""
    workflows.start_run(Items)
    run_pending()
    workflows.start_run(Undoing)
    run_pending()
    assert CALLS == []


def test_outside_a_handler_the_context_refuses_like_heartbeat():
    ctx = Context(run_id=None, input={}, step_names=())  # type: ignore[arg-type]
    for call in (lambda: ctx.progress(1), lambda: ctx.log("x"), lambda: ctx.summary({})):
        with pytest.raises(WorkflowError, match="only available inside a running task"):
            call()


@pytest.mark.parametrize(
    ("verb", "args", "named"),
    [
        ("progress", ("1",), "done"),
        ("progress", (True,), "done"),
        ("progress", (float("nan"),), "done"),
        ("progress", (-1,), "done"),
        ("progress", (1, float("inf")), "total"),
        ("progress", (1, 2, 3), "message"),
        ("log", (b"bytes",), "text"),
        ("log", ("x", "stdin"), "stream"),
        ("summary", ([1],), "dict"),
        ("summary", ({"k": {1, 2}},), "summary patch"),
        ("summary", ({"k": float("nan")},), "summary patch"),
    ],
)
def test_bad_arguments_raise_value_error_naming_them(verb, args, named):
    run, lease = held()
    telemetry = AttemptTelemetry(lease)
    with pytest.raises(ValueError, match=named):
        getattr(telemetry, verb)(*args)
    telemetry.close()
    assert_nothing_written(step_of(run))


def test_unstorable_text_is_replaced_not_refused():
    run, lease = held()
    telemetry = AttemptTelemetry(lease)
    telemetry.log("nul\x00here")
    telemetry.log("lone \ud800 surrogate")
    telemetry.progress(1, message="m\x00")
    telemetry.close()
    step = step_of(run)
    assert [row[3] for row in texts(step)] == ["nul\ufffdhere", "lone \ufffd surrogate"]
    assert step.progress_message == "m\ufffd"


def test_summary_patches_are_copied_at_the_call():
    run, lease = held()
    telemetry = AttemptTelemetry(lease)
    patch: dict[str, Any] = {"list": [1]}
    telemetry.summary(patch)
    patch["list"].append(2)
    telemetry.close()
    assert step_of(run).summary == {"list": [1]}


def test_a_step_that_reports_nothing_writes_nothing_for_telemetry():
    run, lease = held()
    with CaptureQueriesContext(connection) as captured:
        AttemptTelemetry(lease).close()
    assert captured.captured_queries == []
    assert_nothing_written(step_of(run))


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("round_", range(5))
def test_a_flush_racing_a_revoke_is_all_or_nothing(concurrently, round_):
    """Real connections, one thread each: the flush commits whole before the revoke, or
    finds the fence broken and writes nothing; never frames without their count."""
    run, lease = held()
    telemetry = AttemptTelemetry(lease)
    for line in range(50):
        telemetry.log(f"line {line}")
    telemetry.progress(1, 2)
    flushed, revoked = concurrently(
        telemetry.flush,
        lambda: workflows.revoke_lease(lease.step_id, expected_attempt=lease.attempt),
    )
    assert not isinstance(revoked, Exception), revoked
    step = step_of(run)
    frames = Frame.objects.filter(step=step).count()
    if isinstance(flushed, LeaseLost):
        assert (frames, step.frames_written, step.progress_done) == (0, 0, None)
    else:
        assert flushed is None
        assert (frames, step.frames_written, step.progress_done) == (50, 50, 1)
    assert step.status == "ready"  # the revoke always wins the lease in the end


def test_one_flush_writes_ten_thousand_frames_in_order_with_their_times(settings):
    settings.WORKFLOWS = {**settings.WORKFLOWS, "PROGRESS_INTERVAL": timedelta(hours=1)}
    run, lease = held()
    telemetry = AttemptTelemetry(lease)
    before = timezone.now() - timedelta(seconds=1)
    for line in range(10_000):
        telemetry.log(f"line {line}", stream="event" if line % 2 else "stdout")
    telemetry.log("one too many")  # past FRAMES_PER_ATTEMPT: the first line goes
    telemetry.flush()
    step = step_of(run)
    assert (step.frames_written, step.frames_dropped) == (10_001, 1)
    first, *_, last = workflows.frames(step, limit=1000) + workflows.frames(step, after=10_000)
    assert (first.seq, first.text, first.stream) == (2, "line 1", "event")
    assert (last.seq, last.text) == (10_001, "one too many")
    assert before <= first.at <= last.at <= timezone.now() + timedelta(seconds=1)
    assert Frame.objects.filter(step=step).count() == 10_000


def test_a_frame_keeps_the_microsecond_it_was_logged_at(monkeypatch):
    # As an event's created_at does: a line logged just before a step completed must not
    # be dated after the completion (SQLite's own clock functions keep milliseconds).
    run, lease = held()
    telemetry = AttemptTelemetry(lease)
    logged_at = datetime(2026, 11, 27, 7, 48, 42, 123_987, tzinfo=UTC)
    monkeypatch.setattr(telemetry_buffer, "_wall_clock", logged_at.timestamp)
    telemetry.log("at the microsecond")
    telemetry.flush()
    [frame] = workflows.frames(step_of(run))
    assert frame.at == logged_at


@pytest.mark.parametrize("fail", [False, True])
def test_a_transactional_step_writes_its_telemetry_with_its_outcome_or_not_at_all(fail):
    run = workflows.start_run(Transactional, {"fail": fail})
    run_pending()
    step = step_of(run)
    assert step.status == ("failed" if fail else "completed")
    if fail:
        assert_nothing_written(step)
    else:
        assert texts(step) == [(1, 1, "stdout", "inside the attempt's transaction")]
        assert step.progress_done == 1


def test_a_heartbeat_writes_what_is_pending_first():
    run, lease = held()
    telemetry = AttemptTelemetry(lease)
    telemetry.log("before the heartbeat")
    telemetry.summary({"phase": 1})
    telemetry.heartbeat()
    step = step_of(run)
    assert texts(step) == [(1, 1, "stdout", "before the heartbeat")]
    assert step.summary == {"phase": 1}
    assert step.version == lease.version  # the flush's and the heartbeat's bumps


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("FRAMES_PER_ATTEMPT", 0),
        ("FRAME_BYTES_PER_ATTEMPT", True),
        ("FRAMES_PER_ATTEMPT", 1.5),
        ("PROGRESS_INTERVAL", timedelta(0)),
    ],
)
def test_telemetry_settings_refuse_bad_values(settings, name, value):
    from django.core.exceptions import ImproperlyConfigured

    from workflows.conf import workflow_settings

    settings.WORKFLOWS = {**settings.WORKFLOWS, name: value}
    with pytest.raises(ImproperlyConfigured, match=name):
        getattr(workflow_settings, name)


def test_purging_a_finished_run_deletes_its_frames():
    from workflows.services.retention import purge_history

    run = workflows.start_run(Reporting)
    run_pending()
    assert Frame.objects.filter(step__run=run).count() == 2
    report = purge_history(before=timezone.now() + timedelta(1))
    assert report.runs == 1
    assert not Frame.objects.filter(step__run_id=run.pk).exists()


@pytest.mark.django_db(transaction=True)
def test_threads_of_one_handler_report_together_without_fencing_each_other_out(
    settings, concurrently
):
    """Flushes from several threads are serialised: two with one lease version would
    fence each other out as if the lease were lost."""
    settings.WORKFLOWS = {**settings.WORKFLOWS, "PROGRESS_INTERVAL": timedelta(microseconds=1)}
    run, lease = held()
    telemetry = AttemptTelemetry(lease)

    def reports(thread: int) -> None:
        for line in range(100):
            telemetry.log(f"thread {thread} line {line}")
            telemetry.progress(line, 100)
            if line % 25 == 0:
                telemetry.heartbeat()

    results = concurrently(*(lambda thread=thread: reports(thread) for thread in range(4)))
    telemetry.close()
    assert results == [None] * 4
    step = step_of(run)
    assert step.frames_written == 400
    assert [row[0] for row in texts(step)] == list(range(1, 401))
    assert not lease_lost_recorded(run)


def lease_lost_recorded(run: Any) -> bool:
    return Event.objects.filter(run=run, type="lease.lost").exists()
