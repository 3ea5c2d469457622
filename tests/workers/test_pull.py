"""A queue worker whose chain ends pulls the next ready work of its route from the
database instead of waiting for the queue to hand it over; the nudges of pulled work
then cost one read and write nothing."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

import workflows
from tests.support.handlers import NOOP
from workflows import FanOut, Task, Workflow
from workflows.engine import STEP, claim_step
from workflows.engine.claims import claim
from workflows.engine.routing import CAPABILITIES_ENV, QUEUES_ENV
from workflows.errors import WorkHeld
from workflows.models import Event, FanOutItem, Run, Step
from workflows.status import RunStatus, StepStatus
from workflows.tasks import run_item, run_step
from workflows.workers.runner import execute, stop_when

pytestmark = pytest.mark.django_db

HERE = "tests.workers.test_pull"


def echo(ctx):
    return ctx.item


def by_customer(ctx):
    return f"customer:{ctx.input['customer']}"


class Pair(Workflow):
    name = "pull_pair"
    first = Task(NOOP)
    second = Task(NOOP)


class OnGpu(Workflow):
    name = "pull_on_gpu"
    render = Task(NOOP, queue="gpu")


class OneAtATime(Workflow):
    name = "pull_one_at_a_time"
    charge = Task(NOOP, concurrency_key=by_customer, max_concurrent=1)


class Spread(Workflow):
    name = "pull_spread"
    each = FanOut(f"{HERE}.echo", items=lambda ctx: [1, 2, 3])


def first_step(run: Run, name: str = "first") -> Step:
    return Step.objects.get(run=run, name=name)


def start_order(runs: list[Run]) -> list[Run]:
    """The runs in the order their first step started (``step.started`` events)."""
    started = Event.objects.filter(run__in=runs, type="step.started").order_by("id")
    order = list(dict.fromkeys(started.values_list("run_id", flat=True)))
    by_id = {run.pk: run for run in runs}
    return [by_id[run_id] for run_id in order]


def test_a_worker_whose_chain_ends_runs_the_other_ready_runs(recording):
    runs = [workflows.start_run(Pair, {}) for _ in range(3)]
    assert len(recording) == 3  # one nudge per run

    assert run_step(first_step(runs[0]).pk) == 6

    assert set(Run.objects.values_list("status", flat=True)) == {RunStatus.COMPLETED}
    owners = set(Step.objects.values_list("lease_owner", flat=True))
    assert len(owners) == 1  # one worker ran all three runs
    assert start_order(runs) == runs  # oldest ready first


def test_the_nudges_of_pulled_work_read_once_and_write_nothing(recording):
    runs = [workflows.start_run(Pair, {}) for _ in range(2)]
    run_step(first_step(runs[0]).pk)
    events, pulled = Event.objects.count(), first_step(runs[1])
    assert pulled.status == StepStatus.COMPLETED

    with CaptureQueriesContext(connection) as captured:
        assert run_step(pulled.pk) == 0

    (statement,) = [query["sql"] for query in captured.captured_queries]
    assert statement.startswith("SELECT")  # no transaction, no savepoint, no write
    assert Event.objects.count() == events


def test_pulled_work_goes_highest_priority_first(recording):
    low = workflows.start_run(Pair, {})
    urgent = workflows.start_run(Pair, {}, priority=5)
    later = workflows.start_run(Pair, {})

    run_step(first_step(low).pk)

    # The nudge for `low` takes the more urgent run first; its own unit comes next.
    assert start_order([low, urgent, later]) == [urgent, low, later]


def test_a_pull_stays_on_the_route_of_the_nudge(recording, monkeypatch):
    monkeypatch.setenv(QUEUES_ENV, "default,gpu")
    monkeypatch.setenv(CAPABILITIES_ENV, "")
    plain = workflows.start_run(Pair, {})
    gpu = workflows.start_run(OnGpu, {})
    another = workflows.start_run(Pair, {})

    assert run_step(first_step(plain).pk) == 4  # its own run, then `another`

    assert another.steps.filter(status=StepStatus.COMPLETED).count() == 2
    assert first_step(gpu, "render").status == StepStatus.READY
    assert run_step(first_step(gpu, "render").pk) == 1


def test_held_work_and_paused_runs_are_not_pulled(recording):
    holder = workflows.start_run(OneAtATime, {"customer": 7})
    waiting = workflows.start_run(OneAtATime, {"customer": 7})
    paused = workflows.start_run(Pair, {})
    plain = workflows.start_run(Pair, {})
    another = workflows.start_run(Pair, {})
    claim_step(first_step(holder, "charge").pk, "another-worker")
    with pytest.raises(WorkHeld):
        claim(STEP, first_step(waiting, "charge").pk, "another-worker")
    workflows.pause_run(paused)

    assert run_step(first_step(plain).pk) == 4  # its own run, then `another`

    assert another.steps.filter(status=StepStatus.COMPLETED).count() == 2

    assert first_step(waiting, "charge").status == StepStatus.READY
    assert first_step(waiting, "charge").held_on == "concurrency:customer:7"
    assert first_step(paused).status == StepStatus.READY


def test_pulling_ends_with_the_chain_budget(recording, settings):
    settings.WORKFLOWS = {**settings.WORKFLOWS, "CHAIN_BUDGET": timedelta(0)}
    runs = [workflows.start_run(Pair, {}) for _ in range(2)]

    assert run_step(first_step(runs[0]).pk) == 1

    assert first_step(runs[0], "second").status == StepStatus.READY
    assert first_step(runs[1]).status == StepStatus.READY


def test_a_worker_of_items_pulls_the_items_of_other_fan_outs(recording):
    runs = [workflows.start_run(Spread, {}) for _ in range(2)]
    nudged = [unit_id for kind, unit_id, _ in recording if kind.name == "item"]
    assert len(nudged) == 6

    assert run_item(nudged[0]) == 6

    assert set(FanOutItem.objects.values_list("status", flat=True)) == {StepStatus.COMPLETED}
    assert set(Run.objects.values_list("status", flat=True)) == {RunStatus.COMPLETED}
    assert len(set(FanOutItem.objects.values_list("lease_owner", flat=True))) == 1
    for run in runs:
        assert first_step(run, "each").output == [1, 2, 3]


def test_only_queue_workers_pull(recording):
    """``execute`` pulls when asked (the queue's entry points do); ``run_pending``, one
    loop over every ready unit already, does not ask."""
    runs = [workflows.start_run(Pair, {}) for _ in range(2)]

    assert execute(STEP, first_step(runs[0]).pk, owner="inline") == 2

    assert first_step(runs[1]).status == StepStatus.READY


def test_a_worker_of_a_stopping_cluster_ends_with_the_attempt_in_hand(recording):
    stopping = threading.Event()
    stop_when(stopping)
    try:
        runs = [workflows.start_run(Pair, {}) for _ in range(2)]
        stopping.set()

        assert run_step(first_step(runs[0]).pk) == 1

        assert first_step(runs[0], "second").status == StepStatus.READY  # not chained
        assert first_step(runs[1]).status == StepStatus.READY  # not pulled
        stopping.clear()
        assert run_step(first_step(runs[1]).pk) == 3  # its run, then the one left ready
    finally:
        stop_when(None)
