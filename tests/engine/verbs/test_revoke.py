"""Revoke: an operator takes the lease of a running attempt; the work runs again without
using up an attempt, and the revoked worker's heartbeat and result are refused."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from unittest import mock

import pytest
from django.contrib.auth.models import User
from django.db import connection, connections

import workflows
from tests.support.events import payloads
from tests.support.handlers import BOOM, NOOP, UNDO, UNDONE, WORK
from workflows import FanOut, InvalidTransition, LeaseLost, Retry, StepNotFound, Task, Workflow
from workflows.engine import COMPENSATION, ITEM, STEP, claim, claim_step, complete_work, heartbeat
from workflows.engine.lease import Lease
from workflows.engine.verbs import revoke
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


def told(result: workflows.RevokedLease) -> tuple[bool, str | None, int]:
    """What a revoke said: whether it took the lease, why not, and which attempt."""
    return result.revoked, result.reason, result.attempt


def test_a_revoked_step_is_ready_again_and_keeps_its_only_attempt():
    run = workflows.start_run(Single)
    lease = running(run)
    operator = User.objects.create_user("operator")

    result = workflows.revoke_lease(
        step_of(run), expected_attempt=1, reason="worker wedged", user=operator
    )

    assert result == workflows.RevokedLease(True, None, 1, result.unit)
    revoked = result.unit
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
    [payload] = payloads(run, "lease.revoked")
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
    assert payloads(run, "lease.lost")[-1]["action"] == "completion"

    run_pending()  # the one attempt the policy allows was given back: it runs again
    work = step_of(run)
    assert (work.status, work.attempt, work.output) == ("completed", 2, "work")
    assert Run.objects.get(pk=run.pk).status == "completed"


def test_the_revoked_workers_heartbeat_raises_lease_lost():
    run = workflows.start_run(Single)
    lease = running(run)
    heartbeat(lease)
    workflows.revoke_lease(step_of(run).pk, expected_attempt=1)
    with pytest.raises(LeaseLost, match=r"heartbeat of step 'work' attempt 1 .* rejected"):
        heartbeat(lease)
    assert payloads(run, "lease.lost")[-1]["action"] == "heartbeat"
    assert payloads(run, "lease.revoked")[0]["by"] is None  # trusted code: the system


def test_a_newer_attempt_is_not_touched_by_the_old_workers_writes():
    run = workflows.start_run(Single)
    old = running(run)
    workflows.revoke_lease(step_of(run), expected_attempt=1)
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

    by_key = workflows.revoke_lease(ship, item="a", reason="stuck", expected_attempt=1).unit
    by_item = workflows.revoke_lease(second, expected_attempt=1).unit

    assert isinstance(by_key, FanOutItem) and isinstance(by_item, FanOutItem)
    assert [(i.key, i.status, i.max_attempts, i.failure_class) for i in (by_key, by_item)] == [
        ("a", "ready", 2, "revoked"),
        ("b", "ready", 2, "revoked"),
    ]
    assert [(p["kind"], p["item"]) for p in payloads(run, "lease.revoked")] == [
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

    result = workflows.revoke_lease(step_of(run, "reserve"), compensation=True, expected_attempt=1)
    assert result.revoked
    revoked = result.unit

    assert isinstance(revoked, CompensationRecord)
    assert (revoked.status, revoked.failure_class) == ("ready", "revoked")
    assert payloads(run, "lease.revoked")[0]["kind"] == "compensation"
    with pytest.raises(LeaseLost):
        complete_work(lease, None)
    run_pending()
    assert Run.objects.get(pk=run.pk).status == "compensated"
    assert UNDONE == ["reserve"]


def test_an_attempt_that_is_not_running_is_not_revoked_and_nothing_is_written():
    run = workflows.start_run(Single)
    ready = step_of(run)
    assert told(workflows.revoke_lease(ready, expected_attempt=1)) == (False, "not_started", 1)
    run_pending()
    assert told(workflows.revoke_lease(ready, expected_attempt=1)) == (False, "not_leased", 1)
    assert told(workflows.revoke_lease(ready, expected_attempt=2)) == (False, "not_started", 2)
    assert step_of(run).version == Step.objects.get(pk=ready.pk).version
    assert not Event.objects.filter(run=run, type="lease.revoked").exists()


def test_refusals_and_bad_arguments_raise():
    items = workflows.start_run(Items)
    ship = step_of(items, "ship")
    assert ship.status == "running"
    with pytest.raises(InvalidTransition, match="fan-out step holds no lease itself"):
        workflows.revoke_lease(ship, expected_attempt=1)
    assert workflows.revoke_lease(ship, item="a", expected_attempt=1).reason == "not_started"
    with pytest.raises(StepNotFound, match="step 'ship' has no item 'zz'"):
        workflows.revoke_lease(ship, item="zz", expected_attempt=1)
    with pytest.raises(StepNotFound, match="step 'ship' has no compensation"):
        workflows.revoke_lease(ship, compensation=True, expected_attempt=1)
    with pytest.raises(workflows.InvalidInput, match="revoke reason must be a string"):
        workflows.revoke_lease(ship, reason=None, expected_attempt=1)
    for bad in (0, -1, True, "1", None):
        with pytest.raises(workflows.InvalidInput, match="expected_attempt must be"):
            workflows.revoke_lease(ship, item="a", expected_attempt=bad)
    with pytest.raises(TypeError):
        workflows.revoke_lease(ship, item="a")  # pinned: the attempt is required


def test_a_repeated_revoke_changes_nothing_and_says_so():
    run = workflows.start_run(Single)
    running(run)
    assert workflows.revoke_lease(step_of(run), expected_attempt=1).revoked
    again = workflows.revoke_lease(step_of(run), expected_attempt=1)
    assert told(again) == (False, "already_revoked", 1)
    assert (again.unit.status, again.unit.max_attempts) == ("ready", 2)
    assert len(payloads(run, "lease.revoked")) == 1


def test_a_revoke_of_a_replaced_attempt_leaves_the_new_attempt_alone():
    """The issue's double click: attempt 1 was revoked, attempt 2 runs; a retried revoke of
    attempt 1 must not take attempt 2."""
    run = workflows.start_run(Single)
    running(run)
    workflows.revoke_lease(step_of(run), expected_attempt=1)
    fresh = running(run, owner="healthy-worker")
    assert fresh.attempt == 2
    late = workflows.revoke_lease(step_of(run), expected_attempt=1)
    assert told(late) == (False, "replaced", 1)
    work = step_of(run)
    assert (work.status, work.attempt, work.max_attempts) == ("running", 2, 2)
    assert work.lease_owner == "healthy-worker"
    assert len(payloads(run, "lease.revoked")) == 1
    complete_work(fresh, "fresh")
    assert step_of(run).status == "completed"


def test_a_paused_runs_revoked_step_waits_for_the_resume(recording):
    run = workflows.start_run(Single)
    recording.clear()
    running(run)
    workflows.pause_run(run)
    workflows.revoke_lease(step_of(run), expected_attempt=1)
    assert step_of(run).status == "ready"
    assert recording == []  # not dispatched while paused
    workflows.resume_run(run)
    assert [(work.kind, work.unit_id) for work in recording] == [(STEP, step_of(run).pk)]


def test_revoking_in_a_cancelling_run_lets_the_cancel_finish():
    run = workflows.start_run(Single)
    running(run)
    workflows.cancel_run(run)  # waits for the running attempt
    assert Run.objects.get(pk=run.pk).status == "cancelling"
    revoked = workflows.revoke_lease(step_of(run), expected_attempt=1).unit
    assert revoked.status == "cancelled"
    assert payloads(run, "lease.revoked")[0]["status"] == "cancelled"
    assert Run.objects.get(pk=run.pk).status == "cancelled"


def test_a_revoke_frees_the_concurrency_slot_for_held_work():
    first = workflows.start_run(Limited, {"customer": 1})
    second = workflows.start_run(Limited, {"customer": 1})
    running(first, "charge")
    with pytest.raises(WorkHeld):
        running(second, "charge", owner="other")
    assert step_of(second, "charge").held_on == "concurrency:customer:1"
    workflows.revoke_lease(step_of(first, "charge"), expected_attempt=1)
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
            partial(workflows.revoke_lease, step_of(run), reason="race", expected_attempt=1),
        )
        work = step_of(run)
        if isinstance(completed, LeaseLost):  # the revoke won
            assert revoked.revoked, revoked
            assert (work.status, work.failure_class) == ("ready", "revoked")
            assert len(payloads(run, "lease.lost")) == 1
            outcomes.add("revoked")
        else:  # the completion won; the revoke found nothing running
            assert not isinstance(completed, Exception), completed
            assert told(revoked) == (False, "not_leased", 1), revoked
            assert work.status == "completed"
            assert not payloads(run, "lease.revoked")
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

    beats, revoked = concurrently(
        beat_until_lost, partial(workflows.revoke_lease, step_of(run), expected_attempt=1)
    )
    assert revoked.revoked, revoked
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


@pytest.mark.django_db(transaction=True)
def test_ten_racing_revokes_of_one_attempt_revoke_it_once(concurrently):
    """The issue's race, with real connections: ten revokes pinned to attempt 1 (a double
    click, client retries). One takes the lease; the others change nothing, and when the
    fresh attempt 2 runs, ten more pinned to attempt 1 leave it alone."""
    run = workflows.start_run(Single)
    running(run)
    before = step_of(run).max_attempts

    results = concurrently(
        *[partial(workflows.revoke_lease, step_of(run).pk, expected_attempt=1)] * 10
    )

    assert not [r for r in results if isinstance(r, Exception)], results
    assert sorted(told(r) for r in results) == [(False, "already_revoked", 1)] * 9 + [
        (True, None, 1)
    ]
    assert step_of(run).max_attempts == before + 1  # bumped once
    assert len(payloads(run, "lease.revoked")) == 1

    fresh = running(run, owner="healthy-worker")
    late = concurrently(
        *[partial(workflows.revoke_lease, step_of(run).pk, expected_attempt=1)] * 10
    )
    assert [told(r) for r in late] == [(False, "replaced", 1)] * 10, late
    work = step_of(run)
    assert (work.status, work.attempt, work.max_attempts) == ("running", 2, before + 1)
    assert len(payloads(run, "lease.revoked")) == 1
    complete_work(fresh, "fresh")
    assert step_of(run).status == "completed"


@pytest.mark.django_db(transaction=True)
def test_a_late_revoke_does_not_make_the_next_attempts_claim_skip_the_step():
    """Found by the two-process race (tests/acceptance/test_revoke_two_processes.py): a
    late revoke of attempt 1 changes nothing, so it must lock nothing. It held the step's
    row, and a worker claiming attempt 2 at that instant skipped the locked row as being
    claimed (``SKIP LOCKED``), raised ``StaleState`` and dropped its nudge: the step
    stayed ready until the redispatch. Here the revoke stops after its decision, inside
    its transaction, while the claim runs. PostgreSQL: SQLite's writers take turns."""
    if not connection.features.has_select_for_update:
        pytest.skip("SQLite serialises the two transactions: no row lock to skip")
    run = workflows.start_run(Single)
    running(run)
    workflows.revoke_lease(step_of(run), expected_attempt=1)
    decided, claimed = threading.Event(), threading.Event()
    real_missed = revoke._missed

    def missed_then_hold(unit, expected: int, expected_round: int | None) -> str | None:
        why = real_missed(unit, expected, expected_round)
        decided.set()
        claimed.wait(timeout=10)
        return why

    def late_revoke() -> workflows.RevokedLease:
        try:
            return workflows.revoke_lease(step_of(run).pk, expected_attempt=1)
        finally:
            connections.close_all()

    with mock.patch.object(revoke, "_missed", missed_then_hold), ThreadPoolExecutor(1) as pool:
        late = pool.submit(late_revoke)
        assert decided.wait(timeout=10)
        try:
            fresh = claim_step(step_of(run).pk, "healthy-worker")
        finally:
            claimed.set()
        assert told(late.result(timeout=10)) == (False, "already_revoked", 1)
    assert fresh.attempt == 2
    work = step_of(run)
    assert (work.status, work.attempt, work.lease_owner) == ("running", 2, "healthy-worker")
