"""External work: ``Task(external=True)`` claimed, heartbeaten, completed and failed by
workers outside the process, each use fenced by a signed lease token."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.core import signing
from django.db.models import F
from django.utils import timezone

import workflows
from tests.support.handlers import NOOP
from tests.support.threads import run_concurrently
from workflows import (
    DefinitionError,
    InvalidInput,
    LeaseLost,
    Retry,
    RunCancelled,
    Task,
    Workflow,
)
from workflows.engine.external.tokens import REFUSED, SALT
from workflows.models import Event, Frame, Step
from workflows.testing import run_pending

pytestmark = pytest.mark.django_db

HERE = "tests.workers.test_external_work"


def total_of(ctx):
    return {"total": ctx.steps["charge"].output["charged"] * 2}


class Payments(Workflow):
    name = "external_payments"
    prepare = Task(NOOP)
    charge = Task(
        external=True,
        queue="payments",
        retry=Retry(max_attempts=3, initial_interval=timedelta(0)),
        timeout=timedelta(seconds=30),
    )
    report = Task(f"{HERE}.total_of")


class GpuWork(Workflow):
    name = "external_gpu"
    render = Task(external=True, queue="gpu", requires={"cuda"})


def claimed_one(**options):
    jobs = workflows.claim_external(["payments"], worker="go-1", **options)
    assert len(jobs) == 1
    return jobs[0]


def started():
    run = workflows.start_run(Payments, {"order": 7})
    run_pending()
    return run


def test_an_external_step_waits_for_an_outside_worker_and_the_run_goes_on_after_it():
    run = started()
    step = Step.objects.get(run=run, name="charge")
    assert step.status == "ready"
    assert step.requires == "@external"
    job = claimed_one()
    assert job.run == run.pk
    assert job.step == "charge"
    assert job.input == {"order": 7}
    assert job.steps == {"prepare": None}
    assert job.attempt == 1
    assert job.max_attempts == 3
    assert job.idempotency_key == f"{run.pk}/charge"
    assert job.lease_expires_at > timezone.now()
    assert job.timeout == 30
    assert workflows.complete_external(job.lease, {"charged": 21}) is True
    run_pending()
    run.refresh_from_db()
    assert run.status == "completed"
    assert run.output["report"] == {"total": 42}


def test_the_in_process_runner_never_runs_an_external_step():
    run = started()
    run_pending()
    assert Step.objects.get(run=run, name="charge").status == "ready"


def test_a_worker_gets_only_what_its_queues_and_capabilities_cover():
    workflows.start_run(GpuWork)
    assert workflows.claim_external(["gpu"], worker="w") == []
    assert workflows.claim_external(["payments"], worker="w", capabilities=["cuda"]) == []
    (job,) = workflows.claim_external(["gpu"], worker="w", capabilities=["cuda"])
    assert job.step == "render"


def test_two_claims_never_get_the_same_unit_and_limit_bounds_a_claim():
    runs = [started() for _ in range(3)]
    first = workflows.claim_external("payments", worker="a", limit=2)
    second = workflows.claim_external("payments", worker="b", limit=2)
    assert len(first) == 2 and len(second) == 1
    assert {job.run for job in first + second} == {run.pk for run in runs}
    assert workflows.claim_external("payments", worker="c") == []


def test_higher_priority_is_claimed_first():
    low = workflows.start_run(Payments, {}, priority=1)
    high = workflows.start_run(Payments, {}, priority=9)
    run_pending()
    assert claimed_one().run == high.pk
    assert claimed_one().run == low.pk


def test_a_heartbeat_extends_the_lease_and_reports_progress():
    started()
    job = claimed_one()
    Step.objects.filter(name="charge").update(
        lease_expires_at=timezone.now() + timedelta(seconds=2)
    )
    expires = workflows.heartbeat_external(job.lease, progress=(3, 10), message="3 of 10 cards")
    assert expires > timezone.now() + timedelta(seconds=20)
    step = Step.objects.get(name="charge")
    assert (step.progress_done, step.progress_total) == (3, 10)
    assert step.progress_message == "3 of 10 cards"


def test_log_lines_are_frames_of_the_attempt():
    started()
    job = claimed_one()
    workflows.log_external(job.lease, "charging card")
    workflows.log_external(job.lease, "card declined once", stream="stderr")
    frames = list(Frame.objects.order_by("seq").values_list("stream", "text", "attempt"))
    assert frames == [("stdout", "charging card", 1), ("stderr", "card declined once", 1)]


def test_completing_twice_with_the_same_output_is_a_no_op_and_with_another_is_refused():
    started()
    job = claimed_one()
    assert workflows.complete_external(job.lease, {"charged": 1}) is True
    assert workflows.complete_external(job.lease, {"charged": 1}) is False
    with pytest.raises(LeaseLost):
        workflows.complete_external(job.lease, {"charged": 2})
    assert Event.objects.filter(type="step.completed", step__name="charge").count() == 1


def test_a_failure_is_retried_per_policy_and_the_old_lease_is_useless():
    run = started()
    job = claimed_one()
    assert workflows.fail_external(job.lease, "card network down") == "retry_scheduled"
    assert workflows.fail_external(job.lease, "card network down") == "retry_scheduled"
    run_pending()  # the retry timer fires: ready again
    retry = claimed_one()
    assert retry.attempt == 2
    assert retry.idempotency_key == job.idempotency_key
    for stale in (
        lambda: workflows.heartbeat_external(job.lease),
        lambda: workflows.complete_external(job.lease, 1),
        lambda: workflows.log_external(job.lease, "late"),
    ):
        with pytest.raises(LeaseLost, match="not valid"):
            stale()
    step = Step.objects.get(run=run, name="charge")
    assert step.failure_class == "transient"
    assert step.error["message"] == "card network down"


def test_a_permanent_failure_fails_the_run():
    run = started()
    job = claimed_one()
    assert workflows.fail_external(job.lease, "card stolen", permanent=True) == "failed"
    run.refresh_from_db()
    assert run.status == "failed"
    assert Step.objects.get(run=run, name="charge").failure_class == "permanent"


def test_a_timeout_failure_is_classed_timeout():
    run = started()
    job = claimed_one()
    workflows.fail_external(job.lease, "took too long", failure_class="timeout")
    assert Step.objects.get(run=run, name="charge").failure_class == "timeout"


def test_an_expired_lease_is_lost_even_before_anyone_reclaims_it():
    started()
    job = claimed_one()
    Step.objects.filter(name="charge").update(
        lease_expires_at=timezone.now() - timedelta(seconds=1)
    )
    before = Step.objects.get(name="charge")
    with pytest.raises(LeaseLost):
        workflows.heartbeat_external(job.lease)
    with pytest.raises(LeaseLost):
        workflows.complete_external(job.lease, {"charged": 1})
    after = Step.objects.get(name="charge")
    assert (after.status, after.version) == ("running", before.version)


def test_a_revoke_makes_the_lease_useless_at_once():
    run = started()
    job = claimed_one()
    revoked = workflows.revoke_lease(
        Step.objects.get(run=run, name="charge"), expected_attempt=1, reason="stuck"
    )
    assert revoked.revoked
    with pytest.raises(LeaseLost):
        workflows.heartbeat_external(job.lease)
    run_pending()
    assert claimed_one().attempt == 2


def test_a_cancelled_run_ends_the_attempt_at_its_next_heartbeat():
    run = started()
    job = claimed_one()
    workflows.cancel_run(run)
    with pytest.raises(RunCancelled):
        workflows.heartbeat_external(job.lease)
    step = Step.objects.get(run=run, name="charge")
    assert step.failure_class == "cancelled"
    with pytest.raises(LeaseLost):
        workflows.complete_external(job.lease, 1)


@pytest.mark.parametrize(
    "token",
    [
        "",
        "garbage",
        None,
        12,
        "x" * 5000,
        signing.dumps({"r": "not-a-uuid", "s": 1, "a": 1, "o": "x"}, salt=SALT),
        signing.dumps({"s": 1}, salt=SALT),
        signing.dumps({"r": "0" * 32, "s": 1, "a": 1, "o": "x"}, salt="another.salt"),
    ],
    ids=["empty", "garbage", "none", "number", "huge", "bad-run", "missing", "other-salt"],
)
def test_a_forged_or_malformed_lease_is_refused_without_saying_why(token):
    started()
    claimed_one()
    before = list(Step.objects.values_list("version", flat=True))
    for use in (
        lambda: workflows.heartbeat_external(token),
        lambda: workflows.complete_external(token, 1),
        lambda: workflows.fail_external(token, "x"),
        lambda: workflows.log_external(token, "x"),
    ):
        with pytest.raises(LeaseLost) as refused:
            use()
        assert str(refused.value) == REFUSED
    assert list(Step.objects.values_list("version", flat=True)) == before


def test_a_lease_for_another_attempt_of_the_same_step_is_refused():
    run = started()
    job = claimed_one()
    step = Step.objects.get(run=run, name="charge")
    forged = signing.dumps(
        {"r": str(run.pk), "s": step.pk, "a": 2, "o": "external:go-1"}, salt=SALT
    )
    with pytest.raises(LeaseLost):
        workflows.complete_external(forged, 1)
    assert workflows.complete_external(job.lease, 1) is True


@pytest.mark.parametrize(
    ("call", "names"),
    [
        (lambda: workflows.claim_external([], worker="w"), "queues"),
        (lambda: workflows.claim_external(["bad queue"], worker="w"), "queues"),
        (lambda: workflows.claim_external("payments", worker=""), "worker"),
        (lambda: workflows.claim_external("payments", worker="a b"), "worker"),
        (lambda: workflows.claim_external("payments", worker="w", limit=0), "limit"),
        (lambda: workflows.claim_external("payments", worker="w", limit=101), "limit"),
        (lambda: workflows.claim_external("payments", worker="w", wait=61), "wait"),
        (
            lambda: workflows.claim_external("payments", worker="w", capabilities=["a,b"]),
            "capabilities",
        ),
    ],
)
def test_bad_claims_are_refused_naming_the_problem(call, names):
    with pytest.raises(InvalidInput, match=names):
        call()


def test_bad_reports_and_outcomes_are_refused_and_write_nothing():
    started()
    job = claimed_one()
    version = Step.objects.get(name="charge").version
    with pytest.raises(InvalidInput, match="stream"):
        workflows.log_external(job.lease, "x", stream="video")
    with pytest.raises(InvalidInput, match="progress"):
        workflows.heartbeat_external(job.lease, progress="half")
    with pytest.raises(InvalidInput, match="done"):
        workflows.heartbeat_external(job.lease, progress=-1)
    with pytest.raises(InvalidInput, match="output"):
        workflows.complete_external(job.lease, float("nan"))
    with pytest.raises(InvalidInput, match="failure_class"):
        workflows.fail_external(job.lease, "x", failure_class="revoked")
    with pytest.raises(InvalidInput, match="error"):
        workflows.fail_external(job.lease, " ")
    assert Step.objects.get(name="charge").version == version


@pytest.mark.django_db(transaction=True)
def test_a_claim_waits_for_work_made_ready_meanwhile():
    def make_work():
        time.sleep(0.5)
        run = workflows.start_run(Payments, {})
        run_pending()
        return run

    jobs, run = run_concurrently(
        lambda: workflows.claim_external("payments", worker="w", wait=30), make_work
    )
    assert [job.run for job in jobs] == [run.pk]


@pytest.mark.parametrize(
    ("options", "problem"),
    [
        ({"external": True, "handler": NOOP}, "has no handler"),
        ({"external": True, "transactional": True}, "cannot be transactional"),
        ({"external": "yes"}, "external must be True or False"),
        ({}, "Task needs a handler"),
    ],
)
def test_bad_external_definitions_are_refused(options, problem):
    handler = options.pop("handler", None)
    with pytest.raises(DefinitionError, match=problem):

        class Bad(Workflow, register=False):
            name = "bad_external"
            step = Task(handler, **options)


def test_the_compensation_of_an_external_step_runs_in_process():
    class Refund(Workflow, register=False):
        name = "external_refund"
        charge = Task(external=True, queue="payments", compensate=NOOP)

    assert Refund.unit_columns("charge", 0, compensation=True)["requires"] == ""
    assert Refund.route_of("charge").external


def test_the_step_version_moves_with_each_use():
    started()
    job = claimed_one()
    Step.objects.filter(name="charge").update(version=F("version"))
    before = Step.objects.get(name="charge").version
    workflows.heartbeat_external(job.lease)
    assert Step.objects.get(name="charge").version == before + 1


def one_key(ctx):
    return "printer"


class OnePrinter(Workflow):
    name = "external_one_printer"
    print_it = Task(external=True, queue="printers", concurrency_key=one_key, max_concurrent=1)


def test_a_concurrency_limit_holds_external_work_until_a_slot_frees():
    first, second = (workflows.start_run(OnePrinter, {}) for _ in range(2))
    (job,) = workflows.claim_external("printers", worker="w", limit=2)
    held = Step.objects.get(run__in=[first, second], status="ready")
    assert held.held_on == "concurrency:printer"
    assert Event.objects.filter(type="step.held", step=held).count() == 1
    assert workflows.claim_external("printers", worker="w") == []
    workflows.complete_external(job.lease, {"printed": True})
    (next_job,) = workflows.claim_external("printers", worker="w")
    assert next_job.run == held.run_id
