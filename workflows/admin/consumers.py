"""The console's Consumers page: every event consumer, how far it acknowledged, and
how far behind it is.

One table over :func:`workflows.queries.consumers.consumer_lags`: the consumer's name,
its position (the last event it acknowledged, in commit order), its lag (events after
that position, the ones it has yet to acknowledge), when it last acknowledged, and what
it reads (every event, or those of the workflows and types of its filter; its lag counts
only those). A
consumer that stopped acknowledging shows a growing lag and an old last ack. Viewing
needs ``workflows.view_run``, as for runs; a consumer moves by acknowledging
(``workflows.ack``, ``POST /api/events/ack/``).

Those holding ``workflows.manage_consumers`` see a Delete link on each row: a
confirmation page (GET) whose POST deletes the consumer (``workflows.delete_consumer``),
for one that was created by mistake or whose reader is gone for good.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone

from workflows.admin.runs import COUNT_CAP
from workflows.errors import WorkflowError
from workflows.models import Run
from workflows.queries.consumers import consumer_lag, consumer_lags
from workflows.services.access import MANAGE_EVENT_CONSUMERS
from workflows.services.consumers import delete_consumer
from workflows.text import relative

__all__ = ["consumer_delete", "consumers"]


def consumers(model_admin: admin.ModelAdmin, request: HttpRequest) -> HttpResponse:
    """The Consumers page, for those who may view runs."""
    if not model_admin.has_view_permission(request):
        raise PermissionDenied
    now = timezone.now()
    rows = [
        {
            "consumer": consumer,
            "position": f"event {consumer.position.id}" if consumer.position.id else "the start",
            "acked": relative(consumer.acked_at, now) if consumer.acked_at else "",
        }
        # Counted up to the cap, as the runs list counts (a consumer millions behind).
        for consumer in consumer_lags(cap=COUNT_CAP)
    ]
    context: dict[str, Any] = {
        **model_admin.admin_site.each_context(request),
        "title": "Event consumers",
        "opts": Run._meta,
        "rows": rows,
        "cap": COUNT_CAP,
        "may_manage": MANAGE_EVENT_CONSUMERS.allows(request.user),
        "delete_url": reverse(f"{model_admin.admin_site.name}:workflows_consumer_delete"),
    }
    return TemplateResponse(request, "workflows/admin/consumers.html", context)


def consumer_delete(model_admin: admin.ModelAdmin, request: HttpRequest) -> HttpResponse:
    """GET ``?name=``: the confirmation of deleting one consumer. POST: delete it."""
    if not MANAGE_EVENT_CONSUMERS.allows(request.user):
        raise PermissionDenied(MANAGE_EVENT_CONSUMERS.refusal)
    list_url = reverse(f"{model_admin.admin_site.name}:workflows_consumers")
    name = (request.POST if request.method == "POST" else request.GET).get("name", "")
    if request.method == "POST":
        try:
            delete_consumer(name, user=request.user)
        except (WorkflowError, PermissionDenied) as error:
            text = error.message if isinstance(error, WorkflowError) else str(error)
            messages.error(request, f"Deleting the consumer refused: {text}. Nothing changed.")
            return HttpResponseRedirect(list_url)
        messages.success(request, f"Consumer “{name}” deleted.")
        return HttpResponseRedirect(list_url)
    consumer = consumer_lag(name)
    if consumer is None:
        messages.error(request, f"There is no consumer named “{name}”.")
        return HttpResponseRedirect(list_url)
    context: dict[str, Any] = {
        **model_admin.admin_site.each_context(request),
        "title": f"Delete the consumer “{name}”?",
        "opts": Run._meta,
        "consumer": consumer,
        "list_url": list_url,
    }
    return TemplateResponse(request, "workflows/admin/consumer_delete.html", context)
