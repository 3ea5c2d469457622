"""``cancel_flow`` crash-safe, with a real process killed with SIGKILL between the flow's
close (policy, reason and actor committed) and its members' cancellation. Until the
recovery scanner runs, no blocked member starts even when its join is met; the scanner
then cancels every member the stored policy covers, downstream-first, each with the
flow's reason and code ``flow_cancelled``, and stamps the cancellation done."""

from __future__ import annotations

import os
import signal
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

import workflows
from tests.acceptance.harness import Processes, wait_for
from workflows.engine.flows.cancellation import cancellation_of
from workflows.models import Event, Flow, Run
from workflows.status import FlowStatus, RunStatus
from workflows.testing import run_pending
from workflows.workers.scanners import RECOVERY_SCANNERS

pytestmark = [pytest.mark.acceptance, pytest.mark.django_db(transaction=True)]

HOLD_TIMEOUT = 60.0  # the command's start (Django setup) on a loaded 2-core machine


def test_a_cancellation_killed_after_the_close_is_finished_by_the_scanner(
    processes: Processes, tmp_path: Path
):
    flow = workflows.create_flow("crash")
    wake_at = (timezone.now() + timedelta(hours=1)).isoformat()
    workflows.add_to_flow(flow, "acceptance_nap", {"wake_at": wake_at}, member="root")
    workflows.add_to_flow(flow, "acceptance_flow_member", {}, member="first", after=("root",))
    workflows.add_to_flow(flow, "acceptance_flow_member", {}, member="second", after=("root",))
    workflows.add_to_flow(flow, "acceptance_flow_member", {}, member="third", after=("first",))
    # ``first`` waits for ``second`` too, an edge added after it: newest-first would
    # cancel ``second`` first and end ``first`` dependency_failed.
    workflows.add_dependency(flow, "second", "first")

    marker = tmp_path / "closed"
    held = processes.start(
        "cancel",
        "acceptance_cancel_flow_and_hold",
        str(flow.pk),
        "cancel_all",
        str(marker),
        "--reason",
        "release pulled",
    )
    wait_for("the flow's close to commit", marker.exists, timeout=HOLD_TIMEOUT)
    os.kill(held.pid, signal.SIGKILL)
    held.popen.wait(timeout=10)

    stored = Flow.objects.get(pk=flow.pk)
    assert (stored.status, stored.cancel_policy, stored.cancel_reason) == (
        FlowStatus.CANCELLED,
        "cancel_all",
        "release pulled",
    )
    assert stored.members_cancelled_at is None  # left half done
    members = dict(Run.objects.filter(flow=flow).values_list("flow_member__name", "status"))
    assert members == {
        "root": RunStatus.WAITING,
        "first": RunStatus.BLOCKED,
        "second": RunStatus.BLOCKED,
        "third": RunStatus.BLOCKED,
    }

    result = RECOVERY_SCANNERS["finish_flow_cancellations"]()
    assert (result.found, result.done, result.errors) == (1, 1, 0)
    run_pending()
    runs = {
        name: (status, error["code"], error["message"])
        for name, status, error in Run.objects.filter(flow=flow).values_list(
            "flow_member__name", "status", "error"
        )
    }
    assert runs == {
        name: (RunStatus.CANCELLED, "flow_cancelled", "release pulled")
        for name in ("root", "first", "second", "third")
    }
    assert not Event.objects.filter(flow=flow, type="flow.dependency_failed").exists()
    record = cancellation_of(flow.pk)
    assert (record.cancelled, record.complete) == (4, True)
    assert Event.objects.filter(flow=flow, type="flow.cancelled").count() == 1
