"""The flows of the operator console: the flows list, the flow page and its actions.

Read-only like runs (only the engine writes a flow); the flow page
(:mod:`workflows.admin.flow_page`) replaces the change form, and cancelling or sealing
a flow goes through its confirmation pages (:mod:`workflows.admin.flow_actions`).
Flows are shown to whoever may view runs (a flow is a graph of runs), or holds Django's
own view permission of flows.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any, TypedDict

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.db.models import Q, QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import NoReverseMatch, URLPattern, path, reverse
from django.utils import timezone

from workflows.admin.actions import act_url
from workflows.admin.changelist import SafeChangelistMixin
from workflows.admin.flow_actions import flow_action
from workflows.admin.flow_page import flow_page_context
from workflows.admin.live.pages import flow_live
from workflows.admin.readonly import ReadOnlyMixin
from workflows.admin.runs import StatusBadgeColumn, search_with_id_prefix
from workflows.errors import FlowNotFound
from workflows.models import Flow
from workflows.queries.flows import get_flow, list_flows
from workflows.services.access import VIEW_RUNS

if TYPE_CHECKING:
    from django_stubs_ext import WithAnnotations

    class _Counts(TypedDict):
        """What :func:`workflows.queries.flows.list_flows` annotates each flow with."""

        member_count: int
        unfinished: int

    FlowWithCounts = WithAnnotations[Flow, _Counts]

__all__ = ["FlowAdmin"]


@admin.register(Flow)
class FlowAdmin(SafeChangelistMixin, ReadOnlyMixin, StatusBadgeColumn, admin.ModelAdmin):
    """The flows list (with member counts), the flow page, cancel and seal."""

    list_display = (
        "name",
        "key",
        "status_badge",
        "revision",
        "members",
        "created",
    )
    list_display_links = ("name",)
    list_filter = ("status",)
    search_fields = ("name", "key")
    search_help_text = "A flow's name (or part of it), its key (or its start), or its id's start."
    list_per_page = 50
    ordering = ("-created_at", "-id")
    # Django's list, and a paragraph saying how flows come to exist while there is none.
    change_list_template = "workflows/admin/flow_change_list.html"

    class Media:
        css = {"all": ("workflows/console.css",)}

    def get_queryset(self, request: HttpRequest) -> QuerySet[Flow]:
        return list_flows()

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Flow], search_term: str
    ) -> tuple[QuerySet[Flow], bool]:
        return search_with_id_prefix(
            queryset, search_term, lambda term: Q(name__icontains=term) | Q(key__startswith=term)
        )

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return super().has_view_permission(request, obj) or VIEW_RUNS.allows(request.user)

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        """The list; while there is no flow at all, the help names the API's pages."""
        return super().changelist_view(request, {"api_urls": _api_urls(), **(extra_context or {})})

    def get_urls(self) -> list[URLPattern]:
        return [
            act_url(self, flow_action, "<str:object_id>", "workflows_flow_act"),
            path(
                "<str:flow_id>/live/",
                self.admin_site.admin_view(partial(flow_live, self)),
                name="workflows_flow_live",
            ),
            *super().get_urls(),
        ]

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        """The flow page (:mod:`workflows.admin.flow_page`) instead of a form."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        try:
            flow = get_flow(object_id, flows=Flow.objects.select_related("created_by"))
        except FlowNotFound:
            # Django's own "no such object" message and redirect, as the run page gives;
            # its stubs leave this private helper out.
            return self._get_obj_does_not_exist_redirect(request, self.opts, object_id)  # type: ignore[attr-defined]
        context = {
            **self.admin_site.each_context(request),
            "title": f"Flow {flow.name}",
            "subtitle": None,
            "opts": self.opts,
            **flow_page_context(request, flow, self.admin_site.name),
            **(extra_context or {}),
        }
        return TemplateResponse(request, "workflows/admin/flow_page.html", context)

    @admin.display(description="created", ordering="created_at")
    def created(self, flow: Flow) -> str:
        """The moment to the minute (the second on hover is in the flow page): a short,
        unwrapped column, so the list fits beside the admin's sidebar and filters."""
        return timezone.localtime(flow.created_at).strftime("%Y-%m-%d %H:%M")

    @admin.display(description="members / unfinished", ordering="member_count")
    def members(self, flow: FlowWithCounts) -> str:
        """One column for both counts, so the list fits beside the sidebar and filters."""
        return f"{flow.member_count} / {flow.unfinished}"


def _api_urls() -> dict[str, str] | None:
    """Where the flows endpoint and the API's documentation are served, or ``None`` in a
    project that does not include the app's API urls."""
    try:
        return {
            "flows": reverse("workflows_api:flow-list"),
            "docs": reverse("workflows_api:docs"),
        }
    except NoReverseMatch:
        return None
