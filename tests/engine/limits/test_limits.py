"""Limits enforced by claims: concurrency keys, rate limits, priority, routes served."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone

import workflows
from tests.support.handlers import NOOP
from tests.support.runs import run_inline
from workflows import DefinitionError, FanOut, StaleState, Task, Workflow
from workflows.definitions.limits import RateLimit
from workflows.engine import STEP, claim_step, complete_work, fail_attempt
from workflows.engine.claims import claim
from workflows.engine.limits.slots import Holder
from workflows.engine.routing import CAPABILITIES_ENV, QUEUES_ENV
from workflows.engine.sql.limit_rows import FreeSlot, take_slot
from workflows.errors import PermanentError, WorkHeld
from workflows.models import ConcurrencySlot, Event, RateBucket, Step, Timer
from workflows.queries import undispatched_unit
from workflows.testing import run_pending
from workflows.workers.scanners import nudge_held_work, reclaim_expired_leases, redispatch_unclaimed

pytestmark = pytest.mark.django_db


def by_customer(ctx):
    return f"customer:{ctx.input['customer']}"


def broken_key(ctx):
    return ctx.input["missing"]


class PerCustomer(Workflow):
    name = "limits_per_customer"
    charge = Task(NOOP, concurrency_key=by_customer, max_concurrent=1)


class PairPerCustomer(Workflow):
    name = "limits_pair_per_customer"
    charge = Task(
        NOOP,
        concurrency_key=by_customer,
        max_concurrent=2,
        timeout=timedelta(seconds=30),
    )


class BrokenKey(Workflow):
    name = "limits_broken_key"
    charge = Task(NOOP, concurrency_key=broken_key)


class Throttled(Workflow):
    name = "limits_throttled"
    call = Task(NOOP, rate_limit="2/m")


class Chained(Workflow):
    name = "limits_chained"
    first = Task(NOOP)
    second = Task(NOOP, concurrency_key=by_customer)


class Plain(Workflow):
    name = "limits_plain"
    work = Task(NOOP)


class Urgent(Workflow):
    name = "limits_urgent"
    work = Task(NOOP, priority=50)


class OnGpu(Workflow):
    name = "limits_on_gpu"
    render = Task(NOOP, queue="gpu", requires={"cuda"})


def step_of(run, name: str) -> Step:
    return Step.objects.get(run=run, name=name)


def test_a_second_attempt_with_the_same_key_is_held_until_the_first_ends():
    first = workflows.start_run(PerCustomer, {"customer": 7})
    second = workflows.start_run(PerCustomer, {"customer": 7})
    lease = claim_step(step_of(first, "charge").pk, "worker-a")

    with pytest.raises(WorkHeld, match="concurrency:customer:7"):
        claim_step(step_of(second, "charge").pk, "worker-b")
    held = step_of(second, "charge")
    assert (held.status, held.held_on, held.attempt) == ("ready", "concurrency:customer:7", 0)
    assert Event.objects.filter(run=second, type="step.held").count() == 1

    complete_work(lease, None)
    released = step_of(second, "charge")
    assert (released.status, released.held_on) == ("ready", "")
    assert claim_step(released.pk, "worker-b").attempt == 1


def test_different_keys_do_not_share_slots():
    one = workflows.start_run(PerCustomer, {"customer": 1})
    other = workflows.start_run(PerCustomer, {"customer": 2})
    claim_step(step_of(one, "charge").pk, "worker-a")
    assert claim_step(step_of(other, "charge").pk, "worker-b").attempt == 1


def test_max_concurrent_counts_every_holder_of_the_key():
    runs = [workflows.start_run(PairPerCustomer, {"customer": 3}) for _ in range(3)]
    claim_step(step_of(runs[0], "charge").pk, "worker-a")
    claim_step(step_of(runs[1], "charge").pk, "worker-b")
    with pytest.raises(WorkHeld):
        claim_step(step_of(runs[2], "charge").pk, "worker-c")
    assert ConcurrencySlot.objects.filter(key="customer:3").count() == 2


def test_a_slot_is_taken_only_while_free_even_at_its_current_version():
    """What a claim that read a slot free before its holder committed meets: on
    PostgreSQL the lock hands it the newest row at its newest version (see
    ``limit_rows.take_slot``), so the compare-and-set must judge freedom itself."""
    first = workflows.start_run(PerCustomer, {"customer": 11})
    second = workflows.start_run(PerCustomer, {"customer": 11})
    lease = claim_step(step_of(first, "charge").pk, "worker-a")
    slot = ConcurrencySlot.objects.get(key="customer:11")
    taker = Holder("step", step_of(second, "charge").pk, 1)
    with transaction.atomic():
        assert not take_slot(FreeSlot(slot.pk, slot.version), taker.columns())
    assert ConcurrencySlot.objects.get(pk=slot.pk).holder_id == lease.unit_id
    fail_attempt(lease, PermanentError("no"))  # the holder no longer runs: the slot is free
    slot.refresh_from_db()
    with transaction.atomic():
        assert take_slot(FreeSlot(slot.pk, slot.version), taker.columns())
    taken = ConcurrencySlot.objects.get(pk=slot.pk)
    assert (taken.holder_id, taken.version) == (taker.unit_id, slot.version + 1)


def test_a_failed_attempt_frees_its_slot_for_the_held_unit():
    first = workflows.start_run(PerCustomer, {"customer": 5})
    second = workflows.start_run(PerCustomer, {"customer": 5})
    lease = claim_step(step_of(first, "charge").pk, "worker-a")
    with pytest.raises(WorkHeld):
        claim_step(step_of(second, "charge").pk, "worker-b")
    fail_attempt(lease, PermanentError("no"))
    assert step_of(second, "charge").held_on == ""
    run_pending()
    assert step_of(second, "charge").status == "completed"


def test_a_crashed_holders_slot_comes_back_when_its_lease_is_reclaimed():
    first = workflows.start_run(PairPerCustomer, {"customer": 9})
    second = workflows.start_run(PairPerCustomer, {"customer": 9})
    third = workflows.start_run(PairPerCustomer, {"customer": 9})
    claim_step(step_of(first, "charge").pk, "crashed-a")
    claim_step(step_of(second, "charge").pk, "crashed-b")
    with pytest.raises(WorkHeld):
        claim_step(step_of(third, "charge").pk, "worker-c")

    reclaimed = reclaim_expired_leases(now=timezone.now() + timedelta(minutes=1))
    assert reclaimed.done == 2
    assert step_of(third, "charge").held_on == ""
    run_pending()
    for run in (first, second, third):
        run.refresh_from_db()
        assert run.status == "completed"


def test_a_key_that_cannot_be_computed_fails_the_step_without_running_it():
    run = run_inline(BrokenKey, {})
    step = step_of(run, "charge")
    assert (run.status, step.status) == ("failed", "failed")
    assert "concurrency_key of step 'charge' failed" in step.error["message"]
    assert step.attempt == 1


def test_a_chaining_worker_takes_limited_work_only_when_its_limit_admits_it():
    free = workflows.start_run(Chained, {"customer": 4})
    lease = claim_step(step_of(free, "first").pk, "worker-a")
    chained = complete_work(lease, None, claim_next=True)
    assert chained is not None and chained.step_name == "second"
    assert ConcurrencySlot.objects.get(key="customer:4").holder_id == chained.unit_id

    # The key's one place is taken by the chained attempt: the next run's step is not
    # chained but made ready for a claim, which holds it.
    taken = workflows.start_run(Chained, {"customer": 4})
    lease = claim_step(step_of(taken, "first").pk, "worker-b")
    assert complete_work(lease, None, claim_next=True) is None
    second = step_of(taken, "second")
    assert (second.status, second.held_on) == ("ready", "")
    with pytest.raises(WorkHeld):
        claim_step(second.pk, "worker-b")


def test_a_rate_limit_holds_the_starts_over_it_with_a_release_timer():
    runs = [workflows.start_run(Throttled, {}) for _ in range(3)]
    run_pending()
    statuses = sorted(step_of(run, "call").status for run in runs)
    assert statuses == ["completed", "completed", "ready"]
    held = Step.objects.get(run__in=runs, name="call", status="ready")
    assert held.held_on == "rate:task:limits_throttled.call"
    timer = Timer.objects.get(step=held, kind="release", status="scheduled")
    wait = (timer.due_at - timezone.now()).total_seconds()
    assert 50 < wait <= 61

    # A minute passes for the bucket: its two starts leave the window.
    bucket = RateBucket.objects.get(key="task:limits_throttled.call")
    bucket.starts = [moment - 61 for moment in bucket.starts]
    bucket.save()
    run_pending(until=timer.due_at)
    held.refresh_from_db()
    assert (held.status, held.held_on) == ("completed", "")


def test_a_queue_rate_limit_counts_every_task_of_the_queue(settings):
    settings.WORKFLOWS = {**settings.WORKFLOWS, "QUEUE_RATE_LIMITS": {"default": "1/h"}}
    first = workflows.start_run(Plain, {})
    second = workflows.start_run(Urgent, {})
    run_pending()
    done = Step.objects.filter(run__in=[first, second], status="completed").count()
    assert done == 1
    assert Step.objects.get(run__in=[first, second], status="ready").held_on == (
        "rate:queue:default"
    )


def test_the_highest_priority_ready_step_of_the_route_is_claimed_first():
    low = workflows.start_run(Plain, {})
    middle = workflows.start_run(Plain, {}, priority=5)
    high = workflows.start_run(Urgent, {})  # the task's own priority, 50
    lease = claim(STEP, step_of(low, "work").pk, "worker-a")
    assert lease.run_id == high.pk
    lease = claim(STEP, step_of(low, "work").pk, "worker-a")
    assert lease.run_id == middle.pk
    assert claim(STEP, step_of(low, "work").pk, "worker-a").run_id == low.pk


def test_a_claim_refuses_a_route_this_worker_does_not_serve(monkeypatch):
    run = workflows.start_run(OnGpu, {})
    step = step_of(run, "render")
    assert (step.queue, step.requires) == ("gpu", "cuda")
    monkeypatch.setenv(QUEUES_ENV, "gpu")
    monkeypatch.setenv(CAPABILITIES_ENV, "")
    with pytest.raises(StaleState, match="queue 'gpu' requiring cuda"):
        claim_step(step.pk, "worker-without-cuda")
    monkeypatch.setenv(CAPABILITIES_ENV, "cuda,avx")
    assert claim_step(step.pk, "worker-with-cuda").attempt == 1


@pytest.mark.parametrize(
    ("text", "count", "seconds"),
    [
        ("10/s", 10, 1),
        ("100/m", 100, 60),
        ("5/h", 5, 3600),
        ("3/10s", 3, 10),
        ("7 / day", 7, 86400),
    ],
)
def test_rate_limits_parse(text, count, seconds):
    rate = RateLimit.parse(text)
    assert (rate.count, rate.period.total_seconds()) == (count, seconds)


@pytest.mark.parametrize("text", ["10", "10/ms", "0/s", "x/s", "2000/s", "10/0s"])
def test_bad_rate_limits_are_refused_with_the_shapes_allowed(text):
    with pytest.raises(ValueError, match="rate limit"):
        RateLimit.parse(text)


@pytest.mark.parametrize(
    ("node", "message"),
    [
        (Task(NOOP, max_concurrent=2), "max_concurrent= needs a concurrency_key"),
        (Task(NOOP, concurrency_key="x"), "concurrency_key= must be callable"),
        (Task(NOOP, concurrency_key=by_customer, max_concurrent=0), "max_concurrent"),
        (Task(NOOP, rate_limit="fast"), "rate limit must look like"),
        (Task(NOOP, queue="no spaces"), "queue must be"),
        (Task(NOOP, requires={""}), "each of requires="),
        (Task(NOOP, priority=5000), "priority must be an integer from -1000"),
        (
            FanOut(NOOP, items=lambda ctx: [], batch_size=2, rate_limit="1/s"),
            "batch_size= cannot be combined with concurrency_key= or rate_limit=",
        ),
    ],
)
def test_bad_limit_declarations_name_the_step_and_the_problem(node, message):
    with pytest.raises(DefinitionError, match=message) as raised:
        type("Bad", (Workflow,), {"name": "limits_bad", "step": node}, register=False)
    assert "step 'step'" in str(raised.value)


def test_the_recovery_pass_resends_work_whose_hold_was_not_handed_on(recording):
    first = workflows.start_run(PerCustomer, {"customer": 8})
    second = workflows.start_run(PerCustomer, {"customer": 8})
    claim_step(step_of(first, "charge").pk, "worker-a")
    with pytest.raises(WorkHeld):
        claim_step(step_of(second, "charge").pk, "worker-b")
    recording.clear()

    # The holder leaves running by a path that does not hand its slot on.
    Step.objects.filter(pk=step_of(first, "charge").pk).update(status="cancelled")
    result = nudge_held_work()
    assert (result.found, result.done) == (1, 1)
    assert [(work.kind.name, work.unit_id) for work in recording] == [
        ("step", step_of(second, "charge").pk)
    ]
    lease = claim_step(step_of(second, "charge").pk, "worker-b")
    assert lease.attempt == 1
    assert step_of(second, "charge").held_on == ""


def test_held_work_is_not_redispatched_nor_reported_undispatched():
    first = workflows.start_run(PerCustomer, {"customer": 6})
    second = workflows.start_run(PerCustomer, {"customer": 6})
    claim_step(step_of(first, "charge").pk, "worker-a")
    with pytest.raises(WorkHeld):
        claim_step(step_of(second, "charge").pk, "worker-b")
    later = timezone.now() + timedelta(hours=1)
    assert redispatch_unclaimed(now=later).found == 0
    assert not Step.objects.filter(undispatched_unit(STEP, later)).exists()


def test_a_nudge_whose_unit_was_taken_takes_the_best_ready_unit_of_its_route():
    # Three nudges queued in the order the work became ready: low, middle, high.
    low = workflows.start_run(Plain, {})
    middle = workflows.start_run(Plain, {}, priority=5)
    high = workflows.start_run(Urgent, {})
    nudges = [step_of(run, "work").pk for run in (low, middle, high)]
    taken = [claim(STEP, step_id, "worker-a").run_id for step_id in nudges]
    # The first nudge took the highest; the last, finding its unit taken, took the one
    # the first nudge named: none is left waiting for a redispatch.
    assert taken == [high.pk, middle.pk, low.pk]
    with pytest.raises(StaleState, match="is running, not ready"):
        claim(STEP, nudges[0], "worker-a")


def test_a_hold_names_the_limit_that_refused_the_start(settings):
    settings.WORKFLOWS = {**settings.WORKFLOWS, "QUEUE_RATE_LIMITS": {"default": "1/h"}}
    first = workflows.start_run(Throttled, {})
    second = workflows.start_run(Throttled, {})
    run_pending()
    # The task's own limit (2/m) allows the second start; the queue's (1/h) does not.
    held = Step.objects.get(run__in=[first, second], status="ready")
    assert held.held_on == "rate:queue:default"
