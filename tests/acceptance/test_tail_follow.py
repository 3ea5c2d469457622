"""``workflows_tail RUN --follow`` as an operator runs it: a real process that prints an
event committed while it follows, and stops on Ctrl-C (SIGINT) with exit status 0 and
no traceback."""

from __future__ import annotations

import os
import signal

import pytest

from tests.acceptance.harness import COMMAND_TIMEOUT_SECONDS, Processes, wait_for
from workflows.models import Event, Run

pytestmark = [pytest.mark.acceptance, pytest.mark.django_db(transaction=True)]


def test_a_following_tail_prints_what_commits_and_stops_quietly_on_ctrl_c(processes: Processes):
    run = Run.objects.create(workflow_name="tailed", workflow_version=1, snapshot={})
    Event.objects.create(run=run, type="run.started")
    # A shell starts background jobs with SIGINT ignored, and an ignored signal stays
    # ignored across exec: the tail would never see Ctrl-C. A handler of ours is reset
    # to the default on exec, so the tail starts as it does from a terminal.
    inherited = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        tail = processes.start("tail", "workflows_tail", str(run.pk), "--follow")
    finally:
        signal.signal(signal.SIGINT, inherited)

    def wait_printed(event_type: str) -> None:
        wait_for(
            f"the tail to print {event_type}",
            lambda: f" {event_type}" in tail.log_tail(),
            timeout=COMMAND_TIMEOUT_SECONDS,
            on_poll=processes.check_watched,
            describe=tail.log_tail,
        )

    wait_printed("run.started")
    Event.objects.create(run=run, type="step.ready")  # commits while the tail waits
    wait_printed("step.ready")

    os.kill(tail.pid, signal.SIGINT)

    assert tail.popen.wait(timeout=COMMAND_TIMEOUT_SECONDS) == 0
    assert "Traceback" not in tail.log_tail()
    assert "KeyboardInterrupt" not in tail.log_tail()
