"""Run tags in webhooks: every delivery of a run's event carries the run's tags
(``data.tags``), as they are when the delivery is recorded; ``{}`` for a run without."""

from __future__ import annotations

import pytest

import workflows
from tests.support.webhook_receiver import Receiver
from workflows import Task, Workflow
from workflows.testing import run_pending
from workflows.webhooks import services

pytestmark = pytest.mark.django_db

HERE = __name__


def ship(ctx):
    ctx.set_tags({"shipped": "yes"})
    return {"ok": True}


class Tagged(Workflow):
    name = "webhooks_tagged"
    ship = Task(f"{HERE}.ship")


def test_a_run_events_deliveries_carry_its_tags():
    with Receiver() as receiver:
        endpoint = services.create_endpoint(url=receiver.url, event_types=["*"])
        receiver.secret = endpoint.secret
        workflows.start_run(Tagged, tags={"customer": "acme", "region": "eu"})
        untagged = workflows.start_run("webhooks_tagged")
        run_pending()
        requests = receiver.requests
    assert all(request.verified for request in requests)
    by_run: dict[str, list[dict]] = {}
    for request in requests:
        by_run.setdefault(request.json["data"]["run_id"], []).append(request.json)
    untagged_bodies = by_run.pop(str(untagged.pk))
    [tagged_bodies] = by_run.values()
    types = [body["type"] for body in tagged_bodies]
    assert types[0] == "run.started" and types[-1] == "run.completed"
    # Recorded when the hooks claim the events: after the step set its tag.
    assert tagged_bodies[-1]["data"]["tags"] == {
        "customer": "acme",
        "region": "eu",
        "shipped": "yes",
    }
    assert all("customer" in body["data"]["tags"] for body in tagged_bodies)
    assert all(body["data"]["tags"] == {"shipped": "yes"} for body in untagged_bodies[-1:])
