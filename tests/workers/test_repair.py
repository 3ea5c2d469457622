"""``repair_stuck_runs``: the safety net for a run that nothing would ever wake.

No transition leaves a run like that (each is all or nothing), so the tests make one
the way only a bug or a hand edit of the tables could: an unfenced UPDATE that moves a
step or a run without the engine.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

import workflows
from tests.support.threads import sweeper_until
from workflows import Task, Workflow
from workflows.models import CompensationRecord, Run, Step
from workflows.testing import run_pending
from workflows.workers.scanners import recover, repair_stuck_runs
from workflows.workers.sweeper import REPAIR, RecoveryClock

pytestmark = pytest.mark.django_db

HERE = "tests.workers.test_repair"
SWEEP_TIMEOUT_SECONDS = 30


def book(ctx):
    return "booked"


def unbook(ctx):
    return "unbooked"


class TwoSteps(Workflow):
    name = "repair_two_steps"
    first = Task(f"{HERE}.book", compensate=f"{HERE}.unbook")
    second = Task(f"{HERE}.book")


def stuck_active_run() -> Run:
    """A running run whose first step was marked completed behind the engine's back:
    its second step stays pending with nothing in flight to release it."""
    run = workflows.start_run(TwoSteps)
    Step.objects.filter(run=run, name="first").update(status="completed", output="booked")
    return run


def stuck_unwinding_run() -> Run:
    """A compensating run whose compensation was never released."""
    run = workflows.start_run(TwoSteps)
    run_pending()  # completes: "first" recorded its compensation
    Run.objects.filter(pk=run.pk).update(status="compensating")
    CompensationRecord.objects.filter(run=run).update(status="pending")
    return run


def test_a_stuck_active_run_is_released_and_finishes():
    run = stuck_active_run()
    healthy = workflows.start_run(TwoSteps)

    scan = repair_stuck_runs()

    assert (scan.found, scan.done) == (1, 1)
    assert run.steps.get(name="second").status == "ready"
    assert run.events.filter(type="run.repaired").count() == 1
    assert not healthy.events.filter(type="run.repaired").exists()
    run_pending()
    run.refresh_from_db()
    assert run.status == "completed"


def test_a_stuck_unwinding_run_releases_its_compensation_and_ends():
    run = stuck_unwinding_run()

    scan = repair_stuck_runs()

    assert (scan.found, scan.done) == (1, 1)
    run_pending()
    run.refresh_from_db()
    assert run.status == "compensated"
    assert CompensationRecord.objects.get(run=run).status == "completed"


def test_a_dry_run_counts_both_kinds_and_changes_nothing():
    active, unwinding = stuck_active_run(), stuck_unwinding_run()
    assert repair_stuck_runs(dry_run=True).found == 2
    assert not Run.objects.filter(events__type="run.repaired").exists()
    assert {active.pk, unwinding.pk} == set(
        Run.objects.filter(status__in=["running", "compensating"]).values_list("pk", flat=True)
    )


def test_recover_can_leave_repair_out():
    stuck_active_run()
    assert REPAIR not in recover(skip=(REPAIR,))
    assert not Run.objects.filter(events__type="run.repaired").exists()
    assert recover()[REPAIR].done == 1


def test_the_recovery_clock_repairs_on_its_own_interval():
    clock = RecoveryClock(recovery_interval=5, repair_interval=60)
    schedule = {now: clock.scanners_to_skip(now) for now in (0, 1, 5, 10, 30, 60, 61, 65, 120)}
    assert schedule == {
        0: (),  # the first pass repairs
        1: None,  # no pass due yet
        5: (REPAIR,),
        10: (REPAIR,),
        30: (REPAIR,),
        60: (),  # a minute after the last repair
        61: None,
        65: (REPAIR,),
        120: (),
    }


@pytest.mark.django_db(transaction=True)  # the sweeper thread has its own connection
def test_the_sweeper_repairs_a_stuck_run(settings):
    settings.WORKFLOWS = {
        **getattr(settings, "WORKFLOWS", {}),
        "TIMER_POLL_INTERVAL": timedelta(milliseconds=20),
        "RECOVERY_INTERVAL": timedelta(0),
        "REPAIR_INTERVAL": timedelta(0),
    }
    run = stuck_active_run()
    sweeper_until(
        lambda: run.events.filter(type="run.repaired").exists(), timeout=SWEEP_TIMEOUT_SECONDS
    )
    assert run.steps.get(name="second").status == "ready"
