"""Revoke: an operator takes the lease of a running attempt; the work runs again without
using up an attempt, and the revoked worker's heartbeat and result are refused."""

from __future__ import annotations

from functools import partial

import pytest
from django.contrib.auth.models import User

import workflows
from tests.handlers import BOOM, NOOP, UNDO, UNDONE, WORK
from workflows import FanOut, InvalidTransition, LeaseLost, Retry, StepNotFound, Task, Workflow
from workflows.engine import COMPENSATION, ITEM, STEP, claim, claim_step, complete_work, heartbeat
from workflows.engine.lease import Lease
from workflows.errors import RunCancelled, WorkHeld
from workflows.models import CompensationRecord, ConcurrencySlot, Event, FanOutItem, Run, Step
from workflows.testing import run_pending

pytestmark = pytest.mark.django_db


def by_customer(ctx):
    return f"customer:{ctx.input['customer']}"


class Single(Workflow):
    name = "revoke_single"
    work = Task(WORK, retry=Retry(max_attempts=1))
    then = Task(WORK)


class Items(Workflow):
    name = "revoke_items"
    ship = FanOut(
        WORK, items=lambda ctx: ["a", "b"], key=lambda item: item, retry=Retry(max_attempts=1)
    )


class Undone(Workflow):
    name = "revoke_undone"
    reserve = Task(WORK, compensate=UNDO)
    charge = Task(BOOM)


class Limited(Workflow):
    name = "revoke_limited"
    charge = Task(NOOP, concurrency_key=by_customer, max_concurrent=1)


def step_of(run: Run, name: str = "work") -> Step:
    return Step.objects.get(run=run, name=name)


def running(run: Run, name: str = "work", owner: str = "wedged-worker") -> Lease:
    lease = claim_step(step_of(run, name).pk, owner)
    assert isinstance(lease, Lease)
    return lease


def events(run: Run, kind: str) -> list[dict]:
    return [event.payload for event in Event.objects.filter(run=run, type=kind).order_by("id")]


def test_a_revoked_step_is_ready_again_and_keeps_its_only_attempt():
    run = workflows.start_run(Single)
    lease = running(run)
    operator = User.objects.create_user("operator")

    revoked = workflows.revoke_lease(step_of(run), reason="worker wedged", user=operator)

    assert isinstance(revoked, Step)
    assert (revoked.status, revoked.attempt, revoked.max_attempts) == ("ready", 1, 2)
    assert (revoked.lease_owner, revoked.lease_expires_at) == ("", None)
    assert revoked.failure_class == "revoked"
    assert revoked.error == {
        "code": "revoked",
        "message": "attempt 1 of step 'work' by 'wedged-worker' revoked by operator: worker wedged",
        "by": "operator",
        "reason": "worker wedged",
        "attempt": 1,
        "owner": "wedged-worker",
        "failure_class": "revoked",
    }
    [payload] = events(run, "lease.revoked")
    assert payload == {
        "kind": "step",
        "unit": revoked.pk,
        "attempt": 1,
        "owner": "wedged-worker",
        "by": "operator",
        "reason": "worker wedged",
        "failure_class": "revoked",
        "status": "ready",
    }
    assert Event.objects.filter(run=run, type="step.ready", step=revoked).count() == 2
    with pytest.raises(LeaseLost) as lost:
        complete_work(lease, "late")  # the wedged worker's late result
    assert not isinstance(lost.value, RunCancelled)
    assert events(run, "lease.lost")[-1]["action"] == "completion"

    run_pending()  # the one attempt the policy allows was given back: it runs again
    work = step_of(run)
    assert (work.status, work.attempt, work.output) == ("completed", 2, "work")
    assert Run.objects.get(pk=run.pk).status == "completed"


def test_the_revoked_workers_heartbeat_raises_lease_lost():
    run = workflows.start_run(Single)
    lease = running(run)
    heartbeat(lease)
    workflows.revoke_lease(step_of(run).pk)
    with pytest.raises(LeaseLost, match=r"heartbeat of step 'work' attempt 1 .* rejected"):
        heartbeat(lease)
    assert events(run, "lease.lost")[-1]["action"] == "heartbeat"
    assert events(run, "lease.revoked")[0]["by"] is None  # trusted code: the system


def test_a_newer_attempt_is_not_touched_by_the_old_workers_writes():
    run = workflows.start_run(Single)
    old = running(run)
    workflows.revoke_lease(step_of(run))
    new = running(run, owner="healthy-worker")
    assert new.attempt == 2
    with pytest.raises(LeaseLost):
        complete_work(old, "late")
    complete_work(new, "fresh")
    assert (step_of(run).status, step_of(run).output) == ("completed", "fresh")


def test_a_running_item_is_revoked_by_its_step_and_key_or_by_itself():
    run = workflows.start_run(Items)
    ship = step_of(run, "ship")
    first, second = FanOutItem.objects.filter(step=ship).order_by("index")
    first_lease = claim(ITEM, first.pk, "wedged-worker")
    second_lease = claim(ITEM, second.pk, "wedged-worker")

    by_key = workflows.revoke_lease(ship, item="a", reason="stuck")
    by_item = workflows.revoke_lease(second)

    assert isinstance(by_key, FanOutItem) and isinstance(by_item, FanOutItem)
    assert [(i.key, i.status, i.max_attempts, i.failure_class) for i in (by_key, by_item)] == [
        ("a", "ready", 2, "revoked"),
        ("b", "ready", 2, "revoked"),
    ]
    assert [(p["kind"], p["item"]) for p in events(run, "lease.revoked")] == [
        ("item", "a"),
        ("item", "b"),
    ]
    assert step_of(run, "ship").items_failed == 0
    for lease in (first_lease, second_lease):
        with pytest.raises(LeaseLost):
            complete_work(lease, "late")
    run_pending()
    assert Run.objects.get(pk=run.pk).status == "completed"
    assert sorted(FanOutItem.objects.filter(step=ship).values_list("attempt", flat=True)) == [
        2,
        2,
    ]


def test_a_running_compensation_is_revoked_and_runs_again():
    run = workflows.start_run(Undone)
    run_pending(max_rounds=1)  # reserve completed, charge failed: the compensation is ready
    record = CompensationRecord.objects.get(run=run)
    assert record.status == "ready"
    lease = claim(COMPENSATION, record.pk, "wedged-worker")

    revoked = workflows.revoke_lease(step_of(run, "reserve"), compensation=True)

    assert isinstance(revoked, CompensationRecord)
    assert (revoked.status, revoked.failure_class) == ("ready", "revoked")
    assert events(run, "lease.revoked")[0]["kind"] == "compensation"
    with pytest.raises(LeaseLost):
        complete_work(lease, None)
    run_pending()
    assert Run.objects.get(pk=run.pk).status == "compensated"
    assert UNDONE == ["reserve"]


def test_only_a_running_attempt_can_be_revoked_and_a_refusal_writes_nothing():
    run = workflows.start_run(Single)
    ready = step_of(run)
    with pytest.raises(InvalidTransition, match="step 'work': step is ready; revoke needs running"):
        workflows.revoke_lease(ready)
    run_pending()
    with pytest.raises(InvalidTransition, match="step is completed; revoke needs running"):
        workflows.revoke_lease(ready)
    assert step_of(run).version == Step.objects.get(pk=ready.pk).version
    assert not Event.objects.filter(run=run, type="lease.revoked").exists()

    items = workflows.start_run(Items)
    ship = step_of(items, "ship")
    assert ship.status == "running"
    with pytest.raises(InvalidTransition, match="fan-out step holds no lease itself"):
        workflows.revoke_lease(ship)
    with pytest.raises(InvalidTransition, match="item 'a' of step 'ship': item is ready"):
        workflows.revoke_lease(ship, item="a")
    with pytest.raises(StepNotFound, match="step 'ship' has no item 'zz'"):
        workflows.revoke_lease(ship, item="zz")
    with pytest.raises(StepNotFound, match="step 'ship' has no compensation"):
        workflows.revoke_lease(ship, compensation=True)
    with pytest.raises(workflows.InvalidInput, match="revoke reason must be a string"):
        workflows.revoke_lease(ship, reason=None)


def test_revoking_twice_is_refused_the_second_time():
    run = workflows.start_run(Single)
    running(run)
    workflows.revoke_lease(step_of(run))
    with pytest.raises(InvalidTransition, match="step is ready"):
        workflows.revoke_lease(step_of(run))
    assert len(events(run, "lease.revoked")) == 1


def test_a_paused_runs_revoked_step_waits_for_the_resume(recording):
    run = workflows.start_run(Single)
    recording.clear()
    running(run)
    workflows.pause_run(run)
    workflows.revoke_lease(step_of(run))
    assert step_of(run).status == "ready"
    assert recording == []  # not dispatched while paused
    workflows.resume_run(run)
    assert [(work.kind, work.unit_id) for work in recording] == [(STEP, step_of(run).pk)]


def test_revoking_in_a_cancelling_run_lets_the_cancel_finish():
    run = workflows.start_run(Single)
    running(run)
    workflows.cancel_run(run)  # waits for the running attempt
    assert Run.objects.get(pk=run.pk).status == "cancelling"
    revoked = workflows.revoke_lease(step_of(run))
    assert revoked.status == "cancelled"
    assert events(run, "lease.revoked")[0]["status"] == "cancelled"
    assert Run.objects.get(pk=run.pk).status == "cancelled"


def test_a_revoke_frees_the_concurrency_slot_for_held_work():
    first = workflows.start_run(Limited, {"customer": 1})
    second = workflows.start_run(Limited, {"customer": 1})
    running(first, "charge")
    with pytest.raises(WorkHeld):
        running(second, "charge", owner="other")
    assert step_of(second, "charge").held_on == "concurrency:customer:1"
    workflows.revoke_lease(step_of(first, "charge"))
    assert step_of(second, "charge").held_on == ""
    assert (
        not ConcurrencySlot.objects.filter(key="customer:1", holder_attempt=1)
        .exclude(holder_kind="")
        .exists()
    )


@pytest.mark.django_db(transaction=True)
def test_a_revoke_racing_the_completion_keeps_one_story(concurrently):
    """Real connections: the revoke and the worker's completion each take the run's lock;
    whichever commits first wins, the other is refused."""
    outcomes = set()
    for round_number in range(6):
        run = workflows.start_run(Single, {"round": round_number})
        lease = running(run)
        completed, revoked = concurrently(
            partial(complete_work, lease, "done"),
            partial(workflows.revoke_lease, step_of(run), reason="race"),
        )
        work = step_of(run)
        if isinstance(completed, LeaseLost):  # the revoke won
            assert isinstance(revoked, Step), revoked
            assert (work.status, work.failure_class) == ("ready", "revoked")
            assert len(events(run, "lease.lost")) == 1
            outcomes.add("revoked")
        else:  # the completion won; the revoke found nothing running
            assert not isinstance(completed, Exception), completed
            assert isinstance(revoked, InvalidTransition), revoked
            assert work.status == "completed"
            assert not events(run, "lease.revoked")
            outcomes.add("completed")
    assert outcomes  # each round told one story; which one is the scheduler's choice


@pytest.mark.django_db(transaction=True)
def test_a_revoke_is_not_defeated_by_heartbeats_racing_it(concurrently):
    """A heartbeat takes no run lock and moves the row's version; the revoke reads again."""
    run = workflows.start_run(Single)
    lease = running(run)

    def beat_until_lost() -> int:
        for beats in range(5_000):
            try:
                heartbeat(lease)
            except LeaseLost:
                return beats
        raise AssertionError("the heartbeats never lost their lease")

    beats, revoked = concurrently(beat_until_lost, partial(workflows.revoke_lease, step_of(run)))
    assert isinstance(revoked, Step), revoked
    assert isinstance(beats, int)
    assert step_of(run).status == "ready"


def test_explain_offers_the_revoke_of_a_running_step_only():
    run = workflows.start_run(Single)
    offered = [a for a in workflows.explain(run).allowed_actions if a.verb == "revoke"]
    assert offered == []  # ready: nothing to revoke
    running(run)
    [revoke] = [a for a in workflows.explain(run).allowed_actions if a.verb == "revoke"]
    assert (revoke.step, revoke.allowed, revoke.reason) == ("work", True, None)
    assert revoke.step_id == step_of(run).pk
