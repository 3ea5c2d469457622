"""What operators read about webhooks: endpoints with their counts, deliveries in trouble.

Read-only (no ``atomic()``), for the ``workflows_webhooks`` command; each is one query.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, TypedDict

from django.db.models import Count, Q

from workflows.models import WebhookDelivery, WebhookEndpoint
from workflows.status import DELIVERY_OPEN, DeliveryStatus


def endpoint_summaries() -> list[dict[str, Any]]:
    """Every endpoint: id, URL, enabled (and why not), event types, deliveries to send,
    deliveries failed for good."""
    return list(
        WebhookEndpoint.objects.order_by("id")
        .annotate(
            to_send=Count("deliveries", filter=Q(deliveries__status__in=DELIVERY_OPEN)),
            failed=Count("deliveries", filter=Q(deliveries__status=DeliveryStatus.FAILED)),
        )
        .values("id", "url", "enabled", "disabled_reason", "event_types", "to_send", "failed")
    )


class TroubledDelivery(TypedDict):
    """One row of :func:`troubled_deliveries`: the delivery's columns an operator reads."""

    id: int
    endpoint_id: int
    event_type: str
    message_id: str
    status: str
    attempt: int
    response_status: int | None
    error: str
    next_attempt_at: datetime | None


def troubled_deliveries(limit: int = 50) -> list[TroubledDelivery]:
    """Deliveries that failed for good or wait for a retry, newest first."""
    return list(
        WebhookDelivery.objects.filter(
            status__in=(DeliveryStatus.FAILED, DeliveryStatus.RETRY_SCHEDULED)
        )
        .order_by("-id")
        .values(
            "id",
            "endpoint_id",
            "event_type",
            "message_id",
            "status",
            "attempt",
            "response_status",
            "error",
            "next_attempt_at",
        )[:limit]
    )
