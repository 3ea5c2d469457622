"""A rate limit with real workers: starts shared across worker processes through the
database, held work released by the sweeper's timers, no window over the limit.

The starts are read on the database clock, the clock the limit counts on: each step's
``started_at``, written by the claim's ``UPDATE`` in the transaction that recorded the
start in the limit's bucket (``engine/rates.py``). The ``step.started`` events carry the
writing worker's own clock (``timezone.now()`` when the events are inserted), so they
only confirm that each step started exactly once.

Tolerance, one period, as the issue states. The limit stamps a start with the database
clock when it reads its bucket; ``started_at`` is stamped by a later statement of the
same transaction. The gap is normally a few milliseconds, but a stalled process on a
busy machine, or on PostgreSQL a wait for the bucket's row lock (the statement keeps the
moment it began), can stretch it, and the test makes no assumption about timing. Allow
each observed start to lag the limit's moment by up to one period: then the starts
observed in any window ``[a, b]`` were counted by the limit in ``[a - period, b]``, and
since no half-open window of one period holds more than the limit there,
``N * (floor((b - a) / period) + 2)`` bounds them: at most twice the limit in a window
shorter than one period, the limit plus one period's worth in general. Without the
limit, three workers start forty runs in well under one period.
"""

from __future__ import annotations

import math
from collections import Counter

import pytest

from tests.acceptance.flowapp.limits import RATE_LIMIT, RateLimited
from tests.acceptance.invariants import every_problem
from workflows.definitions.limits import RateLimit
from workflows.models import Event, Step, Timer

pytestmark = [pytest.mark.acceptance, pytest.mark.django_db(transaction=True)]

RUNS = 40
WORKERS = 3
RUN_TIMEOUT = 180.0


def over_the_limit(starts: list[float], rate: RateLimit) -> list[str]:
    """Every window of observed starts holding more than the limit plus one period's
    tolerance allows (see the module docstring)."""
    period = rate.period.total_seconds()
    starts = sorted(starts)
    found = []
    for first, begin in enumerate(starts):
        for last in range(first, len(starts)):
            span = starts[last] - begin
            allowed = rate.count * (math.floor(span / period) + 2)
            if last - first + 1 > allowed:
                found.append(f"{last - first + 1} starts in {span:.3f} s (allowed {allowed})")
    return found


def test_a_rate_limit_holds_across_worker_processes_within_one_period(stack):
    """Forty runs of a step limited to five starts per two seconds, on three worker
    processes: work over the limit is held and released by the sweeper's timer, no window
    holds more starts than the limit allows (with one period's tolerance), and every run
    completes. Over forty starts the limit alone spreads them over at least seven
    periods; the tolerance still requires six."""
    rate = RateLimit.parse(RATE_LIMIT)
    assert RateLimited.call.rate_limit == RATE_LIMIT
    for _ in range(WORKERS):
        stack.qcluster(workers=1)
    stack.sweeper()
    run_ids = stack.start_runs(RateLimited.name, [{}] * RUNS)

    runs = stack.wait_finished(run_ids, timeout=RUN_TIMEOUT)

    assert {run.status for run in runs.values()} == {"completed"}
    steps = Step.objects.filter(run__in=run_ids)
    assert Counter(steps.values_list("status", "attempt")) == {("completed", 1): RUNS}
    started = Counter(
        Event.objects.filter(run__in=run_ids, type="step.started").values_list("step_id", flat=True)
    )
    assert started == dict.fromkeys(steps.values_list("pk", flat=True), 1)
    starts = [step.started_at.timestamp() for step in steps]
    assert over_the_limit(starts, rate) == []
    # Six periods at least between the first start and the last, by the same bound.
    assert max(starts) - min(starts) > (RUNS / rate.count - 2) * rate.period.total_seconds()
    # The limit did bind: work was held on it and its release timers fired.
    held = Event.objects.filter(run__in=run_ids, type="step.held").values_list("payload", flat=True)
    assert {payload["on"] for payload in held} == {f"rate:task:{RateLimited.name}.call"}
    assert Timer.objects.filter(run__in=run_ids, kind="release", status="fired").exists()
    assert every_problem(run_ids) == []
    assert stack.monitor.problems == []
