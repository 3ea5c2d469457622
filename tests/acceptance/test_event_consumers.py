"""A consumer following the event history while real workers drive 200 runs, one of
them killed with SIGKILL midway: it gets every event at least once and never skips one.

On PostgreSQL the workers' transitions commit in parallel, so events commit out of id
order all the time; a cursor by id would skip some. The consumer here reads in commit
order (``workflows.consume``), acknowledges most batches and drops some (as a consumer
that crashed before acknowledging would): dropped batches come again, and at the end
what it received is compared with the whole history.
"""

from __future__ import annotations

import random
import threading
from collections import Counter

import pytest
from django.db import connections

import workflows
from tests.acceptance.invariants import completion_problems, idempotency_problems
from tests.acceptance.stack import Stack
from workflows.models import Event

pytestmark = [pytest.mark.acceptance, pytest.mark.django_db(transaction=True)]

RUNS = 200
WORKERS = 3
RUN_TIMEOUT = 300.0
DRAIN_TIMEOUT = 60.0
CONSUMER = "acceptance-follower"
# About half of the history (a run of acceptance_mixed writes some 30 events).
EVENTS_BEFORE_THE_KILL = RUNS * 15
# Batches of RUNS more runs started when the first ended before a worker could be killed.
EXTRA_BATCHES = 3


class Follower:
    """Consumes in a thread of its own until stopped: receives, then acknowledges the
    batch, except one batch in five, which it forgets (it comes again)."""

    def __init__(self) -> None:
        self.received: list[int] = []
        self.dropped_batches = 0
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._follow)

    def _follow(self) -> None:
        try:
            while not self.stop.is_set():
                self.take(wait=0.5)
        except BaseException as exc:  # reported by the test
            self.error = exc
        finally:
            connections.close_all()

    def take(self, wait: float, drop: float = 0.2) -> bool:
        """One batch: received and acknowledged, or dropped (probability ``drop``);
        whether there was one."""
        events = workflows.consume(CONSUMER, limit=500, wait=wait)
        self.received += [event.id for event in events]
        if events and random.random() < drop:
            self.dropped_batches += 1
        elif events:
            workflows.ack(CONSUMER, events[-1].cursor)
        return bool(events)


def test_a_consumer_gets_every_event_of_200_runs_while_a_worker_is_killed(stack: Stack):
    follower = Follower()
    follower.thread.start()
    try:
        cluster = stack.qcluster(workers=WORKERS)
        stack.sweeper()
        run_ids = stack.start_runs("acceptance_mixed", [{"pause": [0.0, 0.05]}] * RUNS)

        def kill_one_midway() -> None:
            # Midway by the history the workers wrote, not by what the follower has
            # read so far: a follower lagging behind must not push the kill past the end.
            if not stack.kills and Event.objects.count() > EVENTS_BEFORE_THE_KILL:
                stack.kill_random_worker(cluster)

        runs = stack.wait_finished(run_ids, timeout=RUN_TIMEOUT, on_poll=kill_one_midway)
        # The kill needs a worker inside a handler at a poll: should the runs have ended
        # first, more of them come, until one worker was killed mid-step.
        for _ in range(EXTRA_BATCHES):
            if stack.kills:
                break
            run_ids += stack.start_runs("acceptance_mixed", [{"pause": [0.0, 0.05]}] * RUNS)
            runs = stack.wait_finished(run_ids, timeout=RUN_TIMEOUT, on_poll=kill_one_midway)
    finally:
        follower.stop.set()
        follower.thread.join(DRAIN_TIMEOUT)
    assert follower.error is None, follower.error
    assert len(stack.kills) == 1, "one worker was killed in the middle of a step"
    assert {run.status for run in runs.values()} == {"completed"}

    history = set(Event.objects.values_list("id", flat=True))
    stack.wait_for(
        "the consumer to catch up with the history and acknowledge it all",
        lambda: not follower.take(wait=1, drop=0) and history <= set(follower.received),
        timeout=DRAIN_TIMEOUT,
    )
    assert len(history) > 1.5 * EVENTS_BEFORE_THE_KILL, "the kill came midway"
    received = Counter(follower.received)
    assert set(received) == history, "every event received, and nothing else"
    # At least once: what was dropped came again, so some events arrived twice.
    assert follower.dropped_batches == 0 or max(received.values()) > 1
    assert completion_problems(run_ids) == []
    assert idempotency_problems(run_ids) == []
    assert stack.monitor.problems == []
