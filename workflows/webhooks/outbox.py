"""Deliveries recorded in the transaction that claims events for the hooks.

:func:`workflows.hooks.claim_events` moves the event cursor (``Event.published``) once
per event; it calls :func:`record_deliveries` inside that same transaction, so each
event gets its delivery rows exactly once, atomically with the cursor move: two
deliverers never both record an event (they claim disjoint events), a claim that rolls
back records nothing, and a transition that rolled back wrote no event to begin with.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from django.db.models import CharField, F
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Coalesce, Now

from workflows.models import Event, WebhookDelivery, WebhookEndpoint
from workflows.webhooks.enqueue import nudge
from workflows.webhooks.event_types import SOURCE_EVENT_TYPES, subscribed, webhook_type
from workflows.webhooks.payload import event_body


def record_deliveries(event_ids: Sequence[int]) -> dict[int, int]:
    """Insert a pending delivery per (event, enabled endpoint subscribed to its type).

    Runs inside the caller's claim transaction and costs one query when no endpoint is
    enabled. Deliveries are inserted in event order, which is the order each endpoint
    receives them in; the endpoints that got some are nudged (:func:`queue.nudge`, in
    this transaction with django-q2's ORM broker). Returns the number recorded per
    endpoint id.
    """
    endpoints = list(WebhookEndpoint.objects.filter(enabled=True).values_list("id", "event_types"))
    if not endpoints or not event_ids:
        return {}
    events = (
        Event.objects.filter(id__in=event_ids, type__in=SOURCE_EVENT_TYPES)
        .annotate(
            # A schedule's event names its workflow in its payload (no join, and it
            # outlives a schedule deleted before the event is delivered).
            workflow=Coalesce(
                F("run__workflow_name"),
                KeyTextTransform("workflow", "payload"),
                output_field=CharField(),
            ),
            step_name=F("step__name"),
            run_tags=F("run__tags"),
            schedule_key=F("schedule__key"),
            # A flow's own event names it; any event of a member run is in its flow too.
            in_flow=Coalesce(F("flow_id"), F("run__flow_id")),
        )
        .order_by("id")
    )
    deliveries: list[WebhookDelivery] = []
    for event in events:
        kind = webhook_type(event.type, event.payload)
        if kind is None:
            continue
        body = event_body(
            webhook_type=kind,
            event_id=event.pk,
            created_at=event.created_at,
            run_id=event.run_id,
            step_id=event.step_id,
            step=event.step_name,
            workflow=event.workflow,
            payload=event.payload,
            flow_id=event.in_flow,
            tags=event.run_tags,
            schedule=event.schedule_key or event.payload.get("key")
            if kind.startswith("schedule.")
            else None,
        )
        deliveries.extend(
            WebhookDelivery(
                endpoint_id=endpoint_id,
                event_id=event.pk,
                event_type=kind,
                run_id=event.run_id,
                body=body,
                next_attempt_at=Now(),
            )
            for endpoint_id, event_types in endpoints
            if subscribed(event_types, kind)
        )
    WebhookDelivery.objects.bulk_create(deliveries, batch_size=500)
    recorded = Counter(delivery.endpoint_id for delivery in deliveries)
    nudge(recorded)
    return dict(recorded)
