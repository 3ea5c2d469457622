"""The schedules of the console: the list and the page of one schedule.

Rows are read-only here: only the schedule verbs write a schedule, and the page's
actions (:mod:`workflows.admin.schedule_actions`) call them. Times are shown in the
viewer's zone (the admin's current time zone) and, when it differs, in the schedule's
own, the zone its cron expression's wall-clock times are in.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import URLPattern, reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from workflows.admin.actions import act_url
from workflows.admin.changelist import SafeChangelistMixin
from workflows.admin.readonly import ReadOnlyMixin
from workflows.admin.runs import badge
from workflows.admin.schedule_actions import SCHEDULE_ACTIONS, schedule_action, schedule_or_404
from workflows.models import Schedule
from workflows.queries.schedules import describe_spec, schedule_events, schedule_runs
from workflows.services.access import VIEW_SCHEDULES
from workflows.services.schedules import next_fire_times
from workflows.text import short_id

SHOWN_FIRES = 3
PAGE_FIRES = 5
EVENTS_PER_PAGE = 25
RUNS_PER_PAGE = 25


def in_zones(instant: datetime, tz: str) -> SafeString:
    """``instant`` in the viewer's zone, and its wall-clock time in the schedule's zone
    when that shows another (with the date too when that differs)."""
    viewer = timezone.localtime(instant)
    own = instant.astimezone(ZoneInfo(tz))
    shown = format_html(
        '<span class="wf-nowrap" title="{}">{}</span>',
        viewer.isoformat(),
        f"{viewer:%d %b %H:%M %Z}",
    )
    if (own.utcoffset(), own.tzname()) == (viewer.utcoffset(), viewer.tzname()):
        return shown
    there = f"{own:%H:%M %Z}" if own.date() == viewer.date() else f"{own:%d %b %H:%M %Z}"
    return format_html(
        '{} <span class="wf-quiet wf-nowrap" title="in {}">· {}</span>', shown, tz, there
    )


def fire_list(schedule: Schedule, count: int) -> SafeString:
    """The next ``count`` slots, one a line, or why there are none."""
    if schedule.end_at is not None and schedule.next_slot_at is None:
        return format_html('<span class="wf-quiet">{}</span>', "none: past its end")
    times = next_fire_times(schedule, count, after=timezone.now())
    if not times:
        return format_html('<span class="wf-quiet">{}</span>', "none: past its end")
    lines = format_html_join("", "<div>{}</div>", ((in_zones(t, schedule.tz),) for t in times))
    if schedule.paused:
        return format_html('{}<div class="wf-quiet">{}</div>', lines, "(when unpaused)")
    return lines


def paused(schedule: Schedule) -> SafeString | str:
    """A paused schedule's badge and note; nothing for one that fires."""
    if not schedule.paused:
        return ""
    return format_html("<div>{} {}</div>", badge("paused"), schedule.note)


def run_link(site: str, run: Any) -> SafeString:
    """A run's badge, id and slot, linking to its page."""
    return format_html(
        '{} <a class="wf-id" href="{}" title="{}">{}</a>',
        badge(run.status),
        reverse(f"{site}:workflows_run_change", args=[run.pk]),
        run.pk,
        short_id(run.pk),
    )


@admin.register(Schedule)
class ScheduleAdmin(SafeChangelistMixin, ReadOnlyMixin, admin.ModelAdmin):
    """Schedules: what each starts, when next, how its slots went, paused or not."""

    list_display = ("schedule", "spec", "next_fires", "runs")
    list_display_links = ("schedule",)
    list_filter = (
        ("workflow_name", admin.AllValuesFieldListFilter),
        "paused",
        "overlap",
        "origin",
    )
    list_select_related = ("last_run",)
    search_fields = ("key", "workflow_name")
    search_help_text = "A schedule's key or its workflow's name."
    list_per_page = 50
    ordering = ("key",)

    class Media:
        css = {"all": ("workflows/console.css",)}

    def has_view_permission(self, request: HttpRequest, obj: Schedule | None = None) -> bool:
        """Schedules are seen by who may see runs or schedules, as in the API."""
        return VIEW_SCHEDULES.allows(request.user) or super().has_view_permission(request, obj)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Schedule]:
        return super().get_queryset(request).defer("input")

    @admin.display(description="schedule · workflow", ordering="key")
    def schedule(self, schedule: Schedule) -> SafeString:
        return format_html('{}<div class="wf-quiet">{}</div>', schedule.key, schedule.workflow_name)

    @admin.display(description="when")
    def spec(self, schedule: Schedule) -> SafeString:
        expression = format_html("<code>{}</code> · ", schedule.cron) if schedule.cron else ""
        return format_html(
            '{}<div class="wf-quiet">{}{} · overlap {}</div>{}',
            describe_spec(schedule),
            expression,
            schedule.tz,
            schedule.overlap,
            paused(schedule),
        )

    @admin.display(description="next fire times (yours · its zone)")
    def next_fires(self, schedule: Schedule) -> SafeString:
        return fire_list(schedule, SHOWN_FIRES)

    @admin.display(description="last run · slots", ordering="last_fired_at")
    def runs(self, schedule: Schedule) -> SafeString:
        last = run_link(self.admin_site.name, schedule.last_run) if schedule.last_run else "-"
        return format_html(
            '<div class="wf-nowrap">{}</div><div class="wf-quiet">{} fired · {} skipped · '
            "{} missed</div>",
            last,
            schedule.fired_count,
            schedule.skipped_count,
            schedule.missed_count,
        )

    def get_urls(self) -> list[URLPattern]:
        return [
            act_url(self, schedule_action, "<str:schedule_id>", "workflows_schedule_act"),
            *super().get_urls(),
        ]

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        """The schedule's page instead of a form."""
        schedule = schedule_or_404(object_id)
        if not self.has_view_permission(request, schedule):
            raise PermissionDenied
        site = self.admin_site.name
        events = Paginator(schedule_events(schedule), EVENTS_PER_PAGE).get_page(
            request.GET.get("events")
        )
        runs = Paginator(schedule_runs(schedule), RUNS_PER_PAGE).get_page(request.GET.get("runs"))
        offered = [
            (action, reverse(f"{site}:workflows_schedule_act", args=[schedule.pk, action.verb]))
            for action in SCHEDULE_ACTIONS.values()
            if action.offered(schedule) and action.access.allows(request.user)
        ]
        context = {
            **self.admin_site.each_context(request),
            "title": f"Schedule {schedule.key}",
            "input_json": json.dumps(schedule.input, ensure_ascii=False),
            "opts": Schedule._meta,
            "schedule": schedule,
            "words": describe_spec(schedule),
            "fires": fire_list(schedule, PAGE_FIRES),
            "last": run_link(site, schedule.last_run) if schedule.last_run else None,
            "events": events,
            "runs": [(run, run_link(site, run)) for run in runs],
            "runs_page": runs,
            "offered": offered,
            "list_url": reverse(f"{site}:workflows_schedule_changelist"),
            "runs_url": reverse(f"{site}:workflows_run_changelist"),
        }
        return TemplateResponse(request, "workflows/admin/schedule_page.html", context)
