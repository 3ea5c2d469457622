"""Live telemetry for real: a worker killed with SIGKILL after it flushed its frames.

The frames, progress and summary that attempt 1 committed stay; attempt 2, on another
worker after the lease ran out, numbers its frames on from them.
"""

from __future__ import annotations

import os
import signal

import pytest

from tests.acceptance.flowapp.models import HandlerCall
from tests.acceptance.stack import Stack
from workflows.models import Frame, Step

pytestmark = [pytest.mark.acceptance, pytest.mark.django_db(transaction=True)]

STARTUP_TIMEOUT = 60.0
RUN_TIMEOUT = 60.0


def test_frames_of_a_killed_attempt_stay_and_the_next_attempt_numbers_on(stack: Stack):
    cluster = stack.qcluster(workers=2)
    stack.sweeper()
    [run_id] = stack.start_runs("acceptance_telemetry", [{"hold_attempts": [1]}])
    killed = stack.wait_for(
        "attempt 1 to flush its telemetry and hold",
        lambda: HandlerCall.objects.filter(run_id=run_id, step_name="report").first(),
        timeout=STARTUP_TIMEOUT,
        run_ids=[run_id],
    )
    assert killed.pid in cluster.descendants()
    flushed = Step.objects.get(run_id=run_id, name="report")
    assert (flushed.frames_written, flushed.progress_message) == (3, "attempt 1")

    os.kill(killed.pid, signal.SIGKILL)
    [run] = stack.wait_finished([run_id], timeout=RUN_TIMEOUT).values()

    assert run.status == "completed"
    step = Step.objects.get(run_id=run_id, name="report")
    assert step.attempt == 2
    frames = list(
        Frame.objects.filter(step=step).order_by("seq").values_list("seq", "attempt", "text")
    )
    assert frames == [
        (1, 1, "attempt 1 line 0"),
        (2, 1, "attempt 1 line 1"),
        (3, 1, "attempt 1 line 2"),
        (4, 2, "attempt 2 line 0"),
        (5, 2, "attempt 2 line 1"),
        (6, 2, "attempt 2 line 2"),
    ]
    assert (step.frames_written, step.frames_dropped) == (6, 0)
    assert (step.progress_done, step.progress_total, step.progress_message) == (2, 2, "attempt 2")
    assert step.summary == {"attempt_1": True, "attempt_2": True}
    assert step.summary_version == 2
    assert stack.monitor.problems == []
