"""The console's Consumers page: every event consumer, how far it acknowledged, and
how far behind it is.

One table over :func:`workflows.queries.consumers.consumer_lags`: the consumer's name,
its position (the last event it acknowledged, in commit order), its lag (events after
that position, the ones it has yet to acknowledge) and when it last acknowledged. A
consumer that stopped acknowledging shows a growing lag and an old last ack. Viewing
needs ``workflows.view_run``, as for runs. Read-only: a consumer moves by acknowledging
(``workflows.ack``, ``POST /api/events/ack/``).
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils import timezone

from workflows.admin.runs import duration
from workflows.models import Run
from workflows.queries.consumers import consumer_lags

__all__ = ["consumers"]


def consumers(model_admin: admin.ModelAdmin, request: HttpRequest) -> HttpResponse:
    """The Consumers page, for those who may view runs."""
    if not model_admin.has_view_permission(request):
        raise PermissionDenied
    now = timezone.now()
    rows = [
        {
            "consumer": consumer,
            "position": f"event {consumer.position.id}" if consumer.position.id else "the start",
            "acked": f"{duration(consumer.acked_at, now, now)} ago" if consumer.acked_at else "",
        }
        for consumer in consumer_lags()
    ]
    context: dict[str, Any] = {
        **model_admin.admin_site.each_context(request),
        "title": "Event consumers",
        "opts": Run._meta,
        "rows": rows,
    }
    return TemplateResponse(request, "workflows/admin/consumers.html", context)
