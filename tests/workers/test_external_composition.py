"""External steps composed with the rest of the engine: every operator verb works on an
external step, or is refused with a reason, as on a Python task; a paused run's external
work is not claimed; priority orders claims; deadlines, loops, polling, flows and
compensation treat an external step as any task. Driven through ``workflows.claim_external``
and the other verbs an outside worker's HTTP calls end in."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

import workflows
from tests.support.handlers import NOOP
from workflows import (
    InvalidTransition,
    LeaseLost,
    Loop,
    PermanentError,
    Retry,
    RunCancelled,
    Task,
    Workflow,
)
from workflows.models import CompensationRecord, Run, Step
from workflows.testing import run_pending

pytestmark = pytest.mark.django_db

HERE = "tests.workers.test_external_composition"
NO_WAIT = Retry(max_attempts=2, initial_interval=timedelta(0))


class Shipping(Workflow):
    name = "external_composition_shipping"
    pack = Task(NOOP)
    print_label = Task(external=True, queue="labels", retry=NO_WAIT, timeout=timedelta(seconds=30))
    dispatch = Task(NOOP)


def wants_another_draft(ctx) -> bool:
    return ctx.steps["draft"].output["again"]


class Drafting(Workflow):
    name = "external_composition_drafting"
    draft = Task(external=True, queue="writers")
    revise = Loop(back_to="draft", while_=wants_another_draft, max_iterations=3)


def scan_done(ctx) -> bool:
    return ctx.steps["scan"].output["done"]


class Scanning(Workflow):
    name = "external_composition_scanning"
    scan = Task(
        external=True,
        queue="scanners",
        repeat_until=scan_done,
        every=timedelta(seconds=5),
        max_iterations=3,
    )


refunds: list[str] = []


def refund(ctx) -> None:
    refunds.append(ctx.run_id.hex)


def decline(ctx) -> None:
    raise PermanentError("the carrier declined the parcel")


class Charging(Workflow):
    name = "external_composition_charging"
    charge = Task(external=True, queue="payments", compensate=f"{HERE}.refund")
    book = Task(f"{HERE}.decline")


def started(workflow: type[Workflow] = Shipping, **options) -> Run:
    run = workflows.start_run(workflow, {"order": 7}, **options)
    run_pending()
    return run


def claim(queue: str = "labels", **options) -> workflows.ExternalJob:
    jobs = workflows.claim_external([queue], worker="go-1", **options)
    assert len(jobs) == 1, jobs
    return jobs[0]


def step(run: Run, name: str = "print_label") -> Step:
    return Step.objects.get(run=run, name=name)


def status(run: Run) -> str:
    return Run.objects.values_list("status", flat=True).get(pk=run.pk)


# Operator verbs


def test_cancel_ends_a_running_external_attempt_at_its_next_heartbeat():
    run = started()
    job = claim()
    workflows.cancel_run(run, reason="order withdrawn")
    assert status(run) == "cancelling"  # the external worker still holds the lease
    with pytest.raises(RunCancelled):
        workflows.heartbeat_external(job.lease, progress=1)
    assert status(run) == "cancelled"
    assert step(run).failure_class == "cancelled"
    with pytest.raises(LeaseLost):
        workflows.complete_external(job.lease, {"label": "PL-1"})
    assert workflows.claim_external(["labels"], worker="go-2") == []


def test_cancel_of_a_run_whose_external_step_is_ready_ends_it_at_once():
    run = started()
    workflows.cancel_run(run)
    assert status(run) == "cancelled"
    assert workflows.claim_external(["labels"], worker="go-1") == []


def test_revoke_makes_the_old_lease_useless_and_the_step_ready_again():
    run = started()
    job = claim()
    revoked = workflows.revoke_lease(step(run), expected_attempt=1, reason="printer jammed")
    assert revoked.revoked and step(run).status == "ready"
    for use in (
        lambda: workflows.heartbeat_external(job.lease),
        lambda: workflows.log_external(job.lease, "late"),
        lambda: workflows.complete_external(job.lease, {"label": "PL-1"}),
    ):
        with pytest.raises(LeaseLost):
            use()
    again = claim()
    assert again.lease != job.lease
    assert workflows.complete_external(again.lease, {"label": "PL-2"}) is True
    run_pending()
    assert status(run) == "completed"
    assert step(run).output == {"label": "PL-2"}


def test_revoking_an_attempt_no_longer_running_is_refused_with_a_reason():
    run = started()
    revoked = workflows.revoke_lease(step(run), expected_attempt=1)
    assert not revoked.revoked and revoked.reason == "not_started"


def test_retry_step_after_a_failure_gives_the_external_step_fresh_attempts():
    run = started()
    job = claim()
    assert workflows.fail_external(job.lease, "no such carrier", permanent=True) == "failed"
    assert status(run) == "failed"
    workflows.retry_step(step(run))
    assert step(run).status == "ready"
    again = claim()
    assert again.attempt == 1 and again.max_attempts == 2
    workflows.complete_external(again.lease, {"label": "PL-3"})
    run_pending()
    assert status(run) == "completed"


def test_retry_step_of_a_ready_external_step_is_refused_with_a_reason():
    run = started()
    with pytest.raises(InvalidTransition) as refused:
        workflows.retry_step(step(run))
    assert "ready" in str(refused.value)


def test_skip_step_of_a_ready_external_step_records_the_output_and_moves_on():
    run = started()
    workflows.skip_step(step(run), output={"label": "handwritten"})
    assert step(run).status == "completed"  # done without running, as a skip records it
    assert workflows.claim_external(["labels"], worker="go-1") == []
    run_pending()
    assert status(run) == "completed"
    assert step(run).output == {"label": "handwritten"}


def test_rerun_from_an_external_step_hands_it_out_again_under_a_new_key():
    run = started()
    first = claim()
    workflows.complete_external(first.lease, {"label": "PL-4"})
    run_pending()
    assert status(run) == "completed"
    workflows.rerun_from(run, "print_label", reason="label smudged")
    assert step(run).status == "ready"
    again = claim()
    assert again.attempt == 1
    assert again.idempotency_key != first.idempotency_key
    with pytest.raises(LeaseLost):
        workflows.complete_external(first.lease, {"label": "PL-4"})
    workflows.complete_external(again.lease, {"label": "PL-5"})
    run_pending()
    assert status(run) == "completed"
    assert step(run).output == {"label": "PL-5"}


def test_a_paused_runs_external_steps_are_not_claimed_until_it_resumes():
    run = started()
    workflows.pause_run(run, reason="stock check")
    assert workflows.claim_external(["labels"], worker="go-1") == []
    workflows.resume_run(run)
    assert claim().run == run.pk


def test_pausing_a_run_leaves_a_claimed_external_attempt_to_finish():
    run = started()
    job = claim()
    workflows.pause_run(run)
    workflows.heartbeat_external(job.lease, message="still printing")
    assert workflows.complete_external(job.lease, {"label": "PL-6"}) is True
    assert step(run).status == "completed"
    workflows.resume_run(run)
    run_pending()
    assert status(run) == "completed"


def test_a_priority_change_reorders_the_claims():
    first, second = started(), started()
    workflows.change_priority(second, 50)
    assert [job.run for job in workflows.claim_external(["labels"], worker="go-1", limit=2)] == [
        second.pk,
        first.pk,
    ]


def test_a_run_deadline_ends_a_running_external_attempt():
    run = started(deadline=timedelta(minutes=5))
    job = claim()
    assert job.deadline == Run.objects.get(pk=run.pk).deadline
    run_pending(until=timezone.now() + timedelta(minutes=6))
    run.refresh_from_db()
    assert run.status == "failed" and run.error["code"] == "deadline_exceeded"
    with pytest.raises(LeaseLost):
        workflows.heartbeat_external(job.lease)
    with pytest.raises(LeaseLost):
        workflows.complete_external(job.lease, {"label": "late"})


# Composition with loops, polling, flows and compensation


def test_an_external_step_in_a_loop_body_is_handed_out_once_per_round():
    run = started(Drafting)
    first = claim("writers")
    workflows.complete_external(first.lease, {"again": True})
    run_pending()
    assert step(run, "draft").status == "ready" and step(run, "draft").iteration == 2
    second = claim("writers")
    assert second.attempt == 1
    with pytest.raises(LeaseLost):
        workflows.complete_external(first.lease, {"again": False})
    workflows.complete_external(second.lease, {"again": False})
    run_pending()
    assert status(run) == "completed"
    assert step(run, "draft").iteration == 2


def test_an_external_polling_step_is_handed_out_again_after_its_interval():
    run = started(Scanning)
    workflows.complete_external(claim("scanners").lease, {"done": False})
    run_pending()
    assert step(run, "scan").status != "ready"
    assert workflows.claim_external(["scanners"], worker="go-1") == []
    run_pending(until=timezone.now() + timedelta(seconds=6))
    again = claim("scanners")
    workflows.complete_external(again.lease, {"done": True})
    run_pending()
    assert status(run) == "completed"
    assert step(run, "scan").iteration == 2


def test_an_external_step_of_a_flow_member_starts_its_downstream_member():
    flow = workflows.create_flow("labels for a wave")
    first = workflows.add_to_flow(flow, Shipping, {"wave": 1}, member="first")
    second = workflows.add_to_flow(flow, Shipping, {"wave": 2}, member="second", after=["first"])
    workflows.seal_flow(flow)
    run_pending()
    assert status(second) == "blocked"
    job = claim()
    assert job.run == first.pk
    workflows.complete_external(job.lease, {"label": "PL-7"})
    run_pending()
    assert status(first) == "completed"
    assert claim().run == second.pk


def test_an_external_steps_python_compensation_runs_in_process():
    refunds.clear()
    run = started(Charging)
    workflows.complete_external(claim("payments").lease, {"charged": 12})
    run_pending()
    assert status(run) == "compensated"
    record = CompensationRecord.objects.get(run=run)
    assert record.status == "completed" and record.requires == ""
    assert refunds == [run.pk.hex]
    # Nothing of the compensation was ever handed to an external worker.
    assert workflows.claim_external(["payments"], worker="go-1") == []
