"""``explain`` names what keeps ready work from starting: no live worker of its route,
a concurrency limit, a rate limit, a budget; and what keeps a queued run from starting.

The claim engine writes a held unit's ``held_on`` and a queued run's status; here they
are set as plain columns, so each test reads one hold the way every surface shows it.
Worker presence rows are written by :func:`workflows.workers.presence.report_presence`, the
function the worker command calls.
"""

from __future__ import annotations

import json
from datetime import timedelta
from io import StringIO
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

import workflows
from tests.support.handlers import NOOP
from workflows import FanOut, Task, Workflow
from workflows.admin.run_page import hold_text
from workflows.engine import claim_step
from workflows.engine.routing import INLINE_OWNER, WorkerRoutes
from workflows.models import FanOutItem, Run, Step, Timer, WorkerPresence
from workflows.queries.explain import QUERIES
from workflows.queries.workers import MISSED_INTERVALS
from workflows.status import RunStatus, TimerKind
from workflows.workers.presence import report_presence

pytestmark = pytest.mark.django_db

# Work goes to django-q2 workers only with this executor; inline, run_pending runs all.
WORKERS = override_settings(WORKFLOWS={"EXECUTOR": "django_q"})


class Training(Workflow):
    name = "holds_training"
    prepare = Task(NOOP)
    train = Task(NOOP, queue="gpu", requires={"cuda"}, after=[])


class Fitting(Workflow):
    name = "holds_fitting"
    fit = FanOut(
        NOOP,
        items=lambda ctx: ["a", "b"],
        requires={"cuda", "avx512"},
        max_parallel=2,
    )


class Calls(Workflow):
    name = "holds_calls"
    call = Task(
        NOOP,
        concurrency_key=lambda ctx: ctx.input["customer"],
        max_concurrent=2,
        rate_limit="5/m",
    )


class Limited(Workflow):
    name = "holds_limited"
    max_concurrent_runs = 1
    only = Task(NOOP)


def entries(run: Run, kind: str | None = None) -> list[dict[str, Any]]:
    data = workflows.explain(run).as_dict()
    assert json.loads(json.dumps(data)) == data
    return [entry for entry in data["waiting_on"] if kind is None or entry["kind"] == kind]


def present(name: str, queues: list[str], capabilities: list[str] = ()) -> None:
    assert report_presence(name, WorkerRoutes(frozenset(queues), frozenset(capabilities)))


def hold(run: Run, step: str, held_on: str) -> Step:
    Step.objects.filter(run=run, name=step).update(held_on=held_on)
    return Step.objects.get(run=run, name=step)


# worker


def test_ready_work_no_live_worker_serves_waits_for_a_worker_of_its_route():
    run = workflows.start_run(Training)
    present("host-a:1", ["default"])
    with WORKERS:
        [entry] = entries(run, "worker")
        assert {**entry, "since": None} == {
            "kind": "worker",
            "step": "train",
            "unit": "step",
            "item": None,
            "since": None,
            "queue": "gpu",
            "requires": ["cuda"],
            "message": "waiting for a worker of queue 'gpu' with capability cuda",
        }
        # The default queue's step has its worker: it waits to be picked up.
        assert [entry["step"] for entry in entries(run, "dispatch")] == ["prepare"]


def test_a_worker_of_the_queue_without_the_capability_does_not_serve_it():
    run = workflows.start_run(Training)
    present("host-a:1", ["default", "gpu"])
    present("host-b:1", ["default"], ["cuda"])
    with WORKERS:
        assert [entry["step"] for entry in entries(run, "worker")] == ["train"]
    present("host-c:1", ["gpu"], ["cuda", "fp16"])
    with WORKERS:
        assert entries(run, "worker") == []
        assert [entry["step"] for entry in entries(run, "dispatch")] == ["prepare", "train"]


def test_a_worker_not_seen_for_three_intervals_is_gone():
    run = workflows.start_run(Training)
    present("host-c:1", ["default", "gpu"], ["cuda"])
    interval = timedelta(seconds=10)
    with override_settings(
        WORKFLOWS={"EXECUTOR": "django_q", "WORKER_PRESENCE_INTERVAL": interval}
    ):
        seen = WorkerPresence.objects.get().seen_at
        assert entries(run, "worker") == []
        later = seen + MISSED_INTERVALS * interval + timedelta(seconds=1)
        gone = workflows.explain(run, now=later).as_dict()["waiting_on"]
        assert {(entry["kind"], entry["step"]) for entry in gone} == {
            ("worker", "prepare"),
            ("worker", "train"),
        }
        [prepare] = [entry for entry in gone if entry["step"] == "prepare"]
        assert prepare["message"] == "waiting for a worker of queue 'default'"


def test_fanout_items_name_every_capability_they_need():
    run = workflows.start_run(Fitting)
    present("host-a:1", ["default"], ["cuda"])
    with WORKERS:
        found = entries(run, "worker")
    assert [(entry["step"], entry["item"]) for entry in found] == [("fit", "0"), ("fit", "1")]
    assert {entry["message"] for entry in found} == {
        "waiting for a worker of queue 'default' with capabilities avx512, cuda"
    }


def test_inline_execution_serves_every_route():
    """run_pending stands in for every worker: nothing waits for one."""
    run = workflows.start_run(Training)
    assert entries(run, "worker") == []
    assert len(entries(run, "dispatch")) == 2


# limits written by the claim


def test_a_concurrency_hold_names_its_key_limit_and_held_slots():
    holder_run = workflows.start_run(Calls, {"customer": "c-1"})
    claim_step(holder_run.steps.get().pk, INLINE_OWNER)  # takes a slot of c-1
    run = workflows.start_run(Calls, {"customer": "c-1"})
    hold(run, "call", "concurrency:c-1")
    [entry] = entries(run)
    assert (entry["kind"], entry["step"], entry["key"]) == ("concurrency", "call", "c-1")
    assert (entry["limit"], entry["held"]) == (2, 1)
    assert entry["message"] == "waiting for a free place under concurrency limit c-1 (1 of 2 held)"


def test_a_rate_hold_says_when_the_next_start_is_due():
    run = workflows.start_run(Calls, {"customer": "c-2"})
    step = hold(run, "call", "rate:task:holds_calls.call")
    due = timezone.now() + timedelta(seconds=12)
    Timer.objects.create(run=run, step=step, kind=TimerKind.RELEASE, due_at=due)
    [entry] = entries(run, "rate")
    assert entry["key"] == "task:holds_calls.call"
    assert entry["limit"] == "5/m"
    assert entry["due_at"] == due.isoformat()
    assert entry["message"] == "delayed by rate limit task:holds_calls.call"
    assert entries(run, "timer") == []  # told once, by the hold


def test_a_queue_rate_hold_names_the_queue_limit():
    run = workflows.start_run(Training)
    hold(run, "prepare", "rate:queue:default")
    with override_settings(WORKFLOWS={"QUEUE_RATE_LIMITS": {"default": "100/m"}}):
        [entry] = entries(run, "rate")
    assert (entry["step"], entry["limit"], entry["due_at"]) == ("prepare", "100/m", None)


def test_a_budget_hold_names_its_dimension():
    run = workflows.start_run(Training)
    hold(run, "prepare", "budget:tokens")
    [entry] = entries(run, "budget")
    assert (entry["step"], entry["dimension"]) == ("prepare", "tokens")
    assert entry["message"] == "held: budget tokens exhausted"
    assert [entry["step"] for entry in entries(run, "dispatch")] == ["train"]


def test_a_missing_worker_comes_before_a_limit():
    run = workflows.start_run(Training)
    hold(run, "train", "budget:tokens")
    present("host-a:1", ["default"])
    with WORKERS:
        assert [entry["kind"] for entry in entries(run) if entry["step"] == "train"] == ["worker"]


def test_a_queued_run_counts_the_runs_that_start_before_it():
    """Highest priority first, oldest first: the order queued runs start in."""
    first, second, third, urgent = (workflows.start_run(Limited) for _ in range(4))
    Run.objects.filter(pk__in=[first.pk, second.pk, third.pk, urgent.pk]).update(
        status=RunStatus.QUEUED
    )
    Run.objects.filter(pk=urgent.pk).update(priority=5)
    ahead = {run.pk: entries(run, "queued")[0] for run in (first, second, third, urgent)}
    assert [ahead[run.pk]["ahead"] for run in (urgent, first, second, third)] == [0, 1, 2, 3]
    assert ahead[third.pk] == {
        "kind": "queued",
        "step": None,
        "workflow": "holds_limited",
        "ahead": 3,
        "max_concurrent_runs": 1,
        "message": "queued behind 3 earlier runs of workflow holds_limited (max_concurrent_runs 1)",
    }
    assert ahead[first.pk]["message"].startswith("queued behind 1 earlier run of")


# cost


def cost(run: Run) -> int:
    with CaptureQueriesContext(connection) as captured:
        workflows.explain(run)
    return len(captured.captured_queries)


def test_the_live_workers_are_one_more_query_and_only_for_ready_work_on_workers():
    run = workflows.start_run(Training)
    assert cost(run) == QUERIES
    with WORKERS:
        # One read of the presence table, whatever the number of ready units.
        assert cost(run) == QUERIES + 1
        for step in run.steps.all():
            claim_step(step.pk, INLINE_OWNER)
        assert cost(run) == QUERIES  # nothing ready: no worker to look for


def test_held_slots_are_counted_once_per_concurrency_key_and_for_a_few_keys_only():
    runs = [workflows.start_run(Calls, {"customer": f"c-{n}"}) for n in range(5)]
    for run in runs:
        hold(run, "call", f"concurrency:c-{runs.index(run)}")
    assert cost(runs[0]) == QUERIES + 1
    many = workflows.start_run(Fitting)
    FanOutItem.objects.filter(step__run=many).update(held_on="concurrency:shared")
    assert cost(many) == QUERIES + 1


# surfaces


def test_the_admin_run_page_words_each_hold():
    now = timezone.now()
    run = workflows.start_run(Training)
    present("host-a:1", ["default"])
    hold(run, "prepare", "budget:tokens")
    with WORKERS:
        explanation = workflows.explain(run, now=now)
    assert [hold_text(entry, now) for entry in explanation.waiting_on] == [
        "Step “prepare”: held: budget tokens exhausted",
        "Step “train”: waiting for a worker of queue 'gpu' with capability cuda",
    ]
    step = hold(run, "prepare", "rate:queue:default")
    Timer.objects.create(
        run=run, step=step, kind=TimerKind.RELEASE, due_at=now + timedelta(minutes=2)
    )
    rate = [e for e in workflows.explain(run, now=now).waiting_on if e.kind == "rate"]
    assert hold_text(rate[0], now) == (
        "Step “prepare”: delayed by rate limit queue:default; next start in 2\xa0minutes"
    )
    fit = workflows.start_run(Fitting)
    with WORKERS:
        [item, _] = workflows.explain(fit, now=now).waiting_on[1:]
    assert hold_text(item, now).startswith("Item 0 of “fit”: waiting for a worker")
    queued = workflows.start_run(Limited)
    Run.objects.filter(pk=queued.pk).update(status=RunStatus.QUEUED)
    [entry] = [e for e in workflows.explain(queued, now=now).waiting_on if e.kind == "queued"]
    assert hold_text(entry, now).startswith("Queued behind 0 earlier runs of workflow")


def test_workflows_show_prints_the_hold_and_its_message():
    run = workflows.start_run(Training)
    present("host-a:1", ["default"])
    out = StringIO()
    with WORKERS:
        call_command("workflows_show", str(run.pk), stdout=out)
    [line] = [line for line in out.getvalue().splitlines() if line.startswith("worker")]
    assert "train" in line
    assert "Step “train”: waiting for a worker" in line
    assert "waiting for a worker of queue 'gpu' with capability cuda" in line


def test_the_api_returns_the_hold_kinds(client):
    user = User.objects.create_superuser("ops", "ops@example.com", "pw")
    client.force_login(user)
    run = workflows.start_run(Training)
    hold(run, "prepare", "concurrency:c-9")
    response = client.get(f"/api/runs/{run.pk}/")
    assert response.status_code == 200
    [entry] = [entry for entry in response.json()["waiting_on"] if entry["step"] == "prepare"]
    assert entry["kind"] == "concurrency"
    assert entry["details"]["key"] == "c-9"
    assert entry["details"]["message"].startswith("waiting for a free place under")
