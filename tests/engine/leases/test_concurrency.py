"""Races between real threads and processes on a real database file or server.

Each test commits for real (``transaction=True``) so that concurrent connections see
each other's work, exactly as separate workers do.
"""

from __future__ import annotations

import multiprocessing
import os
import queue
from functools import partial
from typing import Any

import pytest
from django.db import connections

import workflows
from tests.support.handlers import NOOP
from tests.support.runs import claimed
from workflows import IdempotencyConflict, StaleState, Task, Workflow
from workflows.engine import claim_step, complete_work
from workflows.models import Run, Step
from workflows.testing import run_pending

pytestmark = pytest.mark.django_db(transaction=True)

PROCESS_TIMEOUT_SECONDS = 60


class Single(Workflow):
    name = "race_single"
    only = Task(NOOP)


class Diamond(Workflow):
    name = "race_diamond"
    start = Task(NOOP)
    left = Task(NOOP, after=["start"])
    right = Task(NOOP, after=["start"])
    join = Task(NOOP, after=["left", "right"])


def test_two_threads_claiming_one_step_exactly_one_wins(concurrently):
    for _ in range(10):
        run = workflows.start_run(Single)
        step_id = Step.objects.get(run=run).pk
        results = concurrently(
            partial(claim_step, step_id, "thread-a"), partial(claim_step, step_id, "thread-b")
        )
        winners = [r for r in results if not isinstance(r, Exception)]
        losers = [r for r in results if isinstance(r, Exception)]
        assert len(winners) == 1, results
        assert len(losers) == 1 and isinstance(losers[0], StaleState), results
        step = Step.objects.get(pk=step_id)
        assert (step.status, step.attempt, step.lease_owner) == ("running", 1, winners[0].owner)
        assert run.events.filter(type="step.started").count() == 1


def _claim_all(step_ids: list[int], owner: str, barrier: Any, results: Any) -> None:
    """Child process: claim every step it can; report the ones it won.

    A claim whose step another process took first takes another ready step of the
    route, as a queue message would: what a process won is the lease's step.
    """
    connections.close_all()
    won, lost = [], 0
    try:
        barrier.wait(timeout=PROCESS_TIMEOUT_SECONDS)
        for step_id in step_ids:
            try:
                lease = claim_step(step_id, owner)
            except StaleState:
                lost += 1
            else:
                won.append(lease.unit_id)
        results.put((owner, won, lost, None))
    except Exception as exc:  # reported to the parent, which fails the test
        results.put((owner, won, lost, repr(exc)))
    finally:
        connections.close_all()
        results.close()
        results.join_thread()  # flush the report before the hard exit below
        os._exit(0)


@pytest.mark.processes
def test_processes_claiming_the_same_steps_each_step_has_one_winner():
    runs = [workflows.start_run(Single) for _ in range(30)]
    step_ids = list(Step.objects.filter(run__in=runs).values_list("pk", flat=True))
    connections.close_all()
    context = multiprocessing.get_context("fork")
    barrier = context.Barrier(3)
    results = context.Queue()
    processes = [
        context.Process(target=_claim_all, args=(step_ids, f"proc-{n}", barrier, results))
        for n in range(3)
    ]
    for process in processes:
        process.start()
    try:
        reports = [results.get(timeout=PROCESS_TIMEOUT_SECONDS) for _ in processes]
    except queue.Empty:
        pytest.fail("a claiming process did not report in time")
    finally:
        for process in processes:
            process.join(timeout=10)
            if process.is_alive():
                process.kill()
    assert [error for *_, error in reports] == [None, None, None]
    won = [step_id for _, steps, _, _ in reports for step_id in steps]
    assert sorted(won) == sorted(step_ids)  # every step claimed, none twice
    assert sum(lost for _, _, lost, _ in reports) == 2 * len(step_ids)
    owners = dict(Step.objects.filter(pk__in=step_ids).values_list("pk", "lease_owner"))
    for owner, steps, _, _ in reports:
        assert all(owners[step_id] == owner for step_id in steps)
    assert set(Step.objects.filter(pk__in=step_ids).values_list("attempt", flat=True)) == {1}


def test_join_fires_once_when_both_branches_finish_at_the_same_moment(concurrently):
    for _ in range(10):
        run = workflows.start_run(Diamond)
        start = claimed(run, "start", "w")
        complete_work(start, None)
        left = claimed(run, "left", "left-worker")
        right = claimed(run, "right", "right-worker")
        results = concurrently(
            partial(complete_work, left, None), partial(complete_work, right, None)
        )
        assert results == [None, None]
        join = Step.objects.get(run=run, name="join")
        assert join.status == "ready"
        assert run.events.filter(step=join, type="step.ready").count() == 1
    run_pending()
    assert set(Run.objects.values_list("status", flat=True)) == {"completed"}


def test_concurrent_idempotent_starts_create_one_run(concurrently):
    def start():
        return workflows.start_run(Single, {"order": 7}, idempotency_key="same-key").pk

    results = concurrently(start, start, start, start)
    assert len(set(results)) == 1, results
    assert Run.objects.filter(idempotency_key="same-key").count() == 1
    conflicting = concurrently(
        lambda: workflows.start_run(Single, {"order": 8}, idempotency_key="same-key")
    )
    assert isinstance(conflicting[0], IdempotencyConflict)
