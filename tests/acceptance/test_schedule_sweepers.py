"""Schedules fired by real sweeper processes: two sweepers at once start exactly one run
per slot, and a sweeper killed with SIGKILL between deciding a slot and committing its
run leaves neither, so the next pass starts the slot's run once."""

from __future__ import annotations

import os
import signal
import time
from collections import Counter
from datetime import timedelta
from pathlib import Path

import pytest

from tests.acceptance.harness import Processes, wait_for
from workflows import create_schedule
from workflows.engine.sql.clock import database_now
from workflows.models import Run, Schedule
from workflows.workers.schedule_slots import fire_due_schedules

pytestmark = [pytest.mark.acceptance, pytest.mark.django_db(transaction=True)]

START_TIMEOUT = 60.0  # a command's start (Django setup) on a loaded 2-core machine
WORKFLOW = "acceptance_diamond"


def test_two_sweepers_start_exactly_one_run_per_slot(processes: Processes) -> None:
    create_schedule(WORKFLOW, key="every-second", every=timedelta(seconds=1), overlap="allow_all")
    sweepers = [processes.start(f"sweeper-{n}", "workflows_sweeper") for n in (1, 2)]
    wait_for(
        "both sweepers to fire a dozen slots",
        lambda: Run.objects.filter(schedule__key="every-second").count() >= 12,
        timeout=START_TIMEOUT,
    )
    time.sleep(3)  # both sweepers are up by now: let them race for a few slots more
    for sweeper in sweepers:
        processes.stop(sweeper)
    slots = Counter(
        Run.objects.filter(schedule__key="every-second").values_list("scheduled_for", flat=True)
    )
    assert max(slots.values()) == 1, "a slot started two runs"
    ordered = sorted(slots)
    assert ordered == [ordered[0] + timedelta(seconds=n) for n in range(len(ordered))], (
        "a slot between the first and the last started no run"
    )
    schedule = Schedule.objects.get(key="every-second")
    assert schedule.fired_count == len(ordered)
    assert (schedule.skipped_count, schedule.missed_count) == (0, 0)


def test_a_sweeper_killed_before_its_decision_commits_leaves_the_slot_to_the_next_pass(
    processes: Processes, tmp_path: Path
) -> None:
    create_schedule(WORKFLOW, key="hourly", every=timedelta(hours=1))
    slot = database_now().replace(minute=0, second=0, microsecond=0)
    Schedule.objects.filter(key="hourly").update(next_slot_at=slot, next_fire_at=slot)
    marker = tmp_path / "created"
    held = processes.start("fire", "acceptance_fire_and_hold", str(marker))
    wait_for("the slot's run to be created", marker.exists, timeout=START_TIMEOUT)
    os.kill(held.pid, signal.SIGKILL)
    held.popen.wait(timeout=10)

    assert not Run.objects.filter(pk=marker.read_text()).exists()
    schedule = Schedule.objects.get(key="hourly")
    assert (schedule.next_slot_at, schedule.fired_count) == (slot, 0)

    assert fire_due_schedules().done == 1
    assert fire_due_schedules().found == 0
    [run] = Run.objects.filter(schedule__key="hourly")
    assert run.scheduled_for == slot
    assert run.idempotency_key == f"schedule:{schedule.pk}:{slot.isoformat()}"
    assert Schedule.objects.get(key="hourly").fired_count == 1
