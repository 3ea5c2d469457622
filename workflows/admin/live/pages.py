"""The live endpoints of the run page and the flow page (``<run>/live/``,
``<flow>/live/`` under the admin): what ``workflows/live_page.js`` polls while a page is
open, so that status, duration, graph, what holds the run, the buttons and the running
steps change in place.

Each answers JSON: the ``fingerprint`` of the run or flow as it stands
(:mod:`.regions`), ``final`` (the page stops asking once it is true) and, only when the
fingerprint differs from the one the page sent, ``regions``: each live region's markup,
rendered from the fragments the page itself includes, with the context the page builds.
An unchanged run costs one query (its row with its steps' marks), an unchanged flow two;
the admin's session and permission reads come on top.

Read-only, and checked as the page is: the admin's login, then the view permission
(403 without it); an unknown id is a 404. No API is needed: the endpoints are admin
views.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.db.models import Count, IntegerField, OuterRef, Subquery, Sum
from django.http import Http404, HttpRequest, JsonResponse

from workflows.admin.flow_page import flow_regions_context
from workflows.admin.live.regions import (
    FLOW_REGIONS,
    RUN_REGIONS,
    flow_fingerprint,
    flow_settled,
    render_regions,
    run_fingerprint,
)
from workflows.admin.run_page import PAGE_RELATED, run_regions_context, run_steps
from workflows.errors import WorkflowError
from workflows.models import Flow, Run, Step
from workflows.queries import get_run
from workflows.queries.flows import get_flow
from workflows.status import RUN_FINAL

__all__ = ["flow_live", "run_live"]


class PageAdmin(Protocol):
    """The admin of a page with live regions: whether its user may view it."""

    admin_site: admin.AdminSite

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool: ...


class RunPageAdmin(PageAdmin, Protocol):
    """The run page's admin, which also says which of the page's links its user gets."""

    def page_permissions(self, request: HttpRequest) -> dict[str, bool]: ...


def _steps_of_run(total: Any) -> Subquery:
    """A correlated aggregate (``total``) over the outer run's steps."""
    steps = Step.objects.filter(run_id=OuterRef("pk")).order_by().values("run_id")
    return Subquery(steps.annotate(total=total).values("total"), output_field=IntegerField())


def _answer(
    fingerprint: str, final: bool, regions: Mapping[str, str] | None = None
) -> JsonResponse:
    body: dict[str, Any] = {"fingerprint": fingerprint, "final": final}
    if regions is not None:
        body["regions"] = regions
    response = JsonResponse(body)
    response["Cache-Control"] = "no-store"
    return response


def run_live(model_admin: RunPageAdmin, request: HttpRequest, run_id: str) -> JsonResponse:
    """The run page's live regions, when the run moved since the page's ``fingerprint``."""
    try:
        marks = get_run(
            run_id,
            runs=Run.objects.only("id", "version", "status").annotate(
                step_count=_steps_of_run(Count("pk")), step_versions=_steps_of_run(Sum("version"))
            ),
        )
    except WorkflowError as error:
        raise Http404(error.message) from None
    if not model_admin.has_view_permission(request, marks):
        raise PermissionDenied
    fingerprint = run_fingerprint(
        marks.version,
        marks.status,
        marks.step_count,  # type: ignore[attr-defined]
        marks.step_versions,  # type: ignore[attr-defined]
    )
    if request.GET.get("fingerprint") == fingerprint:
        return _answer(fingerprint, marks.status in RUN_FINAL)
    run = get_run(marks.pk, runs=Run.objects.select_related(*PAGE_RELATED))
    may = model_admin.page_permissions(request)
    admin_name = model_admin.admin_site.name
    context = run_regions_context(request, run, admin_name, may, run_steps(run))
    return _answer(
        context["fingerprint"],
        context["final"],
        render_regions(request, "run", RUN_REGIONS, context),
    )


def flow_live(model_admin: PageAdmin, request: HttpRequest, flow_id: str) -> JsonResponse:
    """The flow page's live regions, when the flow or a member's status moved since the
    page's ``fingerprint``; ``members_page`` picks the members shown, as on the page."""
    if not model_admin.has_view_permission(request):
        raise PermissionDenied
    try:
        flow = get_flow(flow_id, flows=Flow.objects.select_related("created_by"))
    except WorkflowError as error:
        raise Http404(error.message) from None
    statuses = dict(
        Run.objects.filter(flow_id=flow.pk)
        .order_by()
        .values("status")
        .annotate(count=Count("pk"))
        .values_list("status", "count")
    )
    fingerprint = flow_fingerprint(flow.version, flow.status, flow.revision, statuses)
    if request.GET.get("fingerprint") == fingerprint:
        return _answer(fingerprint, flow_settled(flow.status, statuses))
    context = flow_regions_context(request, flow, model_admin.admin_site.name)
    return _answer(
        context["fingerprint"],
        context["final"],
        render_regions(request, "flow", FLOW_REGIONS, context),
    )
