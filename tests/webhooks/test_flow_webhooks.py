"""Webhooks of flows: every ``flow.*`` event is a type an endpoint may subscribe to, its
body names the flow (``flow_id``) and, for an event of the whole flow, no run; a
member's own events name its flow too. Delivered to a real HTTP receiver on 127.0.0.1."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse

import workflows
from tests.support.handlers import WORK
from tests.support.users import staff
from tests.support.webhook_receiver import Receiver
from workflows import Task, Workflow
from workflows.models import Flow, WebhookDelivery, WebhookEndpoint
from workflows.status import DeliveryStatus
from workflows.testing import run_pending
from workflows.webhooks import services
from workflows.webhooks.event_types import FLOW_EVENT_TYPES, WEBHOOK_EVENT_TYPES, webhook_type

pytestmark = pytest.mark.django_db


class Work(Workflow):
    name = "flowhooks_webhooks"
    work = Task(WORK)


def endpoint_for(receiver: Receiver, event_types: list[str]) -> WebhookEndpoint:
    endpoint = services.create_endpoint(url=receiver.url, event_types=event_types)
    receiver.secret = endpoint.secret
    return endpoint


def built_and_ended() -> Flow:
    """``extract → load``, sealed, run to its end."""
    flow = workflows.create_flow("nightly", key="nightly-webhooks")
    workflows.add_to_flow(flow, Work, {}, member="extract")
    workflows.add_to_flow(flow, Work, {}, member="load", after=["extract"])
    workflows.seal_flow(flow)
    run_pending()
    return flow


def test_every_flow_event_is_a_webhook_type():
    assert set(FLOW_EVENT_TYPES) <= set(WEBHOOK_EVENT_TYPES)
    assert set(FLOW_EVENT_TYPES) == {
        "flow.created",
        "flow.member_added",
        "flow.edge_added",
        "flow.join_changed",
        "flow.member_unblocked",
        "flow.dependency_failed",
        "flow.sealed",
        "flow.member_healed",
        "flow.reopened",
        "flow.completed",
        "flow.failed",
        "flow.cancelled",
    }
    assert all(webhook_type(name, {}) == name for name in FLOW_EVENT_TYPES)
    services.create_endpoint(url="https://example.com/h", event_types=list(FLOW_EVENT_TYPES))
    with pytest.raises(ValidationError, match="Unknown event type"):
        services.create_endpoint(url="https://example.com/h", event_types=["flow.finished"])


def test_a_flows_events_reach_the_endpoints_subscribed_to_them_naming_the_flow():
    with Receiver() as graph, Receiver() as ends:
        endpoint_for(graph, ["flow.created", "flow.member_added", "flow.edge_added"])
        endpoint_for(ends, ["flow.sealed", "flow.completed", "run.completed"])
        flow = built_and_ended()
        lone = workflows.start_run(Work)
        run_pending()
        to_graph, to_ends = graph.requests, ends.requests

    assert all(request.verified for request in to_graph + to_ends)
    assert [r.json["type"] for r in to_graph] == [
        "flow.created",
        "flow.member_added",
        "flow.member_added",
        "flow.edge_added",
    ]
    assert [r.json["type"] for r in to_ends] == [
        "flow.sealed",
        "run.completed",
        "run.completed",
        "flow.completed",
        "run.completed",
    ]
    members = dict(flow.runs.values_list("flow_member__name", "pk"))
    created, extract, load, edge = (request.json["data"] for request in to_graph)
    # An event of the whole flow: no run, no workflow.
    assert created | {"event_id": 0} == {
        "event_id": 0,
        "flow": "nightly",
        "key": "nightly-webhooks",
        "by": None,
        "flow_id": str(flow.pk),
        "run_id": None,
        "step_id": None,
        "step": None,
        "workflow": None,
    }
    # An event of a member: its run, its workflow, and the flow.
    assert (extract["member"], extract["run_id"], extract["flow_id"]) == (
        "extract",
        str(members["extract"]),
        str(flow.pk),
    )
    assert (load["after"], load["workflow"]) == (["extract"], "flowhooks_webhooks")
    assert (edge["upstream"], edge["downstream"], edge["run_id"]) == (
        "extract",
        "load",
        str(members["load"]),
    )
    sealed, first_end, second_end, completed, lone_end = (r.json["data"] for r in to_ends)
    assert (sealed["run_id"], completed["run_id"]) == (None, None)
    assert completed["not_completed"] == {} and completed["flow_id"] == str(flow.pk)
    # A member's run.completed names its flow; a lone run's has no flow_id.
    assert {first_end["run_id"], second_end["run_id"]} == {str(pk) for pk in members.values()}
    assert first_end["flow_id"] == second_end["flow_id"] == str(flow.pk)
    assert lone_end["run_id"] == str(lone.pk) and "flow_id" not in lone_end
    deliveries = WebhookDelivery.objects.filter(event_type="flow.completed")
    assert [(d.status, d.run_id) for d in deliveries] == [(DeliveryStatus.DELIVERED, None)]


def test_the_delivery_page_of_a_flows_own_event_shows_no_run(client):
    with Receiver() as receiver:
        endpoint_for(receiver, ["flow.sealed"])
        flow = workflows.create_flow("empty")
        workflows.seal_flow(flow)
        run_pending()
    delivery = WebhookDelivery.objects.get(event_type="flow.sealed")
    client.force_login(staff("auditor", "view_webhookdelivery"))
    page = client.get(reverse("admin:workflows_webhookdelivery_change", args=[delivery.pk]))
    assert page.status_code == 200
    assert str(flow.pk) in page.content.decode()  # in the body sent
    listing = client.get(reverse("admin:workflows_webhookdelivery_changelist"))
    assert listing.status_code == 200 and "flow.sealed" in listing.content.decode()
