"""A run's events in commit order: a poller of ``after_seq`` never skips an event that
commits after one with a higher id.

On PostgreSQL ids are handed out at insert, not at commit: transaction A inserts an
event (lower id) and stays open while B inserts one (higher id) and commits. A cursor
by id alone would let a poller read B, move past A's id, and never see A once it
commits. Two real connections (threads) show it.
"""

from __future__ import annotations

import threading

import pytest
from django.db import connections, transaction

from tests.support.database import is_sqlite
from tests.support.threads import THREAD_TIMEOUT_SECONDS
from workflows.models import Event, Run

pytestmark = pytest.mark.django_db(transaction=True)


def _a_run() -> Run:
    return Run.objects.create(workflow_name="commit_order", workflow_version=1, snapshot={})


def _poll(api, run: Run, after: int, wait: float = 0) -> list[int]:
    response = api("viewer").get(f"/api/runs/{run.pk}/events/?after_seq={after}&wait={wait}")
    assert response.status_code == 200, response.content
    return [event["seq"] for event in response.json()["results"]]


def _poll_on(api, run: Run, after: int, count: int) -> list[int]:
    """Poll as a client does, after the last seq received, until ``count`` events came
    (a transaction open elsewhere in the database may hold them back a while)."""
    seen: list[int] = []
    for _ in range(THREAD_TIMEOUT_SECONDS):
        if len(seen) >= count:
            break
        seen += _poll(api, run, seen[-1] if seen else after, wait=1)
    return seen


def _open_transaction_with_an_event(
    run: Run, inserted: threading.Event, release: threading.Event, ids: list[int]
) -> None:
    """Transaction A: insert an event, say so, and stay open until released."""
    try:
        with transaction.atomic():
            ids.append(Event.objects.create(run=run, type="a.event").pk)
            inserted.set()
            assert release.wait(THREAD_TIMEOUT_SECONDS)
    finally:
        connections.close_all()


def _commit_an_event(run: Run, ids: list[int]) -> None:
    """Transaction B: insert an event and commit, on a connection of its own."""
    try:
        with transaction.atomic():
            ids.append(Event.objects.create(run=run, type="b.event").pk)
    finally:
        connections.close_all()


@pytest.mark.skipif("is_sqlite()", reason="SQLite writers commit one at a time, in id order")
def test_a_poller_never_skips_an_event_that_commits_after_a_higher_id(api):
    run = _a_run()
    first = Event.objects.create(run=run, type="run.started").pk
    assert _poll_on(api, run, 0, count=1) == [first]
    inserted, release = threading.Event(), threading.Event()
    a_ids: list[int] = []
    b_ids: list[int] = []
    a = threading.Thread(
        target=_open_transaction_with_an_event, args=(run, inserted, release, a_ids)
    )
    a.start()
    try:
        assert inserted.wait(THREAD_TIMEOUT_SECONDS)
        b = threading.Thread(target=_commit_an_event, args=(run, b_ids))
        b.start()
        b.join(THREAD_TIMEOUT_SECONDS)
        assert a_ids[0] < b_ids[0], "A's event has the lower id"
        # While A is open a poller moving its cursor past B would never see A: B is
        # held back until A ends.
        seen = _poll(api, run, first)
        assert seen == [], "B waits behind the open transaction A"
    finally:
        release.set()
        a.join(THREAD_TIMEOUT_SECONDS)
    seen += _poll_on(api, run, seen[-1] if seen else first, count=2)
    assert seen == [a_ids[0], b_ids[0]], "every event, in commit order, none skipped"


def test_without_a_concurrent_writer_events_come_in_id_order(api):
    run = _a_run()
    ids = [Event.objects.create(run=run, type=f"e{n}").pk for n in range(4)]
    assert _poll_on(api, run, 0, count=4) == ids
    assert _poll(api, run, ids[1]) == ids[2:]
    assert is_sqlite() or Event.objects.filter(pk__in=ids).exclude(xid=0).count() == 4
