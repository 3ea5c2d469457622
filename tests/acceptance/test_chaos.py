"""Many runs through a cluster whose workers keep being killed."""

from __future__ import annotations

import random
import time
from uuid import UUID

import pytest

from tests.acceptance.invariants import every_problem
from workflows.models import Run

pytestmark = [pytest.mark.acceptance, pytest.mark.django_db(transaction=True)]

RUNS = 200
WORKERS = 3
SECONDS_BETWEEN_KILLS = (2.0, 4.0)
RUN_TIMEOUT = 300.0
BATCHES = 3


def test_mixed_runs_all_finish_exactly_once_while_workers_are_killed_every_few_seconds(stack):
    """Parallel branches, a join, a sleep and a failing-then-retried task in 200 runs, on 3
    workers, with a worker killed in the middle of a step every few seconds. The state
    monitor samples every row at each poll, so a version going back while it runs fails
    the test, not just a bad final state. On a quiet machine 200 runs may end before
    three kills: another batch then runs under the same chaos (at most :data:`BATCHES`)."""
    cluster = stack.qcluster(workers=WORKERS)
    stack.sweeper()
    next_kill = time.monotonic() + random.uniform(*SECONDS_BETWEEN_KILLS)

    def chaos() -> None:
        nonlocal next_kill
        if time.monotonic() >= next_kill and stack.kill_random_worker(cluster) is not None:
            next_kill = time.monotonic() + random.uniform(*SECONDS_BETWEEN_KILLS)

    run_ids: list[UUID] = []
    runs: dict[UUID, Run] = {}
    for _ in range(BATCHES):
        batch = stack.start_runs("acceptance_mixed", [{"pause": [0.0, 0.05]}] * RUNS)
        run_ids += batch
        runs |= stack.wait_finished(batch, timeout=RUN_TIMEOUT, on_poll=chaos)
        if len(stack.kills) >= 3:
            break

    assert len(stack.kills) >= 3, f"the chaos loop killed only {stack.kills}"
    not_completed = {
        pk: (run.status, run.error) for pk, run in runs.items() if run.status != "completed"
    }
    assert not_completed == {}
    assert every_problem(run_ids) == []
    assert stack.monitor.problems == []
    assert stack.monitor.samples > 10
    assert Run.objects.filter(pk__in=run_ids, status="completed").count() == len(run_ids)
