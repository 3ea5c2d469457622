"""``flowsite_attempts_failed_total``: failed attempts by kind of work and failure class,
each attempt counted once."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.conf import settings
from django.test import override_settings
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

import workflows
from workflows import FanOut, PermanentError, Retry, Task, Workflow
from workflows.engine import STEP, claim_step, reclaim
from workflows.models import Event, Step
from workflows.testing import run_pending

pytestmark = pytest.mark.django_db

HERE = "tests.metrics.test_failed_attempts"
TOKEN = "scrape-token-for-tests"
ENABLED = {**settings.WORKFLOWS, "METRICS_ENABLED": True, "METRICS_TOKEN": TOKEN}
NAME = "flowsite_attempts_failed_total"


def fails(ctx):
    raise ConnectionError(f"attempt {ctx.attempt} failed")


def declines(ctx):
    raise PermanentError("declined")


def noop(ctx):
    return None


TWICE = Retry(max_attempts=2, initial_interval=timedelta(seconds=1))


class Failing(Workflow):
    name = "failed_metrics_failing"
    work = Task(f"{HERE}.fails", retry=TWICE)


class Declining(Workflow):
    name = "failed_metrics_declining"
    work = Task(f"{HERE}.declines", retry=TWICE)


class Vanishing(Workflow):
    name = "failed_metrics_vanishing"
    work = Task(f"{HERE}.noop", retry=Retry(max_attempts=3, retry_on={"transient"}))


class Items(Workflow):
    name = "failed_metrics_items"
    spread = FanOut(
        f"{HERE}.fails", items=lambda ctx: [1, 2], retry=Retry(max_attempts=1), tolerated_failures=1
    )


def failed_attempts(client) -> dict[tuple[str, str, str, str], float]:
    response = client.get("/metrics/", headers={"Authorization": f"Bearer {TOKEN}"})
    assert response.status_code == 200, response.content
    return {
        (s.labels["workflow"], s.labels["step"], s.labels["kind"], s.labels["failure_class"]): (
            s.value
        )
        for family in text_string_to_metric_families(response.content.decode())
        for s in family.samples
        if s.name == NAME
    }


@override_settings(WORKFLOWS=ENABLED)
def test_failed_attempts_are_counted_once_each_by_kind_and_class(client):
    workflows.start_run(Failing)
    workflows.start_run(Declining)
    workflows.start_run(Items)
    run_pending(until=timezone.now() + timedelta(minutes=1))
    vanishing = workflows.start_run(Vanishing)
    step = Step.objects.get(run=vanishing)
    claim_step(step.pk, "gone")
    assert reclaim(STEP, step.pk, now=timezone.now() + timedelta(hours=1)) == "failed"
    # A failure recorded before failure classes existed has none: it is not counted.
    Event.objects.create(run=vanishing, type="step.failed", payload={"error": "old"})

    assert failed_attempts(client) == {
        # a retry and the final failure: two attempts
        ("failed_metrics_failing", "work", "step", "transient"): 2,
        ("failed_metrics_declining", "work", "step", "permanent"): 1,
        ("failed_metrics_items", "spread", "item", "transient"): 2,
        # lease.expired and the step.failed it caused are one attempt
        ("failed_metrics_vanishing", "work", "step", "lease_expired"): 1,
    }
