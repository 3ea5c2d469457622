"""A run's deadline with real processes: a worker heartbeating in a step past the run's
deadline loses its lease, the sweeper's timer fails the run with ``deadline_exceeded``
and the booking made before is compensated. The timer fires when the sweeper gets to
it: the test asserts the outcome, never how late."""

from __future__ import annotations

import pytest

from tests.acceptance.flowapp.models import HandlerCall
from tests.acceptance.invariants import completion_problems
from tests.acceptance.stack import Stack
from tests.support.threads import eventually
from workflows.models import CompensationRecord, Event, Step, Timer

pytestmark = [pytest.mark.acceptance, pytest.mark.django_db(transaction=True)]

STARTUP_TIMEOUT = 60.0  # qcluster start + a first run, on a loaded 2-core machine
RUN_TIMEOUT = 60.0


def test_a_run_past_its_deadline_stops_its_worker_fails_and_compensates(stack: Stack):
    stack.qcluster(workers=2)
    stack.sweeper()
    # The deadline counts from the start: start once the workers take work.
    [warm_up] = stack.start_runs("acceptance_diamond", [{}])
    stack.wait_finished([warm_up], timeout=STARTUP_TIMEOUT)

    [run_id] = stack.start_runs("acceptance_deadline", [{}])
    [run] = stack.wait_finished([run_id], timeout=RUN_TIMEOUT).values()

    assert run.status == "compensated", run.error
    assert run.error["code"] == "deadline_exceeded"
    assert run.deadline.isoformat(sep=" ", timespec="seconds") in run.error["message"]
    assert Timer.objects.get(run_id=run_id, kind="deadline").status in {"fired", "cancelled"}
    steps = dict(Step.objects.filter(run_id=run_id).values_list("name", "status"))
    # Whichever came first: the timer took the lease (cancelled), or the handler's
    # heartbeat saw the deadline had come and stopped it (failed); class cancelled both.
    assert steps in (
        {"book": "completed", "linger": "cancelled", "then": "cancelled"},
        {"book": "completed", "linger": "failed", "then": "cancelled"},
    )
    linger = Step.objects.get(run_id=run_id, name="linger")
    assert linger.failure_class == "cancelled"
    # The lingering handler learns at its next heartbeat that it must stop, and stops:
    # when the timer took the lease, that heartbeat may come after the run has ended.
    calls = HandlerCall.objects.filter(run_id=run_id, step_name="linger")
    assert eventually(lambda: calls.count() >= 2, timeout=RUN_TIMEOUT)
    assert list(calls.values_list("note", flat=True)) == ["", "stopped: lease lost"]
    assert CompensationRecord.objects.get(run_id=run_id).status == "completed"
    assert HandlerCall.objects.filter(run_id=run_id, note="compensated").count() == 1
    assert Event.objects.filter(run_id=run_id, type="run.deadline_exceeded").count() == 1
    assert completion_problems([run_id]) == []
    assert stack.monitor.problems == []
