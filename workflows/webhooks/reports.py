"""What operators read about webhooks: endpoints with their counts, deliveries in trouble.

Read-only (no ``atomic()``), for the ``workflows_webhooks`` command; each is one query.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Count, Q

from workflows.status import DELIVERY_OPEN, DeliveryStatus
from workflows.webhooks.models import WebhookDelivery, WebhookEndpoint


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


def troubled_deliveries(limit: int = 50) -> list[dict[str, Any]]:
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
