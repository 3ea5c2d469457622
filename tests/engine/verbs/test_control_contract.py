"""Control of running work, the contract of issue #24 name by name: every public name
called from ``workflows`` (or ``ctx``) with the keywords the contract writes, in one
walk through a run's life. The behaviour behind each name is tested in depth beside it
(test_revoke, test_cooperative_cancel, test_deadlines, test_failure_classes,
test_replay, tests/services/test_signal_tokens, tests/queries/test_pending_waits)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

import workflows
from tests.support.handlers import UNDO, UNDONE, WORK
from tests.support.runs import claimed
from workflows import Retry, Task, WaitForSignal, Workflow
from workflows.engine import heartbeat
from workflows.models import Event, Run, Step
from workflows.testing import run_pending

pytestmark = pytest.mark.django_db

HERE = __name__
SEEN: dict[str, Any] = {}


def cancels_itself(ctx: Any) -> str:
    """Cancel its own run, then see it the two ways a handler can: the flag, and the
    heartbeat that raises."""
    SEEN["before"] = ctx.cancel_requested
    workflows.cancel_run(ctx.run_id, reason="the customer left")
    SEEN["after"] = ctx.cancel_requested
    try:
        ctx.heartbeat()
    except workflows.RunCancelled as stopped:
        SEEN["raised"] = stopped
        raise
    return "never"


class Order(Workflow):
    name = "contract_order"
    deadline = timedelta(days=2)
    reserve = Task(WORK, compensate=UNDO, retry=Retry(retry_on={"transient", "timeout"}))
    approved = WaitForSignal("go")
    ship = Task(WORK)


class SelfCancelling(Workflow):
    name = "contract_self_cancelling"
    reserve = Task(WORK, compensate=UNDO)
    export = Task(f"{HERE}.cancels_itself")


@pytest.fixture(autouse=True)
def _clean() -> None:
    SEEN.clear()
    UNDONE.clear()


def test_the_contract_names_as_written(django_user_model):
    operator = django_user_model.objects.create_user("control-operator")

    # Deadlines: the workflow's, unless the start names its own.
    by_class = workflows.start_run(Order, {})
    by_start = workflows.start_run(Order, {}, deadline=timedelta(hours=1))
    assert by_start.deadline < by_class.deadline

    # Revoke: the running attempt loses its lease; the step is ready again, its attempt
    # given back; the revoked worker's heartbeat is refused.
    lease = claimed(by_start, "reserve", "wedged")
    revoked = workflows.revoke_lease(
        Step.objects.get(run=by_start, name="reserve"),
        expected_attempt=lease.attempt,
        user=operator,
        reason="wedged",
    )
    assert (revoked.revoked, revoked.reason, revoked.attempt) == (True, None, 1)
    step = revoked.unit
    assert (step.status, step.failure_class) == ("ready", workflows.FailureClass.REVOKED)
    with pytest.raises(workflows.LeaseLost):
        heartbeat(lease)

    # Signal tokens and pending waits: the run now waits for "go".
    run_pending()
    waits = workflows.pending_waits(kind="signal")
    assert {(wait.run, wait.step) for wait in waits.waits} == {
        (by_class.pk, "approved"),
        (by_start.pk, "approved"),
    }
    token = workflows.signal_token(by_start, "go", expires_in=timedelta(minutes=5))
    workflows.send_signal_with_token(token, {"ok": True}, idempotency_key="outside-1")
    run_pending()
    assert Run.objects.get(pk=by_start.pk).status == "completed"

    # Replay of any ended run: rerun_from a completed run.
    rerun = workflows.rerun_from(by_start, "ship", reason="ship again", user=operator)
    run_pending()
    assert Run.objects.get(pk=rerun.pk).status == "completed"

    # Cooperative cancel: the handler sees the flag and its heartbeat raises
    # RunCancelled, a LeaseLost; the attempt is recorded cancelled and not retried.
    stopping = workflows.start_run(SelfCancelling, {})
    run_pending()
    assert (SEEN["before"], SEEN["after"]) == (False, True)
    assert isinstance(SEEN["raised"], workflows.LeaseLost)
    export = Step.objects.get(run=stopping, name="export")
    assert export.failure_class == workflows.FailureClass.CANCELLED
    stopping = Run.objects.get(pk=stopping.pk)
    assert stopping.status == "cancelled"
    assert UNDONE == ["reserve"]

    # Idempotent cancel: a second cancel returns the run unchanged and records nothing.
    history = Event.objects.filter(run=stopping).count()
    again = workflows.cancel_run(stopping, reason="once more", user=operator)
    assert (again.status, again.version) == ("cancelled", stopping.version)
    assert Event.objects.filter(run=stopping).count() == history

    # ...and a cancelled run can be replayed.
    retried = workflows.retry_run(stopping, user=operator)
    assert retried.status in {"running", "pending"}
