"""Revoke and cooperative cancel with real worker processes.

A django-q2 cluster and a sweeper run as separate processes; the handler heartbeats in a
loop (``tests.acceptance.flowapp.control.spin``) and records in HandlerCall rows what its
heartbeats told it. The tests act from this process as an operator would, through the
public verbs, and assert outcomes, never how long they took.
"""

from __future__ import annotations

from uuid import UUID

import pytest

import workflows
from tests.acceptance.flowapp.models import HandlerCall
from tests.acceptance.invariants import completion_problems
from tests.acceptance.stack import Stack
from tests.support.events import payloads
from workflows.models import CompensationRecord, Event, Step

pytestmark = [pytest.mark.acceptance, pytest.mark.django_db(transaction=True)]

STARTUP_TIMEOUT = 60.0  # qcluster start + a first claim, on a loaded 2-core machine
RUN_TIMEOUT = 60.0


def spinning(stack: Stack, run_id: UUID) -> HandlerCall:
    """Wait until the first attempt of ``spin`` has started; return its call."""
    return stack.wait_for(
        "the first attempt of 'spin' to start heartbeating",
        lambda: HandlerCall.objects.filter(run_id=run_id, step_name="spin", attempt=1).first(),
        timeout=STARTUP_TIMEOUT,
        run_ids=[run_id],
    )


def calls(run_id: UUID, step: str) -> list[tuple[int, str]]:
    rows = HandlerCall.objects.filter(run_id=run_id, step_name=step).order_by("id")
    return list(rows.values_list("attempt", "note"))


def test_a_revoked_heartbeating_worker_is_refused_and_the_step_runs_again_once(stack):
    """The worker is alive and heartbeating, so its lease never expires: only a revoke
    takes the step back. Its next heartbeat raises LeaseLost, the result it returns
    anyway is refused, and the step runs exactly once more, on its only attempt given
    back, and completes."""
    stack.qcluster(workers=2)
    stack.sweeper()
    [run_id] = stack.start_runs("acceptance_wedged", [{}])
    wedged = spinning(stack, run_id)

    revoked = workflows.revoke_lease(
        Step.objects.get(run_id=run_id, name="spin"),
        expected_attempt=1,
        reason="worker wedged in a loop",
    ).unit
    assert (revoked.status, revoked.max_attempts) == ("ready", 2)
    [run] = stack.wait_finished([run_id], timeout=RUN_TIMEOUT).values()

    assert run.status == "completed", run.error
    assert calls(run_id, "spin") == [(1, ""), (1, "revoked"), (2, "")]
    spin = Step.objects.get(run_id=run_id, name="spin")
    assert (spin.status, spin.attempt, spin.output["attempt"]) == ("completed", 2, 2)
    [revocation] = payloads(run_id, "lease.revoked")
    assert (revocation["attempt"], revocation["reason"]) == (1, "worker wedged in a loop")
    assert f":{wedged.pid}:" in revocation["owner"]
    lost = payloads(run_id, "lease.lost")
    assert [(event["action"], event["attempt"]) for event in lost] == [
        ("heartbeat", 1),
        ("completion", 1),
    ]
    assert all(f":{wedged.pid}:" in event["owner"] for event in lost)
    assert completion_problems([run_id]) == []
    assert stack.monitor.problems == []


def test_a_heartbeating_handler_stops_at_its_next_heartbeat_after_a_cancel(stack):
    """The cancel commits while the handler loops; the first heartbeat after it raises
    RunCancelled (no heartbeat succeeds once ``cancel_requested`` said true), the
    attempt is recorded failed with class ``cancelled`` and not retried, and the run
    compensates and ends cancelled."""
    stack.qcluster(workers=2)
    stack.sweeper()
    [run_id] = stack.start_runs("acceptance_cancellable", [{}])
    spinning(stack, run_id)

    cancelled = workflows.cancel_run(run_id, reason="customer gone")
    assert cancelled.status == "cancelling"  # the running attempt is still in hand
    [run] = stack.wait_finished([run_id], timeout=RUN_TIMEOUT).values()

    assert run.status == "cancelled", run.error
    assert calls(run_id, "spin") == [(1, ""), (1, "stopped by RunCancelled")]
    spin = Step.objects.get(run_id=run_id, name="spin")
    assert (spin.status, spin.attempt, spin.failure_class) == ("failed", 1, "cancelled")
    assert spin.error["failure_class"] == "cancelled"
    assert not payloads(run_id, "lease.lost")  # it stopped while it still held the lease
    assert CompensationRecord.objects.get(run_id=run_id).status == "completed"
    assert calls(run_id, "reserve") == [(1, ""), (1, "compensated")]
    # A second cancel, from another operator: nothing changes, nothing is recorded.
    history = Event.objects.filter(run_id=run_id).count()
    again = workflows.cancel_run(run_id)
    assert again.status == "cancelled" and again.version == run.version
    assert Event.objects.filter(run_id=run_id).count() == history
    assert completion_problems([run_id]) == []
    assert stack.monitor.problems == []
