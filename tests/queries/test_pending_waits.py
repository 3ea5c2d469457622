"""``pending_waits``: every wait across runs — gates, signals, callbacks, sleeps, child
runs, held work, blocked flow members, queued runs — with its run, age and timeout,
oldest first, filtered and paged in a fixed number of queries."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db.models import Subquery
from django.db.models.functions import Now
from django.utils import timezone

import workflows
from tests.support.handlers import ASK_BANK, AWAIT_MAPPING, NOOP
from workflows import (
    FanOut,
    Gate,
    InvalidInput,
    Sleep,
    SubWorkflow,
    Task,
    WaitForSignal,
    Workflow,
)
from workflows.holds import HoldKind
from workflows.models import FanOutItem, Run, Step, Timer
from workflows.queries.waits import WAIT_KINDS, WaitPage
from workflows.status import TimerKind
from workflows.testing import run_pending

pytestmark = pytest.mark.django_db

# The three kinds of hold by a limit, a wait each.
LIMITS = ["concurrency", "rate", "budget"]


class Signed(Workflow):
    name = "waits_signed"
    go = WaitForSignal("go")


class Everything(Workflow):
    """One step of each waiting kind, side by side."""

    name = "waits_everything"
    approve = Gate(prompt="Ship order {input[order]}?", timeout=timedelta(days=2), after=[])
    payment = WaitForSignal("paid", timeout=timedelta(days=1), after=[])
    bank = Task(ASK_BANK, after=[])
    mapping = Task(AWAIT_MAPPING, awaits=["mapping", "skip"], after=[])
    cool_off = Sleep(timedelta(hours=1), after=[])
    child = SubWorkflow("waits_signed", after=[])


class Fan(Workflow):
    name = "waits_fan"
    fan = FanOut(NOOP, items=lambda ctx: ["a", "b"])


class Limited(Workflow):
    name = "waits_limited"
    max_concurrent_runs = 1
    only = Task(NOOP)


def identity(wait: Any) -> tuple[Any, ...]:
    """What a wait is, whatever the moment it is read (its age changes)."""
    return (wait.kind, wait.run, wait.step_id, wait.item, wait.since)


def by_kind(page: WaitPage) -> dict[str, list[Any]]:
    found: dict[str, list[Any]] = {}
    for wait in page:
        found.setdefault(wait.kind, []).append(wait)
    return found


@pytest.fixture
def everything() -> dict[str, Any]:
    """A run waiting at every kind of step, held work, a queued run and a blocked member."""
    run = workflows.start_run(Everything, {"order": "A-7"}, business_key="ORDER-7")
    run_pending()
    fan = workflows.start_run(Fan, business_key="FAN-1")
    FanOutItem.objects.filter(step__run=fan).update(held_on="rate:task:waits_fan.fan")
    item = FanOutItem.objects.get(step__run=fan, key="0")
    release = timezone.now() + timedelta(seconds=12)
    Timer.objects.create(run=fan, step=item.step, item=item, kind=TimerKind.RELEASE, due_at=release)
    running = workflows.start_run(Limited, business_key="LIMITED-1")
    Step.objects.filter(run=running).update(held_on="concurrency:waits_limited.only")
    queued = workflows.start_run(Limited, business_key="LIMITED-2")
    flow = workflows.create_flow("nightly")
    upstream = workflows.add_to_flow(flow, Signed, member="extract")
    blocked = workflows.add_to_flow(flow, Signed, member="load", after=["extract"])
    return {
        "run": run,
        "fan": fan,
        "release": release,
        "running": running,
        "queued": queued,
        "flow": flow,
        "upstream": upstream,
        "blocked": blocked,
    }


def test_every_kind_of_wait_with_its_run_what_it_waits_for_and_its_timeout(everything):
    now = timezone.now()
    page = workflows.pending_waits(now=now)
    assert page.next_cursor is None
    found = by_kind(page)
    run = everything["run"]
    child_run = Run.objects.get(parent_run=run)

    [gate] = found["gate"]
    assert (gate.run, gate.workflow, gate.business_key, gate.run_status) == (
        run.pk,
        "waits_everything",
        "ORDER-7",
        "waiting",  # settled by the await's parking: nothing of it is in hand
    )
    assert (gate.step, gate.waits_for, gate.details) == (
        "approve",
        "Ship order A-7?",
        {"claimed_by": None},
    )
    gate_step = Step.objects.get(run=run, name="approve")
    assert (gate.step_id, gate.since) == (gate_step.pk, gate_step.started_at)
    assert gate.age == now - gate_step.started_at
    assert gate.due_at == Timer.objects.get(step=gate_step, kind="gate_timeout").due_at

    payment = next(wait for wait in found["signal"] if wait.run == run.pk)
    assert (payment.step, payment.waits_for) == ("payment", "paid")
    assert payment.due_at == Timer.objects.get(step__name="payment", kind="signal_timeout").due_at

    [callback] = found["callback"]
    bank = Step.objects.get(run=run, name="bank")
    assert (callback.step, callback.waits_for, callback.details) == (
        "bank",
        "callback",
        {"attempt": 1},
    )
    assert callback.due_at == Timer.objects.get(step=bank, kind="callback_timeout").due_at

    [awaiting] = found["await"]
    mapping = Step.objects.get(run=run, name="mapping")
    assert (awaiting.step, awaiting.waits_for, awaiting.details) == (
        "mapping",
        "mapping, skip",
        {"signals": ["mapping", "skip"]},
    )
    assert awaiting.since == mapping.started_at
    assert awaiting.due_at == Timer.objects.get(step=mapping, kind="await_timeout").due_at
    assert [identity(wait) for wait in workflows.pending_waits(kind="await")] == [
        identity(awaiting)
    ]
    assert {wait.kind for wait in workflows.pending_waits(kind=["callback", "poll"])} == {
        "callback"
    }

    [sleep] = found["sleep"]
    assert (sleep.step, sleep.waits_for) == ("cool_off", "timer")
    assert sleep.due_at == Timer.objects.get(step__name="cool_off", kind="sleep").due_at

    [child] = found["child"]
    assert (child.step, child.waits_for, child.due_at) == ("child", str(child_run.pk), None)
    # The child run's own wait is listed too, as its own run's.
    go = [wait for wait in found["signal"] if wait.run == child_run.pk]
    assert [(wait.step, wait.waits_for, wait.workflow) for wait in go] == [
        ("go", "go", "waits_signed")
    ]

    held = [*found["rate"], *found["concurrency"]]
    assert [(wait.step, wait.item, wait.waits_for, wait.details["unit"]) for wait in held] == [
        ("fan", "0", "rate:task:waits_fan.fan", "item"),
        ("fan", "1", "rate:task:waits_fan.fan", "item"),
        ("only", None, "concurrency:waits_limited.only", "step"),
    ]
    assert [wait.due_at for wait in held] == [everything["release"], None, None]
    assert held[2].details == {
        "limit": "concurrency",
        "key": "waits_limited.only",
        "unit": "step",
    }
    assert held[0].business_key == "FAN-1"

    [queued] = found["queued"]
    assert (queued.run, queued.step, queued.run_status, queued.business_key) == (
        everything["queued"].pk,
        None,
        "queued",
        "LIMITED-2",
    )
    assert queued.waits_for == "max_concurrent_runs of waits_limited"

    [blocked] = found["blocked"]
    assert (blocked.run, blocked.run_status) == (everything["blocked"].pk, "blocked")
    assert blocked.waits_for == "join all in flow nightly"
    assert blocked.details == {
        "flow": str(everything["flow"].pk),
        "flow_name": "nightly",
        "member": "load",
        "join": "all",
        "join_count": None,
    }
    # A poll between two iterations: tests/queries/test_loop_explain.py.
    # A budget hold: test_a_fixed_number_of_queries_whatever_the_number_of_waits.
    assert set(found) == set(WAIT_KINDS) - {HoldKind.POLL, HoldKind.BUDGET}
    assert all(isinstance(wait.age, timedelta) and wait.age >= timedelta(0) for wait in page)


def test_waits_come_oldest_first_and_as_json(everything):
    page = workflows.pending_waits()
    assert [wait.since for wait in page] == sorted(wait.since for wait in page)
    data = [wait.as_dict() for wait in page]
    gate = next(entry for entry in data if entry["kind"] == "gate")
    assert gate["run"] == str(everything["run"].pk)
    assert isinstance(gate["age_seconds"], float) and isinstance(gate["due_at"], str)


def test_filters_by_kind_workflow_and_age(everything):
    assert [wait.kind for wait in workflows.pending_waits(kind="gate")] == ["gate"]
    assert {wait.kind for wait in workflows.pending_waits(kind=["signal", "queued"])} == {
        "signal",
        "queued",
    }
    assert {wait.kind for wait in workflows.pending_waits(kind=LIMITS)} == {"rate", "concurrency"}
    assert {wait.kind for wait in workflows.pending_waits(kind=HoldKind.RATE)} == {"rate"}
    signed = workflows.pending_waits(workflow="waits_signed")
    assert {(wait.kind, wait.run) for wait in signed} == {
        ("signal", Run.objects.get(parent_run=everything["run"]).pk),
        ("signal", everything["upstream"].pk),
        ("blocked", everything["blocked"].pk),
    }
    assert list(workflows.pending_waits(workflow="no_such_workflow")) == []

    assert list(workflows.pending_waits(older_than=timedelta(hours=1))) == []
    two_hours_ago = timezone.now() - timedelta(hours=2)
    Step.objects.filter(run=everything["run"], name="approve").update(started_at=two_hours_ago)
    Step.objects.filter(run=everything["running"]).update(updated_at=two_hours_ago)
    Run.objects.filter(pk=everything["queued"].pk).update(created_at=two_hours_ago)
    old = workflows.pending_waits(older_than=timedelta(hours=1))
    assert [wait.kind for wait in old] == ["gate", "concurrency", "queued"]
    assert all(wait.age >= timedelta(hours=2) for wait in old)
    assert [wait.kind for wait in workflows.pending_waits(older_than=timedelta(0))] == [
        wait.kind for wait in workflows.pending_waits()
    ]


def moment_written(stamp: str) -> Any:
    """One moment, written as ``stamp`` says: by Django (to the microsecond, or on a
    whole second, which Django writes with no fraction on SQLite), or as one reading of
    the database's clock, as the engine's transitions stamp rows (to the millisecond on
    SQLite), copied from the first waiting step."""
    if stamp == "database clock":
        Step.objects.filter(status="waiting").update(started_at=Now())
        return Subquery(Step.objects.filter(status="waiting").values("started_at")[:1])
    moment = timezone.now() - timedelta(minutes=5)
    return moment.replace(microsecond=0) if stamp == "whole second" else moment


@pytest.mark.parametrize("stamp", ["microseconds", "whole second", "database clock"])
def test_pages_follow_the_cursor_without_gaps_or_repeats_even_at_equal_moments(everything, stamp):
    # Every source at one and the same moment: the order falls back to source, then id.
    moment = moment_written(stamp)
    Step.objects.filter(status="waiting").update(started_at=moment)
    Step.objects.filter(status="ready").update(updated_at=moment)
    FanOutItem.objects.update(updated_at=moment)
    Run.objects.filter(status__in=["queued", "blocked"]).update(created_at=moment)
    everyone = [identity(wait) for wait in workflows.pending_waits()]
    assert len(everyone) == 13
    for size in (1, 2, 5, 12, 13):
        seen: list[Any] = []
        cursor = None
        while True:
            page = workflows.pending_waits(limit=size, cursor=cursor)
            assert len(page) <= size
            seen.extend(identity(wait) for wait in page)
            cursor = page.next_cursor
            if cursor is None:
                break
        assert seen == everyone, size
    first = workflows.pending_waits(kind=LIMITS, limit=2)
    rest = workflows.pending_waits(kind=LIMITS, limit=2, cursor=first.next_cursor)
    assert [wait.item for wait in [*first, *rest]] == [None, "0", "1"]  # steps first
    assert rest.next_cursor is None


def test_a_fixed_number_of_queries_whatever_the_number_of_waits(
    everything, django_assert_num_queries
):
    with django_assert_num_queries(5):
        assert len(workflows.pending_waits()) == 13
    for _ in range(10):
        workflows.start_run(Everything, {"order": "B"})
        workflows.start_run(Fan)
    run_pending()
    FanOutItem.objects.update(held_on="budget:calls")
    with django_assert_num_queries(5):
        page = workflows.pending_waits(limit=500)
    assert len(page) > 50
    with django_assert_num_queries(5):
        assert len(workflows.pending_waits(limit=3, cursor=page.next_cursor or None)) <= 3
    for kinds, queries in (
        ("gate", 1),
        (["gate", "callback"], 1),
        (LIMITS, 2),
        ("budget", 2),
        ("queued", 1),
        (["queued", "blocked"], 2),
    ):
        with django_assert_num_queries(queries):
            workflows.pending_waits(kind=kinds)


def test_the_waits_of_runs_that_are_stopping_or_over_are_gone_a_paused_run_keeps_its(
    everything,
):
    run = everything["run"]
    workflows.pause_run(run, reason="audit")
    paused = [wait for wait in workflows.pending_waits() if wait.run == run.pk]
    assert {wait.run_status for wait in paused} == {"paused"}
    assert len(paused) == 6
    workflows.resume_run(run)
    workflows.cancel_run(run, reason="customer left")
    run_pending()
    assert [wait for wait in workflows.pending_waits() if wait.run == run.pk] == []


def test_a_decided_gate_and_a_consumed_signal_no_longer_wait(everything):
    run = everything["run"]
    workflows.approve_gate(
        Step.objects.get(run=run, name="approve"), user=User.objects.create_superuser("boss")
    )
    workflows.send_signal(run, "paid", {"amount": 1})
    workflows.send_signal(run, "skip", None)  # resumes the awaiting handler: ready
    kinds = [wait.kind for wait in workflows.pending_waits() if wait.run == run.pk]
    assert sorted(kinds) == ["callback", "child", "sleep"]


@pytest.mark.parametrize(
    "options",
    [
        {"kind": "nap"},
        {"kind": []},
        {"kind": ["gate", "nope"]},
        {"limit": 0},
        {"limit": 501},
        {"limit": True},
        {"limit": "10"},
        {"older_than": timedelta(seconds=-1)},
        {"older_than": 3600},
        {"older_than": timedelta.max},
        {"workflow": 7},
        {"workflow": "a\x00b"},
        {"workflow": "\ud800"},
        {"cursor": "not-a-cursor"},
        {"cursor": ""},
    ],
)
def test_a_bad_filter_is_refused_before_any_query(options, django_assert_num_queries):
    with django_assert_num_queries(0), pytest.raises(InvalidInput):
        workflows.pending_waits(**options)


def test_a_cursor_made_up_or_altered_is_refused(everything):
    cursor = workflows.pending_waits(limit=1).next_cursor
    assert cursor is not None
    with pytest.raises(InvalidInput, match="cursor"):
        workflows.pending_waits(cursor=cursor[:-2] + "xx")
    assert len(workflows.pending_waits(cursor=cursor)) == 12
