"""workflows.wait_for(run, timeout): the run once it is final, or WaitTimeout."""

from __future__ import annotations

import pytest

import workflows
from tests.support.threads import once_watched, run_concurrently
from workflows import Gate, RunNotFound, WaitTimeout, Workflow


class Held(Workflow):
    name = "wait_for_held"
    review = Gate(prompt="go?")


@pytest.mark.django_db(transaction=True)
def test_it_returns_the_run_when_another_thread_ends_it(no_backstop):
    run = workflows.start_run(Held)
    ended, _ = run_concurrently(
        lambda: workflows.wait_for(run, timeout=60),
        lambda: once_watched(f"run:{run.pk}", lambda: workflows.cancel_run(run.pk)),
    )
    assert not isinstance(ended, Exception), ended
    assert ended.pk == run.pk
    assert ended.status == "cancelled"
    assert type(ended) is type(workflows.get_run(run.pk))


@pytest.mark.django_db(transaction=True)
def test_an_ended_run_is_returned_at_once_by_id_or_text(no_backstop):
    run = workflows.cancel_run(workflows.start_run(Held).pk)
    assert workflows.wait_for(run.pk, timeout=60).status == "cancelled"
    assert workflows.wait_for(str(run.pk), timeout=60).status == "cancelled"


@pytest.mark.django_db(transaction=True)
def test_a_run_still_going_at_the_timeout_raises_wait_timeout():
    run = workflows.start_run(Held)
    with pytest.raises(WaitTimeout) as timed_out:
        workflows.wait_for(run, timeout=0.3)
    assert timed_out.value.code == "wait_timeout"
    assert timed_out.value.details == {"run": str(run.pk), "status": run.status, "timeout": 0.3}


@pytest.mark.django_db
def test_inside_a_transaction_it_does_not_wait():
    """The test runs inside atomic(): waiting there would hold the transaction (and, on
    SQLite, never see the commit), so it answers from its one read: the test ends."""
    run = workflows.start_run(Held)
    with pytest.raises(WaitTimeout):
        workflows.wait_for(run, timeout=3600)


@pytest.mark.django_db
def test_an_unknown_run_is_not_found():
    with pytest.raises(RunNotFound):
        workflows.wait_for("00000000-0000-0000-0000-000000000000", timeout=60)
