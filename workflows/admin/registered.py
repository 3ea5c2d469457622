"""The ModelAdmins of the engine's rows: runs (with the run page, start page, operator
actions and approvals under their URLs), steps, items, timers, compensations and signals.
Read-only, since only the engine writes workflow state."""

from __future__ import annotations

import json
from functools import partial
from typing import TYPE_CHECKING, Any, TypedDict
from uuid import UUID

from django.contrib import admin
from django.contrib.admin.views.main import SEARCH_VAR
from django.contrib.contenttypes.admin import GenericTabularInline
from django.core.exceptions import PermissionDenied
from django.db.models import Model, Prefetch, QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString

from workflows.admin import runs as admin_runs
from workflows.admin.actions import act_url, bulk_actions, run_action
from workflows.admin.approvals import ApprovalsViews
from workflows.admin.bulk_units import bulk_units
from workflows.admin.changelist import SafeChangelistMixin
from workflows.admin.consumers import consumer_delete, consumers
from workflows.admin.dashboard import dashboard
from workflows.admin.deadlines import DeadlineFilter
from workflows.admin.dismissed import DismissedFilter
from workflows.admin.live.log import step_log
from workflows.admin.live.pages import run_live
from workflows.admin.readonly import ReadOnlyMixin
from workflows.admin.run_page import PAGE_RELATED, run_page_context
from workflows.admin.runs import (
    AttentionFilter,
    BoundedCountPaginator,
    RunsChangeList,
    StatusBadgeColumn,
    WorkflowFilter,
    badge,
    runs_with_progress,
    search_with_id_prefix,
)
from workflows.admin.schedule_filter import ScheduleFilter
from workflows.admin.start import start_run
from workflows.admin.tags import CHIPS_IN_A_ROW, TagFilter, TagKeyFilter, tag_chips
from workflows.admin.waits import waits
from workflows.definitions import Gate
from workflows.models import CompensationRecord, FanOutItem, Run, Signal, Step, Timer
from workflows.permissions import VIEW_FANOUTITEM
from workflows.queries import Attention
from workflows.services.access import OPERATE_RUNS, START_RUNS
from workflows.status import StepStatus
from workflows.text import relative, short_id

if TYPE_CHECKING:
    from django.contrib.admin.options import _FieldGroups
    from django_stubs_ext import WithAnnotations

    from workflows.admin.runs import RunWithProgress

    class _WaitingGates(TypedDict):
        """What :meth:`RunInline.get_queryset` prefetches onto each run."""

        waiting_gates: list[Step]

    RunWithWaitingGates = WithAnnotations[Run, _WaitingGates]


@admin.register(Run)
class RunAdmin(SafeChangelistMixin, ReadOnlyMixin, StatusBadgeColumn, admin.ModelAdmin):
    """The runs list, the run page, operator actions, starting runs and the dashboard.

    Viewing (``workflows.view_run``), starting (``workflows.start_run``) and operating
    (``workflows.operate_run``) are separate permissions; each page and button checks
    its own. See :mod:`workflows.admin.runs` for why the list costs fixed queries.
    """

    list_display = (
        "short_id",
        "status_badge",
        "workflow",
        "business_key",
        "progress",
        "started",
        "attention_badge",
    )
    list_display_links = ("short_id",)
    list_filter = (
        "status",
        WorkflowFilter,
        AttentionFilter,
        DismissedFilter,
        "trigger",
        TagKeyFilter,
        TagFilter,
        DeadlineFilter,
        ScheduleFilter,
        ("created_at", admin.DateFieldListFilter),
    )
    search_fields = ("business_key",)
    search_help_text = "A run id or its first characters, or a business key (or its start)."
    date_hierarchy = "created_at"
    paginator = BoundedCountPaginator
    show_full_result_count = False
    list_per_page = 50
    ordering = ("-created_at", "-id")
    change_list_template = "workflows/admin/run_change_list.html"
    actions = bulk_actions()

    class Media:
        css = {"all": ("workflows/console.css",)}

    def get_changelist(self, request: HttpRequest, **kwargs: Any) -> type[RunsChangeList]:
        return RunsChangeList

    def get_queryset(self, request: HttpRequest) -> QuerySet[RunWithProgress]:
        # The list never shows input, output or snapshot, which can be large.
        runs = (
            super().get_queryset(request).defer("input", "output", "snapshot", "error", "variables")
        )
        return runs_with_progress(runs, timezone.now())

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Run], search_term: str
    ) -> tuple[QuerySet[Run], bool]:
        return search_with_id_prefix(queryset, search_term, admin_runs.key_or_its_start)

    def get_paginator(
        self,
        request: HttpRequest,
        queryset: QuerySet[Run],
        per_page: int,
        orphans: int = 0,
        allow_empty_first_page: bool = True,
    ) -> BoundedCountPaginator:
        # A search's runs (a key's start) are read through the key's index; when more
        # than the count's cap match, SQLite sorted them all to show a page: the page
        # walks the creation index instead (queries/newest_first). The other filters
        # read their own index in creation order already, or a partial one.
        searched = bool(request.GET.get(SEARCH_VAR, "").strip())
        return BoundedCountPaginator(
            queryset, per_page, orphans, allow_empty_first_page, walk_when_capped=searched
        )

    def lookup_allowed(self, lookup: str, value: str, request: HttpRequest | None = None) -> bool:
        # The run page links to a run's children.
        return lookup == "parent_run__id__exact" or super().lookup_allowed(lookup, value, request)

    def has_operate_permission(self, request: HttpRequest) -> bool:
        return OPERATE_RUNS.allows(request.user)

    def has_start_permission(self, request: HttpRequest) -> bool:
        return START_RUNS.allows(request.user)

    def page_permissions(self, request: HttpRequest) -> dict[str, bool]:
        """Which links and verbs the run page offers ``request``'s user."""
        return {
            "operate": self.has_operate_permission(request),
            "view_items": request.user.has_perm(VIEW_FANOUTITEM),
        }

    def get_urls(self) -> list[URLPattern]:
        wrap = self.admin_site.admin_view
        return [
            path(
                "dashboard/",
                wrap(partial(dashboard, self)),
                name="workflows_dashboard",
            ),
            path("start/", wrap(partial(start_run, self)), name="workflows_run_start"),
            path("waits/", wrap(partial(waits, self)), name="workflows_waits"),
            path("units/bulk/", wrap(partial(bulk_units, self)), name="workflows_bulk_units"),
            path("consumers/", wrap(partial(consumers, self)), name="workflows_consumers"),
            path(
                "consumers/delete/",
                wrap(partial(consumer_delete, self)),
                name="workflows_consumer_delete",
            ),
            act_url(self, run_action, "<str:run_id>", "workflows_run_act"),
            path("<str:run_id>/live/", wrap(partial(run_live, self)), name="workflows_run_live"),
            path(
                "<str:run_id>/steps/<str:step_id>/log/",
                wrap(partial(step_log, self)),
                name="workflows_step_log",
            ),
            *super().get_urls(),
        ]

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        extra = {
            "may_start": self.has_start_permission(request),
            "dashboard_url": reverse(f"{self.admin_site.name}:workflows_dashboard"),
            "start_url": reverse(f"{self.admin_site.name}:workflows_run_start"),
        }
        return super().changelist_view(request, {**extra, **(extra_context or {})})

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        """The run page (:mod:`workflows.admin.run_page`) instead of a form."""
        run = (
            Run.objects.select_related(*PAGE_RELATED)
            # A malformed id is None, which Django reads as ``IS NULL``: no run, as for an
            # unknown id. The plugin types an exact lookup by its non-null field.
            .filter(pk=_uuid_or_none(object_id))  # type: ignore[misc]
            .first()
        )
        if run is None:
            # Django's own "no such object" message and redirect; its stubs leave this
            # private helper out.
            return self._get_obj_does_not_exist_redirect(request, self.opts, object_id)  # type: ignore[attr-defined]
        if not self.has_view_permission(request, run):
            raise PermissionDenied
        may = self.page_permissions(request)
        context = {
            **self.admin_site.each_context(request),
            "title": f"Run {short_id(run.pk)}",
            "subtitle": None,
            "opts": self.opts,
            "may": may,
            "may_start": self.has_start_permission(request),
            **run_page_context(request, run, self.admin_site.name, may),
            **(extra_context or {}),
        }
        return TemplateResponse(request, "workflows/admin/run_page.html", context)

    @admin.display(description="run", ordering="id")
    def short_id(self, run: Run) -> SafeString:
        return admin_runs.short_id(run.pk)

    @admin.display(description="workflow · title · tags", ordering="workflow_name")
    def workflow(self, run: Run) -> SafeString | str:
        """The run's title with its workflow under it (without a title, the workflow),
        and its tags as chips, each a link to the runs carrying it."""
        name = f"{run.workflow_name} v{run.workflow_version}"
        chips = (
            format_html(
                '<div class="wf-row-tags">{}</div>',
                tag_chips(run.tags, list_url=self._list_url, limit=CHIPS_IN_A_ROW),
            )
            if run.tags
            else ""
        )
        if not run.title:
            return format_html("{}{}", name, chips) if chips else name
        return format_html('{}<div class="wf-quiet">{}</div>{}', run.title, name, chips)

    @property
    def _list_url(self) -> str:
        return reverse(f"{self.admin_site.name}:workflows_run_changelist")

    @admin.display(description="progress")
    def progress(self, run: RunWithProgress) -> SafeString:
        return format_html(
            '<span class="wf-progress"><progress value="{}" max="{}"></progress> {}/{}</span>',
            run.steps_done,
            run.steps_total or 1,
            run.steps_done,
            run.steps_total,
        )

    @admin.display(description="started · duration · by", ordering="started_at")
    def started(self, run: Run) -> SafeString:
        """How long ago (the moment on hover), how long it took or has been going, and
        which surface started it (its trigger): one column, so the list fits beside the
        admin's sidebar and filters."""
        by = run.get_trigger_display()
        if run.started_at is None:
            return format_html('-<div class="wf-quiet wf-trigger">by {}</div>', by)
        now = timezone.now()
        took = admin_runs.duration(run.started_at, run.finished_at, now)
        return format_html(
            '<span class="wf-nowrap" title="{}">{}</span>'
            '<div class="wf-quiet">{} {} · <span class="wf-trigger">by {}</span></div>',
            timezone.localtime(run.started_at).isoformat(timespec="seconds"),
            relative(run.started_at, now, depth=1),
            "took" if run.finished_at else "for",
            took,
            by,
        )

    @admin.display(description="attention")
    def attention_badge(self, run: RunWithProgress) -> SafeString | str:
        return (
            "-"
            if run.attention == Attention.OK
            else badge(f"attention-{run.attention}", run.attention.replace("_", " "))
        )


def _uuid_or_none(value: str) -> UUID | None:
    try:
        return UUID(value)
    except ValueError:
        return None


@admin.register(Step)
class StepAdmin(SafeChangelistMixin, ReadOnlyMixin, admin.ModelAdmin):
    list_display = ("id", "run", "name", "kind", "status", "attempt", "updated_at")
    # The kinds there are, from the field's choices: the kinds the steps have would be a
    # ``SELECT DISTINCT`` over every step on each page view (seconds at millions).
    list_filter = ("status", "kind")
    search_fields = ("name", "run__id")
    list_select_related = ("run",)
    # No full count of millions of steps per page view, as on the runs list.
    paginator = BoundedCountPaginator
    show_full_result_count = False

    def get_fields(self, request: HttpRequest, obj: Step | None = None) -> _FieldGroups:
        """The step's own fields first (run, name, kind, status, ...), then the columns
        it shares through abstract bases (what an attempt reports, a gate's decision),
        which Django would list first."""
        fields = super().get_fields(request, obj)
        shared = {
            field.name
            for base in Step.__mro__[1:]
            if issubclass(base, Model) and base is not Model and base._meta.abstract
            for field in base._meta.local_fields
        }
        return [*(f for f in fields if f not in shared), *(f for f in fields if f in shared)]

    def get_urls(self) -> list[URLPattern]:
        # The approvals inbox and signed links decide gates, which are steps; they come
        # first so that "approvals/" is not read as a step id.
        return [*ApprovalsViews(self.admin_site).urls(), *super().get_urls()]


@admin.register(Timer)
class TimerAdmin(SafeChangelistMixin, ReadOnlyMixin, admin.ModelAdmin):
    list_display = ("id", "run", "step", "kind", "due_at", "status")
    list_filter = ("status", "kind")
    list_select_related = ("run", "step")
    # Fired timers stay with their runs' history: no full count of them per page view.
    paginator = BoundedCountPaginator
    show_full_result_count = False


class UnitTelemetryColumns:
    """The columns of an item's or a compensation's telemetry in its changelist: the
    last ``ctx.progress``, the summary and the newest ``ctx.log`` frame."""

    @admin.display(description="progress")
    def progress(self, unit: FanOutItem | CompensationRecord) -> str:
        if unit.progress_at is None:
            return "-"
        done = f"{unit.progress_done:g}"
        shown = f"{done} of {unit.progress_total:g}" if unit.progress_total else done
        return f"{shown}: {unit.progress_message}" if unit.progress_message else shown

    @admin.display(description="summary")
    def summary_shown(self, unit: FanOutItem | CompensationRecord) -> str:
        return json.dumps(unit.summary, sort_keys=True)[:200] if unit.summary else "-"

    @admin.display(description="last log line")
    def last_log(self, unit: FanOutItem | CompensationRecord) -> str:
        return str(unit.log[-1].get("text", ""))[:200] if unit.log else "-"


@admin.register(FanOutItem)
class FanOutItemAdmin(SafeChangelistMixin, ReadOnlyMixin, UnitTelemetryColumns, admin.ModelAdmin):
    list_display = (
        "id",
        "step",
        "index",
        "key",
        "status",
        "attempt",
        "progress",
        "summary_shown",
        "last_log",
        "updated_at",
    )
    list_filter = ("status",)
    search_fields = ("key", "step__run__id")
    list_select_related = ("step",)


@admin.register(CompensationRecord)
class CompensationRecordAdmin(
    SafeChangelistMixin, ReadOnlyMixin, UnitTelemetryColumns, admin.ModelAdmin
):
    list_display = (
        "id",
        "run",
        "step",
        "sequence",
        "handler",
        "status",
        "attempt",
        "progress",
        "summary_shown",
        "last_log",
    )
    list_filter = ("status",)
    list_select_related = ("run", "step")


@admin.register(Signal)
class SignalAdmin(SafeChangelistMixin, ReadOnlyMixin, admin.ModelAdmin):
    list_display = ("id", "run", "name", "idempotency_key", "received_at", "consumed_by")
    search_fields = ("name", "idempotency_key", "run__id")
    list_select_related = ("run", "consumed_by")


class RunInline(ReadOnlyMixin, GenericTabularInline):
    """The host's "runs of this order", for its own ``ModelAdmin``: ``inlines = [RunInline]``.

    Lists the runs started with ``subject=obj``, newest first: id (linking to the run
    page), workflow, status, start and the prompt of any gate waiting for a decision.
    Read-only like every engine row; the waiting gates come in one prefetch, so the
    inline costs the same queries for one run or many. Shown to users who may view runs.
    """

    model = Run
    ct_field = "subject_type"
    ct_fk_field = "subject_id"
    fields = readonly_fields = ("run", "workflow", "status_badge", "started_at", "waiting_for")
    extra = 0
    max_num = 0
    can_delete = False

    class Media:
        css = {"all": ("workflows/console.css",)}

    def __init__(self, parent_model: type[Model], admin_site: admin.AdminSite) -> None:
        super().__init__(parent_model, admin_site)
        self.verbose_name_plural = f"runs of this {parent_model._meta.verbose_name}"

    def get_queryset(self, request: HttpRequest) -> QuerySet[Run]:
        waiting_gates = Step.objects.filter(kind=Gate.kind, status=StepStatus.WAITING).only(
            "run_id", "name", "prompt"
        )
        return (
            super()
            .get_queryset(request)
            .defer("input", "output", "snapshot", "error", "variables")
            .prefetch_related(Prefetch("steps", queryset=waiting_gates, to_attr="waiting_gates"))
        )

    @admin.display(description="run")
    def run(self, run: Run) -> SafeString:
        return format_html(
            '<a href="{}">{}</a>',
            reverse(f"{self.admin_site.name}:workflows_run_change", args=[run.pk]),
            admin_runs.short_id(run.pk),
        )

    @admin.display(description="workflow")
    def workflow(self, run: Run) -> str:
        return f"{run.workflow_name} v{run.workflow_version}"

    @admin.display(description="status")
    def status_badge(self, run: Run) -> SafeString:
        return badge(run.status)

    @admin.display(description="waiting for")
    def waiting_for(self, run: RunWithWaitingGates) -> str:
        return "; ".join(gate.prompt or gate.name for gate in run.waiting_gates) or "-"
