"""Admin screens for inspecting runs: read-only, since only the engine writes state."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest
from django.urls import URLPattern

from workflows.admin_approvals import ApprovalsViews
from workflows.models import CompensationRecord, Event, FanOutItem, Run, Signal, Step, Timer


class ReadOnlyMixin:
    """Engine rows are never added, edited or deleted by hand."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class StepInline(ReadOnlyMixin, admin.TabularInline):
    model = Step
    fields = (
        "name",
        "kind",
        "status",
        "attempt",
        "max_attempts",
        "lease_owner",
        "decision",
        "items_completed",
        "items_total",
        "finished_at",
    )
    readonly_fields = fields
    extra = 0
    show_change_link = True


class EventInline(ReadOnlyMixin, admin.TabularInline):
    model = Event
    fields = ("created_at", "type", "step", "payload")
    readonly_fields = fields
    extra = 0


@admin.register(Run)
class RunAdmin(ReadOnlyMixin, admin.ModelAdmin):
    list_display = (
        "id",
        "workflow_name",
        "workflow_version",
        "status",
        "business_key",
        "created_at",
    )
    list_filter = ("status", "workflow_name")
    search_fields = ("id", "business_key", "idempotency_key")
    date_hierarchy = "created_at"
    inlines = [StepInline, EventInline]


@admin.register(Step)
class StepAdmin(ReadOnlyMixin, admin.ModelAdmin):
    list_display = ("id", "run", "name", "kind", "status", "attempt", "updated_at")
    list_filter = ("status", "kind")
    search_fields = ("name", "run__id")
    list_select_related = ("run",)

    def get_urls(self) -> list[URLPattern]:
        # The approvals inbox and signed links decide gates, which are steps; they come
        # first so that "approvals/" is not read as a step id.
        return [*ApprovalsViews(self.admin_site).urls(), *super().get_urls()]


@admin.register(Timer)
class TimerAdmin(ReadOnlyMixin, admin.ModelAdmin):
    list_display = ("id", "run", "step", "kind", "due_at", "status")
    list_filter = ("status", "kind")
    list_select_related = ("run", "step")


@admin.register(FanOutItem)
class FanOutItemAdmin(ReadOnlyMixin, admin.ModelAdmin):
    list_display = ("id", "step", "index", "key", "status", "attempt", "updated_at")
    list_filter = ("status",)
    search_fields = ("key", "step__run__id")
    list_select_related = ("step",)


@admin.register(CompensationRecord)
class CompensationRecordAdmin(ReadOnlyMixin, admin.ModelAdmin):
    list_display = ("id", "run", "step", "sequence", "handler", "status", "attempt")
    list_filter = ("status",)
    list_select_related = ("run", "step")


@admin.register(Signal)
class SignalAdmin(ReadOnlyMixin, admin.ModelAdmin):
    list_display = ("id", "run", "name", "idempotency_key", "received_at", "consumed_by")
    search_fields = ("name", "idempotency_key", "run__id")
    list_select_related = ("run", "consumed_by")
