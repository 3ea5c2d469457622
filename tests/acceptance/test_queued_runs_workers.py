"""max_concurrent_runs with real workers: never more runs active than the limit."""

from __future__ import annotations

import pytest

from tests.acceptance.invariants import most_active_at_once
from tests.acceptance.stack import Stack
from workflows.models import Event, Run
from workflows.status import RUN_FINAL

pytestmark = [pytest.mark.acceptance, pytest.mark.django_db(transaction=True)]

RUNS = 20
LIMIT = 3  # acceptance_limited_runs.max_concurrent_runs
TIMEOUT = 180.0


def test_twenty_runs_with_two_workers_never_have_more_than_three_active(stack: Stack):
    stack.qcluster(workers=2)
    stack.sweeper()
    run_ids = stack.start_runs("acceptance_limited_runs", [{"pause": [0.05, 0.2]}] * RUNS)
    started = Run.objects.filter(pk__in=run_ids)
    assert started.exclude(status__in=[*RUN_FINAL, "queued"]).count() <= LIMIT
    runs = stack.wait_finished(run_ids, timeout=TIMEOUT)
    assert {run.status for run in runs.values()} == {"completed"}
    assert most_active_at_once(run_ids) <= LIMIT
    queued = set(
        Event.objects.filter(run_id__in=run_ids, type="run.queued").values_list("run_id", flat=True)
    )
    dequeued = set(
        Event.objects.filter(run_id__in=run_ids, type="run.dequeued").values_list(
            "run_id", flat=True
        )
    )
    assert dequeued == queued  # every queued run was started by a place freeing up
