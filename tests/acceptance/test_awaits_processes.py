"""Awaits with real processes: a signal racing an await's commit is never lost, and a
worker killed after its handler returned ``Await`` leaves an attempt that is retried.

- The race: one process claims the step and runs its handler, which returns
  ``Await("mapping")``; another sends ``mapping`` at the same instant. Both take the
  run's lock, so either the signal commits first and is kept, then consumed by the
  parking, or the parking commits first and the signal resumes the waiting step. Either
  way the step ends ``ready`` with the signal as ``resumed``, the signal consumed by it,
  and one ``step.awaiting`` and one ``step.resumed`` in its history; the run then
  completes with the signal's payload. Repeated, a new run each round.
- The kill: the worker dies (SIGKILL) after the handler returned and before the await
  was written. Nothing of the await exists; the step is ``running`` under the dead
  worker's lease, the reclaim takes it back (a ``lease_expired`` attempt, as for any
  crash), and the next attempt awaits again and is resumed as usual.
"""

from __future__ import annotations

import signal
from datetime import timedelta
from pathlib import Path

import pytest

import workflows
from tests.acceptance.harness import Processes, Side, race
from workflows.engine import STEP, reclaim
from workflows.models import Event, Signal, Step
from workflows.testing import run_pending

pytestmark = [pytest.mark.acceptance, pytest.mark.django_db(transaction=True)]

ROUNDS = 6
PROCESS_EXIT_TIMEOUT = 60.0


def test_a_signal_racing_the_await_commit_is_never_lost(processes: Processes, tmp_path: Path):
    runs = [workflows.start_run("acceptance_awaiting", {}) for _ in range(ROUNDS)]
    steps = [Step.objects.get(run=run, name="ask") for run in runs]
    outcomes = race(
        processes,
        tmp_path / "race",
        {
            "worker": Side([("run_step", str(step.pk), "worker-A") for step in steps]),
            "sender": Side([("send_signal", str(run.pk), "mapping") for run in runs]),
        },
        "--reason",
        "operator",
    )
    for run, step, outcome in zip(runs, steps, outcomes, strict=True):
        assert "error" not in outcome["worker"] and "error" not in outcome["sender"], outcome
        assert outcome["worker"]["result"] == {"attempts": 1}
        step.refresh_from_db()
        assert step.status == "ready", (step.status, step.awaiting)
        assert step.awaiting is None
        assert step.resumed == {"signal": "mapping", "payload": {"by": "operator"}}
        assert (step.attempt, step.max_attempts) == (1, 7)  # PATIENT's six, plus the await
        assert Signal.objects.get(run=run).consumed_by_id == step.pk
        history = Event.objects.filter(run=run, type__in=("step.awaiting", "step.resumed"))
        assert sorted(history.values_list("type", flat=True)) == ["step.awaiting", "step.resumed"]
    run_pending()
    for run in runs:
        run.refresh_from_db()
        assert run.status == "completed"
        assert run.output["ask"]["resumed"] == {"signal": "mapping", "payload": {"by": "operator"}}
        assert run.output["ask"]["attempt"] == 2


def test_a_worker_killed_after_its_handler_returned_await_is_retried_as_usual(
    processes: Processes,
):
    run = workflows.start_run("acceptance_awaiting", {})
    doomed = processes.start("doomed-worker", "acceptance_await_then_die", str(run.pk), "ask")
    doomed.watched = False  # it is meant to die
    assert doomed.popen.wait(timeout=PROCESS_EXIT_TIMEOUT) == -signal.SIGKILL

    step = Step.objects.get(run=run)
    assert (step.status, step.attempt, step.max_attempts) == ("running", 1, 6)
    assert step.awaiting is None
    assert step.lease_owner.split(":")[1] == str(doomed.pid)
    assert not Event.objects.filter(run=run, type="step.awaiting").exists()

    assert reclaim(STEP, step.pk, now=step.lease_expires_at + timedelta(seconds=1)) == "ready"
    run_pending()
    step.refresh_from_db()
    assert (step.status, step.attempt, step.max_attempts) == ("waiting", 2, 7)
    assert step.awaiting["signals"] == ["mapping"]
    assert Event.objects.filter(run=run, type="lease.expired").count() == 1
    assert step.failure_class == "lease_expired"  # the killed attempt counts, as any crash

    workflows.send_signal(run, "mapping", "late")
    run_pending()
    run.refresh_from_db()
    assert run.status == "completed"
    assert run.output["ask"] == {"resumed": {"signal": "mapping", "payload": "late"}, "attempt": 3}
    assert Event.objects.filter(run=run, type="step.awaiting").count() == 1
