"""The admin's Workers page: every ``workflows_worker`` that recorded itself, read-only.

A worker writes its row when it starts and every ``WORKER_PRESENCE_INTERVAL`` while it
runs, and deletes it when it stops cleanly (:mod:`workflows.workers.presence`). A row not seen
for three intervals is *gone*: its worker was killed, or its host is down or cut off
from the database. ``explain`` judges with the same rule which ready work no live
worker serves. Viewing needs ``workflows.view_run``, as for runs.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from django.utils.safestring import SafeString

from workflows.admin.changelist import SafeChangelistMixin
from workflows.admin.readonly import ReadOnlyMixin
from workflows.admin.runs import badge
from workflows.models import WorkerPresence
from workflows.permissions import VIEW_RUN
from workflows.queries.workers import is_live
from workflows.text import relative


@admin.register(WorkerPresence)
class WorkerPresenceAdmin(SafeChangelistMixin, ReadOnlyMixin, admin.ModelAdmin):
    """Who serves which queues with which capabilities, and whether it is still there."""

    list_display = ("name", "serves", "has", "started", "last_seen", "state")
    list_display_links = None
    search_fields = ("name",)
    search_help_text = "A worker's host:pid, or its start."
    ordering = ("-seen_at", "name")
    list_per_page = 100
    change_list_template = "workflows/admin/workers_change_list.html"

    class Media:
        css = {"all": ("workflows/console.css",)}

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return request.user.has_perm(VIEW_RUN)

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        context = {"title": "Workers", "subtitle": None, **(extra_context or {})}
        return super().changelist_view(request, context)

    @admin.display(description="queues")
    def serves(self, worker: WorkerPresence) -> str:
        return ", ".join(worker.queues) or "-"

    @admin.display(description="capabilities")
    def has(self, worker: WorkerPresence) -> str:
        return ", ".join(worker.capabilities) or "-"

    @admin.display(description="started", ordering="started_at")
    def started(self, worker: WorkerPresence) -> str:
        return relative(worker.started_at, timezone.now())

    @admin.display(description="last seen", ordering="seen_at")
    def last_seen(self, worker: WorkerPresence) -> str:
        return relative(worker.seen_at, timezone.now(), depth=1)

    @admin.display(description="state")
    def state(self, worker: WorkerPresence) -> SafeString:
        if is_live(worker, timezone.now()):
            return badge("completed", "alive")
        return badge("failed", "gone")
