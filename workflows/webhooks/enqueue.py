"""Which endpoints have a delivery to send now, and nudging django-q2 to send them.

A delivery row is the durable record of what to send; a django-q2 message (the
``workflows.tasks.send_webhooks`` task, one per endpoint) is only a nudge, as for
steps. Deliveries are nudged when they are recorded and when replayed; the
``send_webhooks`` scanner nudges again for retries that came due and for nudges that
were lost. A duplicate nudge finds the head claimed or not due and sends nothing.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from django.db.models import Exists, OuterRef, Q, Subquery
from django.db.models.functions import Now

from workflows.engine.executor import uses_django_q
from workflows.engine.wakeups import wake
from workflows.models import WebhookDelivery, WebhookEndpoint
from workflows.status import DELIVERY_OPEN, DELIVERY_WAITING, DeliveryStatus
from workflows.workers.executors import queue_tasks

SEND_TASK = "workflows.tasks.send_webhooks"


def due(clock: Any) -> Q:
    """Deliveries a sender may claim at ``clock``: waiting and due, or abandoned
    (``sending`` past its lease)."""
    return Q(status__in=DELIVERY_WAITING, next_attempt_at__lte=clock) | Q(
        status=DeliveryStatus.SENDING, lease_expires_at__lt=clock
    )


def endpoints_due(*, now: datetime | None = None, limit: int = 1000) -> list[int]:
    """Enabled endpoints whose head (oldest open delivery) may be claimed at ``now``.

    A due delivery behind a head that waits for its retry does not count: it is not
    the endpoint's turn yet.
    """
    clock = now if now is not None else Now()
    head = (
        WebhookDelivery.objects.filter(endpoint=OuterRef(OuterRef("pk")), status__in=DELIVERY_OPEN)
        .order_by("id")
        .values("id")[:1]
    )
    head_is_due = WebhookDelivery.objects.filter(due(clock), pk=Subquery(head))
    return list(
        WebhookEndpoint.objects.filter(Exists(head_is_due), enabled=True)
        .order_by("id")
        .values_list("id", flat=True)[:limit]
    )


def nudge(endpoint_ids: Iterable[int]) -> None:
    """Ask django-q2 to send these endpoints' deliveries; with another executor, wake
    ``webhooks`` on commit so a sweeper sends them in-process at once, rather than at its
    next recovery pass (``workflows.testing.run_pending`` sends them itself)."""
    ids = sorted(endpoint_ids)
    if not ids:
        return
    if uses_django_q():
        queue_tasks([(SEND_TASK, pk, f"workflows webhooks {pk}", None) for pk in ids])
    else:
        wake("webhooks")
