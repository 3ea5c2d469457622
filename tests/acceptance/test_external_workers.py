"""External workers as real processes: claims raced, leases lost to expiry, workers killed.

Each external worker is a ``manage.py acceptance_external_worker`` process with its own
interpreter and connection, calling the public verbs as ``/api/work/`` does. The
assertions read the database afterwards, never timings:

- two processes claiming at the same instant, round after round, never get the same
  unit, and every unit is claimed by one of them;
- a worker that stops heartbeating (frozen with SIGSTOP) loses its unit when the lease
  expires, another worker gets the next attempt and completes it, and the frozen
  worker, resumed, finds its lease lost;
- workers killed mid-attempt (SIGKILL), again and again, while others claim: every run
  completes, and no step completes twice.
"""

from __future__ import annotations

import json
import random
import signal
from pathlib import Path
from uuid import UUID

import pytest

import workflows
from tests.acceptance.flowapp.management.commands.acceptance_race import CLAIM_LIMIT
from tests.acceptance.harness import Process, Processes, Side, race
from tests.acceptance.stack import Stack
from workflows.models import Event, Run, Step
from workflows.testing import run_pending

pytestmark = [pytest.mark.acceptance, pytest.mark.django_db(transaction=True)]

WORKFLOW = "acceptance_outside"
QUEUE = "outside"
ROUNDS = 4


def ready_runs(count: int) -> list[UUID]:
    """Runs whose external step is ready: started, and their first step run here."""
    runs = [workflows.start_run(WORKFLOW, {"n": n}).pk for n in range(count)]
    run_pending()
    assert Step.objects.filter(run__in=runs, name="charge", status="ready").count() == count
    return runs


def completions(run_ids: list[UUID]) -> dict[UUID, int]:
    """How many times each run's external step was recorded completed."""
    counted = dict.fromkeys(run_ids, 0)
    for event in Event.objects.filter(run__in=run_ids, type="step.completed", step__name="charge"):
        counted[event.run_id] += 1
    return counted


def test_two_processes_claiming_at_once_never_get_the_same_unit(
    processes: Processes, tmp_path: Path
):
    runs = ready_runs(2 * CLAIM_LIMIT * ROUNDS)
    sides = {name: Side([("claim_external", QUEUE, name)] * ROUNDS) for name in ("left", "right")}
    outcomes = race(processes, tmp_path / "race", sides)
    claimed: dict[str, list[str]] = {"left": [], "right": []}
    for round_ in outcomes:
        for name, outcome in round_.items():
            assert "error" not in outcome, outcome
            claimed[name] += [run for run, _, _ in outcome["result"]["jobs"]]
    every = claimed["left"] + claimed["right"]
    assert len(every) == len(set(every)), "a unit was claimed twice"
    assert set(every) == {str(run) for run in runs}
    for name, mine in claimed.items():
        owners = set(
            Step.objects.filter(run__in=mine, name="charge").values_list("lease_owner", "attempt")
        )
        assert owners == {(f"external:{name}", 1)}


def test_a_worker_that_stops_heartbeating_loses_the_unit_to_the_next_attempt(
    stack: Stack, tmp_path: Path
):
    stack.sweeper()  # reclaims expired leases
    (run,) = ready_runs(1)
    frozen = stack.processes.start(
        "external-frozen",
        "acceptance_external_worker",
        QUEUE,
        "frozen",
        str(tmp_path),
        "--work",
        "60",
        "--beat",
        "0.5",
    )
    stack.wait_for(
        "the first worker to claim", lambda: (tmp_path / "busy-frozen").exists(), timeout=60
    )
    stack.processes.signal(frozen, signal.SIGSTOP)
    try:
        healthy = stack.processes.start(
            "external-healthy",
            "acceptance_external_worker",
            QUEUE,
            "healthy",
            str(tmp_path),
            "--work",
            "0.2",
            "--jobs",
            "1",
        )
        healthy.watched = False  # it stops after its one job
        stack.wait_for(
            "the second worker to complete attempt 2",
            lambda: Step.objects.filter(run=run, name="charge", status="completed").exists(),
            timeout=60,
            run_ids=[run],
        )
    finally:
        stack.processes.signal(frozen, signal.SIGCONT)
    step = Step.objects.get(run=run, name="charge")
    assert step.output == {"by": "healthy", "run": str(run), "attempt": 2}
    assert Event.objects.filter(run=run, type="lease.expired").exists()
    lost = stack.wait_for(
        "the frozen worker, resumed, to find its lease lost",
        lambda: [line for line in _lines(frozen) if line["outcome"] == "lost"],
        timeout=30,
    )
    assert lost == [{"run": str(run), "attempt": 1, "outcome": "lost"}]
    assert completions([run]) == {run: 1}


def test_killed_external_workers_never_complete_a_step_twice(stack: Stack, tmp_path: Path):
    stack.qcluster()  # runs the in-process steps around the external one
    stack.sweeper()
    run_ids = stack.start_runs(WORKFLOW, [{"n": n} for n in range(12)])
    workers: dict[str, Process] = {}
    numbers = iter(range(1000))
    kills = []

    def start_worker() -> None:
        name = f"w{next(numbers)}"
        workers[name] = stack.processes.start(
            f"external-{name}",
            "acceptance_external_worker",
            QUEUE,
            name,
            str(tmp_path),
            "--work",
            "0.6",
            "--beat",
            "0.3",
        )

    for _ in range(3):
        start_worker()

    def chaos() -> None:
        # Every poll that finds a worker mid-job kills one, up to four: a
        # coin toss here once let the twelve runs finish after a single kill.
        busy = [name for name in workers if (tmp_path / f"busy-{name}").exists()]
        if len(kills) < 4 and busy:
            victim = random.choice(busy)
            stack.processes.signal(workers[victim], signal.SIGKILL)
            workers.pop(victim).watched = False
            kills.append(victim)
            start_worker()

    runs = stack.wait_finished(run_ids, timeout=240, on_poll=chaos)
    assert {run.status for run in runs.values()} == {"completed"}, stack.processes.logs()
    assert len(kills) >= 2, "the workers finished before enough of them were killed"
    assert set(completions(run_ids).values()) == {1}
    for step in Step.objects.filter(run__in=run_ids, name="charge"):
        # The output is the attempt that held the lease when it completed.
        assert step.output["attempt"] == step.attempts_in_round.attempt
    assert set(Run.objects.filter(pk__in=run_ids).values_list("status", flat=True)) == {"completed"}


def _lines(process: Process) -> list[dict[str, object]]:
    """The outcome lines an external worker printed so far."""
    return [
        json.loads(line)
        for line in process.log_path.read_text().splitlines()
        if line.startswith("{")
    ]
