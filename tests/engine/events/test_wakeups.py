"""Wake-ups on commit (workflows.engine.wakeups): on commit only, across connections on
PostgreSQL (NOTIFY and the listener), and after the listener lost its connection.

No timed assertions: a waiter waits up to a minute and the test asserts it was woken
(``Watch.wait`` returns True only for a wake-up, never at its timeout).
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection, transaction

import workflows
from tests.support.database import is_sqlite
from tests.support.threads import run_concurrently
from workflows import Gate, Sleep, Workflow
from workflows.engine.events import EventLog
from workflows.engine.wakeups import Watch, wake
from workflows.engine.wakeups.postgresql import listener

HERE = "tests.engine.events.test_wakeups"
# A bound no passing test reaches; a waiter that returns False hit it.
WAIT_SECONDS = 60


class Held(Workflow):
    name = "wakeups_held"
    review = Gate(prompt="go?")


class Napping(Workflow):
    name = "wakeups_napping"
    nap = Sleep(timedelta(0))


def in_another_thread(call) -> None:
    """Run ``call`` in a thread with its own connection (its own transaction)."""
    [result] = run_concurrently(call)
    if isinstance(result, Exception):
        raise result


def committed_wake(topic: str) -> None:
    with transaction.atomic():
        wake(topic)


def settled() -> None:
    """Return once every wake-up committed so far has reached this process: a later
    commit's has (PostgreSQL delivers notifications in commit order)."""
    sentinel = Watch(["sentinel"])
    in_another_thread(lambda: committed_wake("sentinel"))
    assert sentinel.wait(WAIT_SECONDS)


@pytest.mark.django_db(transaction=True)
def test_a_commit_in_another_thread_wakes_the_watch():
    watch = Watch(["parcel"])
    in_another_thread(lambda: committed_wake("parcel"))
    assert watch.wait(WAIT_SECONDS)


@pytest.mark.django_db(transaction=True)
def test_a_rolled_back_transition_wakes_nobody():
    watch = Watch(["parcel"])

    def rolled_back() -> None:
        with pytest.raises(RuntimeError), transaction.atomic():
            wake("parcel")
            raise RuntimeError("changed my mind")

    in_another_thread(rolled_back)
    settled()  # a notification of the rolled-back transaction would have arrived by now
    assert not watch.wait(0)


@pytest.mark.django_db(transaction=True)
def test_a_run_ending_in_another_thread_wakes_its_topic_and_events():
    run = workflows.start_run(Held)
    mine, everyone = Watch([f"run:{run.pk}"]), Watch(["events"])
    in_another_thread(lambda: workflows.cancel_run(run.pk))
    assert mine.wait(WAIT_SECONDS)
    assert everyone.wait(WAIT_SECONDS)


@pytest.mark.django_db(transaction=True)
def test_a_watch_of_another_run_is_not_woken():
    run, other = workflows.start_run(Held), workflows.start_run(Held)
    watch = Watch([f"run:{other.pk}"])
    settled()
    watch.wait(0)  # forget the start's own wake-up, if it arrived after the watch
    in_another_thread(lambda: workflows.cancel_run(run.pk))
    settled()
    assert not watch.wait(0)


@pytest.mark.django_db(transaction=True)
def test_a_timer_armed_due_now_wakes_timers():
    watch = Watch(["timers"])
    in_another_thread(lambda: workflows.start_run(Napping))
    assert watch.wait(WAIT_SECONDS)


@pytest.mark.django_db(transaction=True)
def test_the_listener_reconnects_after_its_connection_is_killed():
    if is_sqlite():
        pytest.skip("PostgreSQL's listener")
    running = listener(connection.alias)
    killed = running.backend_pid
    assert killed is not None
    watch = Watch(["after the cut"])
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(%s)", [killed])
    # Reconnected, it wakes every waiter once: what was sent while it was away is lost.
    assert watch.wait(WAIT_SECONDS)
    assert running.listening.wait(WAIT_SECONDS)
    assert running.backend_pid not in (None, killed)
    # And it hears commits again.
    in_another_thread(lambda: committed_wake("after the cut"))
    assert watch.wait(WAIT_SECONDS)


def events_committed(run_id, *types: str) -> None:
    with transaction.atomic():
        log = EventLog()
        for type in types:
            log.add(run_id, type)
        log.flush()


@pytest.mark.django_db(transaction=True)
def test_routine_progress_notifies_nobody_on_postgresql():
    """A step becoming ready, starting, completing: the per-step path sends no NOTIFY
    (its commit lock would serialise the workers' commits); a notable event does."""
    if is_sqlite():
        pytest.skip("in-process wake-ups cost nothing: SQLite wakes for every event")
    run = workflows.start_run(Held)
    watch = Watch([f"run:{run.pk}", "events"])
    settled()
    watch.wait(0)
    routine = ["step.ready", "step.started", "step.completed", "item.completed"]
    in_another_thread(lambda: events_committed(run.pk, *routine, "step.retry_scheduled"))
    settled()
    assert not watch.wait(0)
    in_another_thread(lambda: events_committed(run.pk, "step.started", "step.failed"))
    assert watch.wait(WAIT_SECONDS)


@pytest.mark.django_db(transaction=True)
def test_a_watch_made_after_the_events_were_written_and_before_the_commit_is_woken():
    """The wake-up of written events is decided at the commit (on SQLite it is skipped
    when no watch is open then): a waiter that watched while the transaction was still
    open, and so read the database without its events, is woken by the commit."""
    run = workflows.start_run(Held)
    opened: list[Watch] = []

    def write_then_watch_then_commit() -> None:
        with transaction.atomic():
            log = EventLog()
            log.add(run.pk, "run.cancelled")
            log.flush()
            opened.append(Watch([f"run:{run.pk}"]))

    in_another_thread(write_then_watch_then_commit)
    assert opened[0].wait(WAIT_SECONDS)


@pytest.mark.django_db(transaction=True)
def test_events_committed_with_no_watch_open_leave_nothing_to_wake():
    """A commit while no watch of the process is open wakes nothing, and a watch made
    afterwards starts from what was committed: it is not woken by the earlier commit."""
    run = workflows.start_run(Held)
    in_another_thread(lambda: events_committed(run.pk, "run.cancelled"))
    watch = Watch([f"run:{run.pk}"])
    settled()
    assert not watch.wait(0)
