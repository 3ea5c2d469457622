"""Events of run schedules reach hooks and webhooks: every ``schedule.*`` event is a type
an endpoint may subscribe to, a ``schedule.fired`` body names the schedule, its workflow
and the run the slot started, and the hooks send the workflow's name as sender."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

import workflows
from tests.support.hooks import receiving
from tests.support.webhook_receiver import Receiver
from tests.support.workflows import Waits, Work
from workflows.models import Run
from workflows.testing import run_pending
from workflows.webhooks import services
from workflows.webhooks.event_types import SCHEDULE_EVENT_TYPES, WEBHOOK_EVENT_TYPES, webhook_type

pytestmark = pytest.mark.django_db

MINUTE = timedelta(minutes=1)


def test_every_schedule_event_is_a_webhook_type():
    assert set(SCHEDULE_EVENT_TYPES) <= set(WEBHOOK_EVENT_TYPES)
    assert {"schedule.fired", "schedule.skipped", "schedule.missed"} <= set(SCHEDULE_EVENT_TYPES)
    assert all(webhook_type(name, {}) == name for name in SCHEDULE_EVENT_TYPES)


def test_an_endpoint_subscribed_to_schedule_fired_gets_each_fire_naming_the_schedule():
    with Receiver() as receiver:
        endpoint = services.create_endpoint(url=receiver.url, event_types=["schedule.fired"])
        receiver.secret = endpoint.secret
        workflows.create_schedule(Work, key="beat", every=MINUTE)
        run_pending(until=datetime.now(UTC) + 2 * MINUTE)
        sent = receiver.requests
    runs = {str(pk) for pk in Run.objects.filter(schedule__key="beat").values_list("pk", flat=True)}
    assert len(runs) == 2
    assert all(request.verified for request in sent)
    assert [request.json["type"] for request in sent] == ["schedule.fired"] * 2
    bodies = [request.json["data"] for request in sent]
    assert {body["run_id"] for body in bodies} == runs
    assert {(body["schedule"], body["workflow"]) for body in bodies} == {("beat", Work.name)}
    assert all(body["late_ms"] >= 0 and body["slot"] for body in bodies)


def test_schedule_hooks_fire_with_the_workflow_as_sender():
    names = ("schedule_fired", "schedule_skipped", "schedule_changed")
    with receiving(*names) as calls:
        schedule = workflows.create_schedule(Waits, key="held", every=MINUTE)
        run_pending(until=datetime.now(UTC) + 2 * MINUTE)  # the second slot is skipped
        workflows.pause_schedule("held", note="maintenance")
        run_pending()
        workflows.delete_schedule("held")
        run_pending()
    seen = [(c["hook"], c.get("change"), c["sender"], c["schedule_id"]) for c in calls]
    assert seen == [
        ("schedule_changed", "created", Waits.name, schedule.pk),
        ("schedule_fired", None, Waits.name, schedule.pk),
        ("schedule_skipped", None, Waits.name, schedule.pk),
        ("schedule_changed", "paused", Waits.name, schedule.pk),
        # Deleted: the event stays, no longer pointing at the schedule.
        ("schedule_changed", "deleted", Waits.name, None),
    ]
    fired = calls[1]
    assert fired["run_id"] == Run.objects.get(scheduled_for__isnull=False).pk
