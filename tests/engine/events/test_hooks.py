"""Hooks: signals sent after commit from the event history, once per event."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection, transaction

import workflows
from tests.acceptance.harness import MANAGE, database_url
from tests.support.hooks import received_fixture
from tests.support.runs import run_inline
from tests.support.threads import sweeper_until
from workflows import Gate, PermanentError, Retry, Task, Workflow, hooks
from workflows.hooks import deliver_events
from workflows.models import Event, Run, Step
from workflows.testing import run_pending
from workflows.workers.scanners import deliver_hooks

pytestmark = pytest.mark.django_db

HERE = "tests.engine.events.test_hooks"
ONCE = Retry(max_attempts=1)
PROCESS_TIMEOUT_SECONDS = 90


def book(ctx):
    return "booked"


def decline(ctx):
    raise PermanentError("card declined")


def cannot_undo(ctx):
    raise PermanentError("the booking is gone")


class Reviewed(Workflow):
    name = "hooks_reviewed"
    prepare = Task(f"{HERE}.book")
    review = Gate(prompt="go?")
    after = Task(f"{HERE}.book")


class Declined(Workflow):
    name = "hooks_declined"
    pay = Task(f"{HERE}.decline", retry=ONCE)


class Unrecoverable(Workflow):
    name = "hooks_unrecoverable"
    reserve = Task(f"{HERE}.book", compensate=f"{HERE}.cannot_undo", retry=ONCE)
    pay = Task(f"{HERE}.decline", retry=ONCE)


# Every hook sent while the test runs: its name and arguments.
received = received_fixture(
    "run_started",
    "run_finished",
    "step_failed",
    "gate_waiting",
    "gate_decided",
    "compensation_failed",
)


def hooks_of(calls: list[dict[str, Any]], run: Run) -> list[str]:
    return [call["hook"] for call in calls if call["run_id"] == run.pk]


def test_a_gated_run_fires_started_waiting_decided_and_finished(received):
    run = workflows.start_run(Reviewed)
    run_pending()
    gate = Step.objects.get(run=run, name="review")
    assert hooks_of(received, run) == ["run_started", "gate_waiting"]
    waiting = received[-1]
    assert waiting["sender"] == "hooks_reviewed"
    assert waiting["step_id"] == gate.pk
    assert waiting["event"].type == "step.waiting"
    assert waiting["event"].payload["reason"] == "gate"

    workflows.approve_gate(gate, user=User.objects.create_superuser("approver"))
    run_pending()
    assert hooks_of(received, run) == [
        "run_started",
        "gate_waiting",
        "gate_decided",
        "run_finished",
    ]
    decided, finished = received[-2:]
    assert decided["step_id"] == gate.pk
    assert decided["event"].payload["decision"] == "approved"
    assert finished["status"] == "completed"
    assert finished["step_id"] is None
    assert not Event.objects.filter(published=False).exists()


def test_a_failed_step_fires_step_failed_then_run_finished_failed(received):
    run = workflows.start_run(Declined)
    run_pending()
    assert hooks_of(received, run) == ["run_started", "step_failed", "run_finished"]
    failed, finished = received[-2:]
    assert failed["step_id"] == Step.objects.get(run=run, name="pay").pk
    assert failed["event"].type == "step.failed"
    assert finished["status"] == "failed"


def test_a_failed_compensation_fires_compensation_failed(received):
    run = run_inline(Unrecoverable)
    assert run.status == "compensation_failed"
    fired = hooks_of(received, run)
    assert fired.count("compensation_failed") == 1
    assert fired[-1] == "run_finished"
    failure = next(call for call in received if call["hook"] == "compensation_failed")
    assert failure["step_id"] == Step.objects.get(run=run, name="reserve").pk
    assert failure["event"].payload["error"] == "the booking is gone"
    assert received[-1]["status"] == "compensation_failed"


def test_events_without_a_hook_are_delivered_too_so_the_cursor_moves_on(received):
    run = workflows.start_run(Reviewed)
    result = deliver_hooks()
    assert result.found == result.done == Event.objects.filter(run=run).count() > 1
    assert Event.objects.filter(published=False).count() == 0
    assert deliver_hooks().found == 0


def test_a_rolled_back_transition_fires_no_hook(received):
    with pytest.raises(RuntimeError), transaction.atomic():
        workflows.start_run(Reviewed)
        raise RuntimeError("the caller's transaction fails after the run started")
    assert not Run.objects.exists()
    assert deliver_hooks().found == 0
    assert received == []


def test_a_raising_receiver_does_not_stop_the_batch(received, caplog):
    def explode(**arguments: Any) -> None:
        raise ValueError("receiver bug")

    hooks.run_started.connect(explode)
    try:
        first, second = workflows.start_run(Declined), workflows.start_run(Declined)
        run_pending()
    finally:
        hooks.run_started.disconnect(explode)
    # The other receiver still got every hook, both runs' hooks were all sent, in order.
    assert hooks_of(received, first) == ["run_started", "step_failed", "run_finished"]
    assert hooks_of(received, second) == ["run_started", "step_failed", "run_finished"]
    assert "receiver bug" in caplog.text
    assert not Event.objects.filter(published=False).exists()


@pytest.mark.django_db(transaction=True)
def test_two_racing_deliverer_threads_send_each_hook_once(received, concurrently):
    runs = [workflows.start_run(Declined) for _ in range(10)]
    run_pending_without_hooks()
    received.clear()
    expected = Event.objects.filter(type__in=["run.started", "step.failed", "run.failed"])
    assert Event.objects.filter(published=False).count() > 30

    results = concurrently(lambda: deliver_events(limit=4), lambda: deliver_events(limit=4))

    assert not [r for r in results if isinstance(r, Exception)], results
    assert sum(r.claimed for r in results) == Event.objects.count()
    sent = Counter(call["event"].pk for call in received)
    assert sorted(sent) == sorted(expected.values_list("pk", flat=True))
    assert set(sent.values()) == {1}
    assert {call["run_id"] for call in received} == {run.pk for run in runs}


def run_pending_without_hooks() -> None:
    """Run everything, then hand its events back to the deliverers under test."""
    run_pending()
    Event.objects.update(published=False)


@pytest.mark.django_db(transaction=True)
def test_the_sweeper_delivers_hooks_on_its_next_poll(received):
    run = workflows.start_run(Declined)
    run_pending_without_hooks()
    received.clear()
    sweeper_until(lambda: len(received) >= 3, timeout=PROCESS_TIMEOUT_SECONDS)
    assert hooks_of(received, run) == ["run_started", "step_failed", "run_finished"]


@pytest.mark.processes
@pytest.mark.django_db(transaction=True)
def test_two_racing_deliverer_processes_send_each_hook_once(tmp_path):
    for _ in range(15):
        workflows.start_run(Declined)
    run_pending_without_hooks()
    expected = set(
        Event.objects.filter(type__in=["run.started", "step.failed", "run.failed"]).values_list(
            "pk", flat=True
        )
    )
    log_file, go_file = tmp_path / "hooks.log", tmp_path / "go"
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "DATABASE_URL": database_url(connection.settings_dict),
    }
    command = [sys.executable, str(MANAGE), "acceptance_deliver_hooks", str(log_file)]
    processes = [
        subprocess.Popen(
            [*command, "--go-file", str(go_file)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        for _ in range(2)
    ]
    try:
        give_up_at = time.monotonic() + PROCESS_TIMEOUT_SECONDS
        while len(list(tmp_path.glob("go.*.ready"))) < len(processes):
            assert time.monotonic() < give_up_at, "the deliverers did not start"
            assert all(p.poll() is None for p in processes), [p.communicate() for p in processes]
            time.sleep(0.05)
        go_file.touch()
        outputs = [p.communicate(timeout=PROCESS_TIMEOUT_SECONDS) for p in processes]
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait()
    assert [p.returncode for p in processes] == [0, 0], outputs
    lines = Path(log_file).read_text().split()
    deliveries = Counter(int(event_id) for event_id in lines[::2])
    assert set(deliveries) == expected
    assert set(deliveries.values()) == {1}
    assert not Event.objects.filter(published=False).exists()
