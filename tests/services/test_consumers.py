"""Event consumers (``workflows.consume``/``ack``) and ``workflows.wait_for_events``.

At least once: what is not acknowledged comes again; consumers are independent; a
position only moves forward; a cursor the server did not issue is refused.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from django.db import connections

import workflows
from tests.support.threads import THREAD_TIMEOUT_SECONDS, run_concurrently
from workflows.errors import InvalidInput, RunNotFound
from workflows.models import Event, EventConsumer, Run


def _run() -> Run:
    return Run.objects.create(workflow_name="consumed", workflow_version=1, snapshot={})


def _events(run: Run, count: int) -> list[int]:
    return [Event.objects.create(run=run, type=f"e{n}").pk for n in range(count)]


def _consume_all(name: str, limit: int = 100) -> list[int]:
    return [event.id for event in workflows.consume(name, limit)]


@pytest.mark.django_db
class TestConsume:
    def test_a_consumer_that_does_not_ack_gets_the_same_events_again(self):
        ids = _events(_run(), 3)
        assert _consume_all("billing") == ids
        assert _consume_all("billing") == ids
        assert EventConsumer.objects.get(name="billing").position_id == 0

    def test_ack_moves_past_the_event_and_every_one_before(self):
        ids = _events(_run(), 5)
        events = workflows.consume("billing", limit=2)
        assert [event.id for event in events] == ids[:2]
        done = workflows.ack("billing", events[-1].cursor)
        assert done.moved and done.version == 2 and done.cursor == events[-1].cursor
        assert _consume_all("billing") == ids[2:]

    def test_consumers_are_independent(self):
        ids = _events(_run(), 3)
        first = workflows.consume("a")
        workflows.ack("a", first[-1].cursor)
        assert _consume_all("a") == []
        assert _consume_all("b") == ids

    def test_events_of_every_run_in_commit_order(self):
        one, two = _run(), _run()
        ids = [Event.objects.create(run=run, type="e").pk for run in (one, two, one)]
        events = workflows.consume("all")
        assert [event.id for event in events] == ids
        assert [event.run_id for event in events] == [one.pk, two.pk, one.pk]
        assert {event.type for event in events} == {"e"}

    def test_an_ack_at_or_behind_the_position_changes_nothing_and_says_so(self):
        _events(_run(), 3)
        events = workflows.consume("billing")
        workflows.ack("billing", events[2].cursor)
        for cursor in (events[0].cursor, events[2].cursor):
            done = workflows.ack("billing", cursor)
            assert not done.moved and done.version == 2 and done.cursor == events[2].cursor
        row = EventConsumer.objects.get(name="billing")
        assert (row.position_id, row.version) == (events[2].id, 2)

    def test_ack_registers_a_new_consumer(self):
        _events(_run(), 2)
        cursor = workflows.consume("a")[0].cursor
        done = workflows.ack("b", cursor)
        assert done.moved and len(workflows.consume("b")) == 1

    @pytest.mark.parametrize(
        "cursor",
        ["", "garbage", "1.2", "1.2:forged", 7, None, ["1.2"], "x" * 500],
    )
    def test_a_cursor_the_server_did_not_issue_is_refused(self, cursor):
        with pytest.raises(InvalidInput) as refused:
            workflows.ack("billing", cursor)
        assert refused.value.details["field"] == "cursor"
        assert not EventConsumer.objects.filter(name="billing").exists()

    def test_an_altered_cursor_is_refused(self):
        _events(_run(), 1)
        cursor = workflows.consume("billing")[0].cursor
        position, _, signature = cursor.partition(":")
        xid, _, event_id = position.partition(".")
        with pytest.raises(InvalidInput):
            workflows.ack("billing", f"{xid}.{int(event_id) + 100}:{signature}")

    @pytest.mark.parametrize("name", ["", "   ", "a\x00b", "x" * 201, 5, None])
    def test_a_bad_consumer_name_is_refused(self, name):
        with pytest.raises(InvalidInput) as refused:
            workflows.consume(name)
        assert "consumer" in refused.value.message

    @pytest.mark.parametrize("limit", [0, -1, 1001, 1.5, "10", True])
    def test_a_bad_limit_is_refused(self, limit):
        with pytest.raises(InvalidInput) as refused:
            workflows.consume("billing", limit)
        assert refused.value.details["field"] == "limit"


@pytest.mark.django_db(transaction=True)
def test_racing_acks_end_at_the_furthest():
    ids = _events(_run(), 6)
    events: list = []
    while len(events) < len(ids):  # a transaction open elsewhere may hold them back a while
        events = workflows.consume("racer", wait=THREAD_TIMEOUT_SECONDS)
    cursors = [event.cursor for event in events]
    results = run_concurrently(*(lambda c=c: workflows.ack("racer", c) for c in cursors))
    assert not [result for result in results if isinstance(result, Exception)]
    assert any(result.moved for result in results)
    row = EventConsumer.objects.get(name="racer")
    assert row.position_id == ids[-1]
    assert row.version == 1 + sum(result.moved for result in results)


@pytest.mark.django_db(transaction=True)
def test_consumers_registering_at_once_share_one_row():
    results = run_concurrently(*(lambda: workflows.consume("newcomer") for _ in range(4)))
    assert not [result for result in results if isinstance(result, Exception)]
    assert EventConsumer.objects.filter(name="newcomer").count() == 1


@pytest.mark.django_db
class TestWaitForEvents:
    def test_events_there_come_at_once_in_order(self):
        run = _run()
        ids = _events(run, 3)
        assert [event.pk for event in workflows.wait_for_events(run, timeout=0)] == ids
        assert [event.pk for event in workflows.wait_for_events(run.pk, after=ids[0])] == ids[1:]
        assert workflows.wait_for_events(str(run.pk), after=ids[-1], timeout=0) == []

    def test_an_event_of_another_run_is_no_cursor(self):
        other = _events(_run(), 1)[0]
        with pytest.raises(InvalidInput) as refused:
            workflows.wait_for_events(_run(), after=other, timeout=0)
        assert refused.value.details["field"] == "after_seq"

    @pytest.mark.parametrize("after", [-1, "3", 1.5, True])
    def test_a_bad_after_is_refused(self, after):
        with pytest.raises(InvalidInput):
            workflows.wait_for_events(_run(), after=after, timeout=0)

    def test_an_unknown_run_is_not_found(self):
        with pytest.raises(RunNotFound):
            workflows.wait_for_events("not-a-run", timeout=0)


@contextmanager
def an_event_committed_meanwhile(run: Run) -> Iterator[None]:
    """A thread commits a ``late`` event of ``run`` a moment after the block begins
    waiting; the block ends only once the thread has."""

    def commit_later() -> None:
        try:
            time.sleep(0.3)
            Event.objects.create(run=run, type="late")
        finally:
            connections.close_all()

    writer = threading.Thread(target=commit_later)
    writer.start()
    try:
        yield
    finally:
        writer.join(THREAD_TIMEOUT_SECONDS)


@pytest.mark.django_db(transaction=True)
def test_wait_for_events_returns_when_an_event_commits():
    """The waiter waits up to a minute; a thread commits an event: the test ending at
    all shows it returned on the commit (woken, or at its backstop poll)."""
    run = _run()
    started = _events(run, 1)[0]
    with an_event_committed_meanwhile(run):
        events = workflows.wait_for_events(run, after=started, timeout=THREAD_TIMEOUT_SECONDS)
    assert [event.type for event in events] == ["late"]


@pytest.mark.django_db(transaction=True)
def test_consume_with_wait_returns_when_an_event_commits():
    run = _run()
    with an_event_committed_meanwhile(run):
        events = workflows.consume("waiter", wait=THREAD_TIMEOUT_SECONDS)
    assert [event.type for event in events] == ["late"]
