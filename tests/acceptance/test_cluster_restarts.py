"""The whole worker side going away: a killed qcluster parent, and downtime past due timers."""

from __future__ import annotations

import os
import signal
import time
from collections import Counter
from datetime import timedelta
from uuid import UUID

import pytest
from django.utils import timezone

from tests.acceptance.flowapp.models import HandlerCall
from tests.acceptance.harness import proc_stat
from tests.acceptance.invariants import (
    completion_problems,
    idempotency_problems,
    lock_error_problems,
)
from tests.acceptance.stack import Stack
from workflows.models import Event, Run, Step, Timer

pytestmark = [pytest.mark.acceptance, pytest.mark.django_db(transaction=True)]

RUN_TIMEOUT = 120.0


def assert_all_completed(stack: Stack, runs: dict[UUID, Run]) -> None:
    assert {run.status for run in runs.values()} == {"completed"}
    assert completion_problems(list(runs)) == []
    assert idempotency_problems(list(runs)) == []
    assert lock_error_problems() == []
    assert stack.monitor.problems == []


def test_orphaned_workers_of_a_killed_qcluster_parent_cannot_move_state_backwards(stack):
    """DESIGN §7: SIGKILL of qcluster's main process and sentinel leaves the workers (and
    the pusher feeding them) running as orphans. A restarted cluster then works the same
    queue beside them; fencing, not supervision, must keep every row moving forwards."""
    old = stack.qcluster(workers=3)
    stack.sweeper()
    run_ids = stack.start_runs("acceptance_diamond", [{"pause": [0.2, 1.0]}] * 20)
    busy = stack.wait_for(
        "the old cluster's workers to be in the middle of steps",
        lambda: len(found := stack.busy_steps(old)) >= 2 and found,
        timeout=60,
        run_ids=run_ids,
        interval=0.05,
    )
    [sentinel] = {proc_stat(pid).ppid for pid in busy}

    old.watched = False
    os.kill(old.pid, signal.SIGKILL)
    os.kill(sentinel, signal.SIGKILL)
    killed_at = timezone.now()
    orphans = set(old.descendants())
    assert set(busy) <= orphans, (busy, orphans)
    stack.qcluster(workers=2)
    runs = stack.wait_finished(run_ids, timeout=RUN_TIMEOUT)

    assert_all_completed(stack, runs)
    # The orphans finished the steps they held when their parents died...
    outputs = dict(Step.objects.filter(pk__in=busy.values()).values_list("pk", "output"))
    assert {step_id: outputs[step_id]["pid"] for step_id in busy.values()} == {
        step_id: pid for pid, step_id in busy.items()
    }
    # ...and went on taking new work from the queue beside the new cluster.
    assert HandlerCall.objects.filter(pid__in=orphans, created_at__gt=killed_at).exists()


def test_timers_due_while_sweeper_and_workers_were_down_fire_once_each_on_restart(stack):
    """Sleep and retry timers fall due while no sweeper and no worker runs. On restart two
    sweepers race for every timer: each fires exactly once and its step completes once.
    The sweeper is down from the start, so no timer can fire early however slow the
    machine is."""
    cluster = stack.qcluster(workers=2)
    now = timezone.now()
    inputs = [{"wake_at": (now + timedelta(seconds=2 + n / 2)).isoformat()} for n in range(6)]
    run_ids = stack.start_runs("acceptance_timers", inputs)
    stack.wait_for(
        "every run to wait on its sleep and its retry timer",
        lambda: Run.objects.filter(pk__in=run_ids, status="waiting").count() == len(run_ids),
        timeout=60,
        run_ids=run_ids,
    )
    stack.processes.stop(cluster)
    timers = Timer.objects.filter(run__in=run_ids)
    assert Counter(timers.values_list("kind", "status")) == {
        ("sleep", "scheduled"): len(run_ids),
        ("retry", "scheduled"): len(run_ids),
    }
    last_due = max(timer.due_at for timer in timers)
    time.sleep(max(0.0, (last_due - timezone.now()).total_seconds()) + 1.0)
    assert set(timers.values_list("status", flat=True)) == {"scheduled"}

    stack.sweeper()
    stack.sweeper()
    stack.qcluster(workers=2)
    runs = stack.wait_finished(run_ids, timeout=RUN_TIMEOUT)

    assert_all_completed(stack, runs)
    assert set(timers.values_list("status", flat=True)) == {"fired"}
    fired = Counter(
        event["timer"]
        for event in Event.objects.filter(run__in=run_ids, type="timer.fired").values_list(
            "payload", flat=True
        )
    )
    assert fired == {timer.pk: 1 for timer in timers}
    calls = Counter(
        HandlerCall.objects.filter(run_id__in=run_ids).values_list("step_name", flat=True)
    )
    assert calls == {
        "before": len(run_ids),
        "flaky": 2 * len(run_ids),  # the failed attempt and the one its retry released
        "after": len(run_ids),
    }
