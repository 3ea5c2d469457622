"""Workers that die or freeze in the middle of a step: leases, reclaim and fencing for real.

Each test runs a django-q2 cluster and a sweeper as separate processes and signals the
worker process that the handler itself reports (``HandlerCall.pid``).
"""

from __future__ import annotations

import os
import signal
from uuid import UUID

import pytest
from django_q.models import OrmQ

from tests.acceptance.flowapp.models import HandlerCall, SideEffect
from tests.acceptance.invariants import completion_problems, idempotency_problems
from tests.acceptance.stack import Stack
from tests.support.events import payloads
from workflows.models import Step

pytestmark = [pytest.mark.acceptance, pytest.mark.django_db(transaction=True)]

STARTUP_TIMEOUT = 60.0  # qcluster start + first claim, on a loaded 2-core machine
RUN_TIMEOUT = 60.0
# django-q2 redelivers a task whose worker died after Q_CLUSTER["retry"] (12 s).
QUEUE_DRAIN_TIMEOUT = 40.0


def first_call(stack: Stack, run_id: UUID, step_name: str) -> HandlerCall:
    """Wait until the handler of ``step_name`` has started; return what it recorded."""
    return stack.wait_for(
        f"the first attempt of {step_name!r} to start",
        lambda: HandlerCall.objects.filter(run_id=run_id, step_name=step_name).first(),
        timeout=STARTUP_TIMEOUT,
        run_ids=[run_id],
    )


def assert_run_invariants(stack: Stack, run_id: UUID) -> None:
    assert completion_problems([run_id]) == []
    assert idempotency_problems([run_id]) == []
    assert stack.monitor.problems == []
    assert stack.monitor.samples > 0


def test_a_worker_killed_mid_step_is_reclaimed_after_its_lease_and_completes_once(stack):
    """SIGKILL in the middle of a handler: nobody tells the engine, only the lease runs
    out. The sweeper reclaims the step, another worker runs attempt 2 with the same
    idempotency key, and the step completes exactly once."""
    cluster = stack.qcluster(workers=2)
    stack.sweeper()
    [run_id] = stack.start_runs("acceptance_hold", [{"hold_attempts": [1]}])
    killed = first_call(stack, run_id, "hold")
    assert killed.pid in cluster.descendants()

    os.kill(killed.pid, signal.SIGKILL)
    [run] = stack.wait_finished([run_id], timeout=RUN_TIMEOUT).values()

    assert run.status == "completed"
    step = Step.objects.get(run_id=run_id, name="hold")
    assert (step.status, step.attempt, step.output["attempt"]) == ("completed", 2, 2)
    calls = HandlerCall.objects.filter(run_id=run_id, step_name="hold")
    assert [(call.attempt, call.pid == killed.pid) for call in calls] == [(1, True), (2, False)]
    assert {call.idempotency_key for call in calls} == {f"{run_id}/hold"}
    [expired] = payloads(run_id, "lease.expired")
    assert expired["attempt"] == 1 and f":{killed.pid}:" in expired["owner"]
    # A worker that vanished: class lease_expired, retried by the default retry_on.
    assert expired["failure_class"] == "lease_expired"
    assert (step.failure_class, step.error["failure_class"]) == ("lease_expired",) * 2
    assert SideEffect.objects.get(idempotency_key=f"{run_id}/hold").attempt == 2
    assert_run_invariants(stack, run_id)


def test_a_live_worker_past_its_timeout_is_failed_by_its_watchdog_and_its_result_refused(stack):
    """The handler blocks past its 1 s timeout while its worker lives: that worker's
    watchdog records the attempt as ``timeout`` (the sweeper, which runs too, never
    reclaims it), attempt 2 completes the step on another worker, and attempt 1's late
    result is refused."""
    stack.qcluster(workers=2)
    stack.sweeper()
    [run_id] = stack.start_runs("acceptance_overrun", [{"hold_attempts": [1]}])
    slow = first_call(stack, run_id, "slow")

    [run] = stack.wait_finished([run_id], timeout=RUN_TIMEOUT).values()
    stack.release(run_id)
    [lost] = stack.wait_for(
        "the overrun attempt's late result to be refused",
        lambda: payloads(run_id, "lease.lost"),
        timeout=RUN_TIMEOUT,
        run_ids=[run_id],
    )

    assert run.status == "completed"
    step = Step.objects.get(run_id=run_id, name="slow")
    assert (step.status, step.attempt, step.output["attempt"]) == ("completed", 2, 2)
    assert (step.failure_class, step.error["failure_class"]) == ("timeout", "timeout")
    [scheduled] = payloads(run_id, "step.retry_scheduled")
    assert (scheduled["attempt"], scheduled["failure_class"]) == (1, "timeout")
    assert payloads(run_id, "lease.expired") == []
    assert (lost["action"], lost["attempt"]) == ("completion", 1)
    assert f":{slow.pid}:" in lost["owner"]
    assert SideEffect.objects.get(idempotency_key=f"{run_id}/slow").attempt == 2
    assert_run_invariants(stack, run_id)


def test_a_worker_stopped_past_its_lease_has_its_late_heartbeat_and_result_rejected(stack):
    """SIGSTOP past the lease, then SIGCONT once another worker has completed the step:
    the zombie attempt's heartbeat and result are fenced out (``lease.lost``) and the
    completed step keeps attempt 2's output and version."""
    stack.qcluster(workers=2)
    stack.sweeper()
    [run_id] = stack.start_runs(
        "acceptance_hold", [{"hold_attempts": [1], "heartbeat_after_hold": True}]
    )
    frozen = first_call(stack, run_id, "hold")

    os.kill(frozen.pid, signal.SIGSTOP)
    try:
        completed = stack.wait_for(
            "another worker to complete the step while the first one is stopped",
            lambda: Step.objects.filter(run_id=run_id, name="hold", status="completed").first(),
            timeout=RUN_TIMEOUT,
            run_ids=[run_id],
        )
    finally:
        stack.release(run_id)
        os.kill(frozen.pid, signal.SIGCONT)
    lost = stack.wait_for(
        "the stopped worker's heartbeat and result to be rejected",
        lambda: (found := payloads(run_id, "lease.lost")) and len(found) >= 2 and found,
        timeout=RUN_TIMEOUT,
        run_ids=[run_id],
    )
    [run] = stack.wait_finished([run_id], timeout=RUN_TIMEOUT).values()

    assert [(event["action"], event["attempt"]) for event in lost] == [
        ("heartbeat", 1),
        ("completion", 1),
    ]
    assert all(f":{frozen.pid}:" in event["owner"] for event in lost)
    assert HandlerCall.objects.filter(run_id=run_id, note="heartbeat rejected").count() == 1
    step = Step.objects.get(run_id=run_id, name="hold")
    assert (step.status, step.attempt, step.version) == ("completed", 2, completed.version)
    assert step.output == completed.output
    assert step.output["attempt"] == 2 and step.output["pid"] != frozen.pid
    assert SideEffect.objects.get(idempotency_key=f"{run_id}/hold").attempt == 2
    assert run.status == "completed"
    assert_run_invariants(stack, run_id)


def test_a_step_whose_worker_dies_on_every_attempt_fails_after_max_attempts(stack):
    """A poison step (its handler SIGKILLs its own worker) must not crash workers
    forever: django-q2 never sees a failure to count, so the engine's own attempt
    counter has to end it."""
    stack.qcluster(workers=2)
    stack.sweeper()
    [run_id] = stack.start_runs("acceptance_die", [{}])

    [run] = stack.wait_finished([run_id], timeout=RUN_TIMEOUT).values()

    assert run.status == "failed"
    assert (run.error["step"], run.error["cause"]) == ("die", "lease_expired")
    die = Step.objects.get(run_id=run_id, name="die")
    assert (die.status, die.attempt, die.max_attempts) == ("failed", 3, 3)
    assert Step.objects.get(run_id=run_id, name="never").status == "cancelled"
    calls = list(HandlerCall.objects.filter(run_id=run_id).values_list("attempt", "pid"))
    assert [attempt for attempt, _ in calls] == [1, 2, 3]
    assert len({pid for _, pid in calls}) == 3  # each attempt killed its own worker
    assert [e["attempt"] for e in payloads(run_id, "lease.expired")] == [1, 2, 3]
    # No endless loop: the queue redelivers the dead workers' tasks once, they find the
    # step failed and do nothing, and the queue drains.
    stack.wait_for(
        "django-q2's queue to drain",
        lambda: not OrmQ.objects.exists(),
        timeout=QUEUE_DRAIN_TIMEOUT,
        run_ids=[run_id],
    )
    assert HandlerCall.objects.filter(run_id=run_id).count() == 3
    assert len(payloads(run_id, "step.started")) == 3
    assert_run_invariants(stack, run_id)
