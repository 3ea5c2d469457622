"""Run-level concurrency: ``max_concurrent_runs``, the ``queued`` status, the backstop."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.contrib.auth.models import User

import workflows
from tests.acceptance.invariants import most_active_at_once as most_active_at_once_in
from tests.support.handlers import BROKEN, WORK
from tests.support.threads import run_concurrently
from workflows import InvalidTransition, SubWorkflow, Task, WaitForSignal, Workflow
from workflows.engine.guards import RUN_VERBS
from workflows.engine.limits import slots
from workflows.engine.limits.run_limits import slot_key
from workflows.models import ConcurrencySlot, Event, Run, Step
from workflows.queries.explain import explain
from workflows.status import RUN_FINAL
from workflows.testing import run_pending
from workflows.workers.scanners import RECOVERY_SCANNERS, start_queued_runs


class Held(Workflow):
    """Each run waits for the signal "go", so the test decides when it ends."""

    name = "queued_held"
    max_concurrent_runs = 2
    hold = WaitForSignal("go")
    work = Task(WORK)


class Quick(Workflow):
    name = "queued_quick"
    max_concurrent_runs = 1
    only = Task(WORK)


class Parent(Workflow):
    """A limited workflow whose steps start children of a limited workflow."""

    name = "queued_parent"
    max_concurrent_runs = 1
    child = SubWorkflow("queued_quick")
    second = SubWorkflow("queued_quick")


def start(count: int, **options: Any) -> list[Run]:
    return [workflows.start_run(Held, {"n": n}, **options) for n in range(count)]


def statuses(runs: list[Run]) -> list[str]:
    by_id = dict(Run.objects.filter(pk__in=[r.pk for r in runs]).values_list("id", "status"))
    return [by_id[run.pk] for run in runs]


def finish(run: Run) -> None:
    workflows.send_signal(run, "go")
    run_pending()


def most_active_at_once(name: str) -> int:
    return most_active_at_once_in(workflow=name)


def started_order(name: str) -> list[Any]:
    history = Event.objects.filter(run__workflow_name=name, type="run.started").order_by("id")
    return list(history.values_list("run_id", flat=True))


@pytest.mark.django_db
def test_two_run_and_three_wait_queued_with_nothing_entered():
    runs = start(5)
    run_pending()
    assert statuses(runs) == ["waiting", "waiting", "queued", "queued", "queued"]
    for run in runs[2:]:
        assert set(Step.objects.filter(run=run).values_list("status", flat=True)) == {"pending"}
        history = list(Event.objects.filter(run=run).values_list("type", "payload"))
        assert [kind for kind, _ in history] == ["run.queued"]
        assert history[0][1]["max_concurrent_runs"] == 2
        assert Run.objects.get(pk=run.pk).started_at is None
    assert slots.held(slot_key("queued_held")) == 2


@pytest.mark.django_db
def test_queued_runs_start_highest_priority_first_then_oldest_never_more_than_the_limit():
    runs = start(2)
    low, high, low_later, high_later = (
        workflows.start_run(Held, {"n": "low"}, priority=0),
        workflows.start_run(Held, {"n": "high"}, priority=5),
        workflows.start_run(Held, {"n": "low later"}, priority=0),
        workflows.start_run(Held, {"n": "high later"}, priority=5),
    )
    run_pending()
    assert statuses([low, high, low_later, high_later]) == ["queued"] * 4
    everything = [*runs, low, high, low_later, high_later]
    while Run.objects.filter(workflow_name="queued_held").exclude(status__in=RUN_FINAL).exists():
        active = list(
            Run.objects.filter(workflow_name="queued_held", status="waiting").order_by("started_at")
        )
        assert 1 <= len(active) <= 2
        finish(active[0])
    order = started_order("queued_held")
    assert order == [r.pk for r in (*runs, high, high_later, low, low_later)]
    assert statuses(everything) == ["completed"] * 6
    assert most_active_at_once("queued_held") == 2
    dequeued = Event.objects.get(run=high, type="run.dequeued").payload
    assert dequeued["freed_by"] == str(runs[0].pk)


@pytest.mark.django_db
def test_a_new_run_queues_behind_waiting_runs_even_when_a_place_is_free():
    first, _second, queued = start(3)
    run_pending()
    # A place frees without the run-end hook (as a path that skips it would).
    ConcurrencySlot.objects.filter(holder_run=first).update(holder_kind="", holder_run=None)
    Run.objects.filter(pk=first.pk).update(status="cancelled")
    late = workflows.start_run(Held, {"n": "late"})
    # First come, first served: the waiting run got the free place, the new one queues.
    assert statuses([queued, late]) == ["waiting", "queued"]


@pytest.mark.django_db
def test_the_scanner_starts_queued_runs_after_a_place_frees_by_another_path():
    first, _second, queued = start(3)
    run_pending()
    Run.objects.filter(pk=first.pk).update(status="terminated")  # no hook ran
    assert start_queued_runs(dry_run=True).found == 1
    assert statuses([queued]) == ["queued"]
    result = start_queued_runs()
    assert (result.found, result.done, result.errors) == (1, 1, 0)
    assert statuses([queued]) == ["waiting"]
    assert start_queued_runs().found == 0  # full again
    assert "start_queued_runs" in RECOVERY_SCANNERS  # the sweeper's recovery pass runs it


@pytest.mark.django_db
def test_a_limit_raised_in_a_new_deploy_lets_queued_runs_start(monkeypatch):
    runs = start(4)
    run_pending()
    assert statuses(runs).count("queued") == 2
    monkeypatch.setattr(Held, "max_concurrent_runs", 3)
    assert start_queued_runs().done == 1
    assert statuses(runs).count("queued") == 1
    monkeypatch.setattr(Held, "max_concurrent_runs", None)  # no limit at all
    assert start_queued_runs().done == 1
    assert "queued" not in statuses(runs)


@pytest.mark.django_db
def test_cancel_and_terminate_end_a_queued_run_with_nothing_to_compensate():
    operator = User.objects.create_user("operator")
    first, second, cancelled, terminated, last = start(5)
    workflows.cancel_run(cancelled, reason="not needed", user=operator)
    workflows.terminate_run(terminated, reason="wrong input", user=operator)
    assert statuses([cancelled, terminated]) == ["cancelled", "terminated"]
    assert set(Step.objects.filter(run=cancelled).values_list("status", flat=True)) == {"cancelled"}
    types = list(Event.objects.filter(run=cancelled).order_by("id").values_list("type", flat=True))
    assert types[0] == "run.queued" and types[-1] == "run.cancelled"
    assert "compensation.ready" not in types
    assert statuses([first, second, last]) == ["waiting", "waiting", "queued"]
    finish(first)  # the place goes to the run still queued, not the ended ones
    assert statuses([last]) == ["waiting"]


@pytest.mark.django_db
def test_other_verbs_on_a_queued_run_say_why_not():
    *_, queued = start(3)
    for verb in (workflows.pause_run, workflows.resume_run, workflows.retry_run):
        with pytest.raises(InvalidTransition, match="run is queued: it waits for a place"):
            verb(queued)
    actions = {action.verb: action for action in explain(queued).allowed_actions}
    assert {verb for verb, action in actions.items() if action.allowed} == {
        "cancel",
        "terminate",
        "priority",
        "business_key",
    }
    assert "max_concurrent_runs" in actions["pause"].reason
    assert set(RUN_VERBS) <= set(actions)


@pytest.mark.django_db
def test_a_retry_of_a_failed_run_takes_a_free_place_or_is_refused():
    BROKEN.add("only")
    failed = workflows.start_run(Quick, {"n": 1})
    run_pending()
    assert statuses([failed]) == ["failed"]
    BROKEN.clear()
    other = workflows.start_run(Quick, {"n": 2})
    queued = workflows.start_run(Quick, {"n": 3})
    assert statuses([other, queued]) == ["running", "queued"]
    with pytest.raises(InvalidTransition, match=r"allows 1 concurrent runs \(1 active, 1 queued\)"):
        workflows.retry_run(failed)
    assert statuses([failed]) == ["failed"]  # rolled back: nothing changed
    run_pending()  # other and queued complete
    assert statuses([other, queued]) == ["completed", "completed"]
    workflows.retry_run(failed)
    run_pending()
    assert statuses([failed]) == ["completed"]
    workflows.rerun_from(failed, "only")
    assert most_active_at_once("queued_quick") == 1


@pytest.mark.django_db
def test_child_runs_do_not_count_against_their_workflows_limit():
    parent = workflows.start_run(Parent)
    queued_parent = workflows.start_run(Parent)
    run_pending()
    # Both children of the first parent ran although queued_quick allows one run at a
    # time and the parent held its place meanwhile; the second parent waited its turn.
    assert statuses([parent, queued_parent]) == ["completed", "completed"]
    assert Run.objects.filter(workflow_name="queued_quick").count() == 4
    assert not Run.objects.filter(workflow_name="queued_quick", status="queued").exists()
    assert most_active_at_once("queued_parent") == 1


@pytest.mark.django_db
def test_a_queued_run_whose_definition_is_gone_fails_when_its_turn_comes(unregistered):
    first, _second, queued = start(3)
    run_pending()
    Run.objects.filter(pk=queued.pk).update(workflow_version=99)  # as if v99 were dropped
    finish(first)
    queued.refresh_from_db()
    assert queued.status == "failed"
    assert queued.error["code"] == "definition_missing"
    assert slots.held(slot_key("queued_held")) == 1  # its place went back


@pytest.mark.django_db(transaction=True)
def test_concurrent_starts_from_several_threads_never_exceed_the_limit():
    count = 8
    barrier = threading.Barrier(count, timeout=60)

    def start_one(n: int) -> Run:
        barrier.wait()
        return workflows.start_run(Quick, {"n": n})

    started = run_concurrently(*(lambda n=n: start_one(n) for n in range(count)))
    assert all(isinstance(run, Run) for run in started), started
    runs = Run.objects.filter(workflow_name="queued_quick")
    assert runs.filter(status="running").count() == 1
    assert runs.filter(status="queued").count() == count - 1
    run_pending()
    assert set(runs.values_list("status", flat=True)) == {"completed"}
    assert most_active_at_once("queued_quick") == 1


@pytest.mark.django_db(transaction=True)
def test_runs_ending_while_others_start_in_threads_never_exceed_the_limit():
    """Ends (which dequeue) race with starts (which may queue): no place is ever held
    twice, and no run is left queued while a place is free."""
    first = start(2)
    run_pending()

    for run in first:
        workflows.send_signal(run, "go")  # their last step is ready: running it ends them

    def begin(n: int) -> None:
        workflows.start_run(Held, {"n": f"racer {n}"})

    run_concurrently(run_pending, run_pending, *(lambda n=n: begin(n) for n in range(4)))
    run_pending()
    runs = Run.objects.filter(workflow_name="queued_held")
    active = runs.exclude(status__in=[*RUN_FINAL, "queued"]).count()
    assert active == 2
    assert runs.filter(status="queued").count() == 2
    assert most_active_at_once("queued_held") == 2
