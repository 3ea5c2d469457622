"""``flowsite_steps_progress_stale``: running steps that reported no progress for
``PROGRESS_STALE_AFTER``, counted from their last report or, without one, their start."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import override_settings
from django.utils import timezone

import workflows
from tests.metrics.test_metrics import ENABLED, HERE, Done, scrape
from workflows import Task, Workflow
from workflows.engine import claim_step
from workflows.models import Step

pytestmark = pytest.mark.django_db


class Export(Workflow):
    name = "metrics_export"
    work = Task(f"{HERE}.noop")


def running_step(workflow: type[Workflow], *, started_ago: timedelta) -> Step:
    """A step of a new run of ``workflow``, claimed by a worker ``started_ago``."""
    step = workflows.start_run(workflow).steps.get()
    claim_step(step.pk, "worker-1")
    Step.objects.filter(pk=step.pk).update(started_at=timezone.now() - started_ago)
    return step


def reported(step: Step, *, ago: timedelta) -> None:
    Step.objects.filter(pk=step.pk).update(
        progress_done=3, progress_total=10, progress_at=timezone.now() - ago
    )


@override_settings(WORKFLOWS={**ENABLED, "PROGRESS_STALE_AFTER": timedelta(minutes=5)})
def test_running_steps_silent_for_longer_than_the_setting_are_counted(client):
    running_step(Export, started_ago=timedelta(minutes=10))  # never reported: stale
    reported(running_step(Export, started_ago=timedelta(minutes=30)), ago=timedelta(minutes=6))
    reported(running_step(Export, started_ago=timedelta(minutes=30)), ago=timedelta(seconds=20))
    running_step(Done, started_ago=timedelta(minutes=1))  # just started: not stale
    finished = running_step(Done, started_ago=timedelta(hours=1))
    Step.objects.filter(pk=finished.pk).update(status="completed")  # no longer running

    samples = scrape(client)

    stale = {
        labels: value
        for (name, labels), value in samples.items()
        if name == "flowsite_steps_progress_stale"
    }
    assert stale == {(("step", "work"), ("workflow", "metrics_export")): 2}


@override_settings(WORKFLOWS={**ENABLED, "PROGRESS_STALE_AFTER": timedelta(hours=1)})
def test_the_setting_moves_the_threshold(client):
    running_step(Export, started_ago=timedelta(minutes=10))

    samples = scrape(client)

    assert not any(name == "flowsite_steps_progress_stale" for name, _ in samples)
