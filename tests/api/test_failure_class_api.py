"""The failure class of a step's or an item's last failed attempt in the API: the step,
its items and the run's steps (with ``last_failure`` in words)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

import workflows
from workflows import FanOut, PermanentError, Retry, Task, Workflow
from workflows.testing import run_pending

pytestmark = pytest.mark.django_db

HERE = "tests.api.test_failure_class_api"


def flaky(ctx):
    raise ConnectionError("try again")


def declines(ctx):
    if ctx.item == 2:
        raise PermanentError("declined")
    return ctx.item


class Flaky(Workflow):
    name = "api_failure_flaky"
    charge = Task(f"{HERE}.flaky", retry=Retry(max_attempts=2))


class Items(Workflow):
    name = "api_failure_items"
    spread = FanOut(f"{HERE}.declines", items=lambda ctx: [1, 2], tolerated_failures=1)


def test_a_step_says_the_class_of_its_last_failed_attempt(api):
    run = workflows.start_run(Flaky)
    run_pending()
    step = run.steps.get()
    body = api("viewer").get(f"/api/steps/{step.pk}/").json()
    assert (body["status"], body["failure_class"]) == ("retry_scheduled", "transient")
    assert body["error"]["failure_class"] == "transient"
    detail = api("viewer").get(f"/api/runs/{run.pk}/").json()
    [entry] = detail["steps"]
    assert entry["failure_class"] == "transient"
    assert entry["last_failure"] == "last attempt failed: transient"

    run_pending(until=timezone.now() + timedelta(hours=1))
    body = api("viewer").get(f"/api/steps/{step.pk}/").json()
    assert (body["status"], body["failure_class"]) == ("failed", "transient")


def test_a_step_that_never_failed_has_a_null_class(api):
    run = workflows.start_run(Items)
    run_pending()
    step = run.steps.get()
    assert api("viewer").get(f"/api/steps/{step.pk}/").json()["failure_class"] is None
    items = api("viewer").get(f"/api/steps/{step.pk}/items/").json()["results"]
    assert [(item["item"], item["failure_class"]) for item in items] == [
        (1, None),
        (2, "permanent"),
    ]
    [entry] = api("viewer").get(f"/api/runs/{run.pk}/").json()["steps"]
    assert (entry["failure_class"], entry["last_failure"]) == (None, None)


def test_the_schema_names_the_classes(api):
    schema = api("viewer").get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    components = schema.json()["components"]["schemas"]
    prop = components["Step"]["properties"]["failure_class"]
    assert prop["nullable"] is True
    enums = [components[ref["$ref"].rsplit("/", 1)[1]]["enum"] for ref in prop["oneOf"]]
    assert enums[0] == [
        "transient",
        "permanent",
        "timeout",
        "lease_expired",
        "revoked",
        "cancelled",
        "budget",
    ]
