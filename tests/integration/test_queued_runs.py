"""Run-level concurrency: ``max_concurrent_runs``, the ``queued`` status, the backstop."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User

import workflows
from workflows import InvalidTransition, Task, WaitForSignal, Workflow
from workflows.engine import slots
from workflows.engine.run_limits import slot_key
from workflows.explanation import explain
from workflows.models import Event, Run, Step
from workflows.scanners import recover, start_queued_runs
from workflows.testing import run_pending

HERE = "tests.integration.test_queued_runs"


def record(ctx: Any) -> str:
    return ctx.step_name


def boom(ctx: Any) -> None:
    raise workflows.PermanentError("no")


class Held(Workflow):
    """Each run waits for the signal "go", so the test decides when it ends."""

    name = "queued_held"
    max_concurrent_runs = 2
    hold = WaitForSignal("go")
    work = Task(f"{HERE}.record")


def start_five() -> list[Run]:
    return [workflows.start_run(Held, {"n": n}) for n in range(5)]


def statuses(runs: list[Run]) -> list[str]:
    by_id = dict(Run.objects.filter(pk__in=[r.pk for r in runs]).values_list("id", "status"))
    return [by_id[run.pk] for run in runs]


def finish(run: Run) -> None:
    workflows.send_signal(run, "go")
    run_pending()


def most_active_at_once(name: str) -> int:
    """The most runs of ``name`` active at one point of the history, from its events:
    a run is active from its ``run.started`` to its final status."""
    final = {f"run.{status}" for status in workflows.models.RunStatus if status in _FINAL}
    active, most = set(), 0
    for run_id, kind in (
        Event.objects.filter(run__workflow_name=name).order_by("id").values_list("run_id", "type")
    ):
        if kind == "run.started":
            active.add(run_id)
        elif kind in final:
            active.discard(run_id)
        most = max(most, len(active))
    return most


from workflows.status import RUN_FINAL as _FINAL  # noqa: E402


@pytest.mark.django_db
def test_two_run_and_three_wait_queued_in_order():
    runs = start_five()
    run_pending()
    assert statuses(runs) == ["waiting", "waiting", "queued", "queued", "queued"]
    queued = runs[2]
    assert not Step.objects.filter(run=queued).exclude(status="pending").exists()
    assert list(Event.objects.filter(run=queued).values_list("type", flat=True)) == ["run.queued"]
    assert slots.held(slot_key("queued_held")) == 2
    finish(runs[0])
    assert statuses(runs) == ["completed", "waiting", "waiting", "queued", "queued"]
    finish(runs[1])
    finish(runs[2])
    finish(runs[3])
    finish(runs[4])
    assert statuses(runs) == ["completed"] * 5
    assert most_active_at_once("queued_held") == 2
