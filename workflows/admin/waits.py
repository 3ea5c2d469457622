"""The console's Waits page: what every run is waiting for, oldest first.

One table over :func:`workflows.queries.waits.pending_waits` — gates, signals,
callbacks, sleeps, child runs, work held by a limit, blocked flow members and queued
runs — each with its run, what it waits for, since when and its timeout; filtered by
kind, workflow and age, paged forward by the query's own cursor. It costs the query's
five statements at most plus the admin's own (session, user), whatever the number of
runs.
Viewing needs ``workflows.view_run``, as for runs. Read-only: acting on a wait is the
run page's (decide a gate, send a signal, cancel).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone
from django.utils.http import urlencode

from workflows.admin.runs import badge, duration
from workflows.errors import InvalidInput
from workflows.holds import HOLDS, HoldKind
from workflows.models import Run
from workflows.queries.waits import WAIT_CHOICES, WAIT_KINDS, Wait, pending_waits
from workflows.text import relative, short_id
from workflows.validation import check_text

__all__ = ["AGES", "PAGE_SIZE", "waits"]

PAGE_SIZE = 100
# The "waiting at least" choices: (query value, label, the age).
AGES: list[tuple[str, str, timedelta]] = [
    ("1h", "an hour", timedelta(hours=1)),
    ("1d", "a day", timedelta(days=1)),
    ("7d", "a week", timedelta(days=7)),
    ("30d", "30 days", timedelta(days=30)),
]


def _moment(moment: datetime | None) -> str:
    """``2025-01-06 09:14:10 UTC``: a wait's start or timeout, for a title."""
    return f"{moment:%Y-%m-%d %H:%M:%S %Z}" if moment is not None else ""


def _timeout(due_at: datetime | None, now: datetime, what: str = "") -> str:
    """``times out in 3 hours, 59 minutes`` (``what`` happens then), ``overdue by 2
    minutes, 10 seconds``, or ``""`` for no timeout."""
    if due_at is None:
        return ""
    if due_at < now:
        return f"overdue by {duration(due_at, now, now)}"
    return " ".join(filter(None, (what, relative(due_at, now))))


def _name(workflow: str) -> str:
    """The workflow's name as given, or ``""`` (no filter) for one the database cannot
    compare (a NUL): no workflow has it, and a changelist ignores such a value too."""
    try:
        return check_text(workflow, field="workflow")
    except InvalidInput:
        return ""


def waits(model_admin: admin.ModelAdmin, request: HttpRequest) -> HttpResponse:
    """The Waits page, for those who may view runs; a filter value it does not offer
    is ignored (as a changelist's is), a cursor it did not issue starts over."""
    if not model_admin.has_view_permission(request):
        raise PermissionDenied
    now = timezone.now()
    site = model_admin.admin_site.name
    kind = request.GET.get("kind", "")
    kind = kind if kind in WAIT_KINDS else ""
    workflow = _name(request.GET.get("workflow", "").strip())
    age = next((entry for entry in AGES if entry[0] == request.GET.get("age")), None)
    options: dict[str, Any] = {
        "kind": kind or None,
        "workflow": workflow or None,
        "older_than": age[2] if age else None,
        "limit": PAGE_SIZE,
        "now": now,
    }
    cursor = request.GET.get("cursor") or None
    try:
        page = pending_waits(**options, cursor=cursor)
    except InvalidInput as exc:
        if exc.details.get("field") != "cursor":
            raise  # the only other value from the address is the workflow's name
        cursor = None
        page = pending_waits(**options)
    filters = {
        name: value
        for name, value in (("kind", kind), ("workflow", workflow), ("age", age[0] if age else ""))
        if value
    }
    rows = _rows(page, site, now)
    context: dict[str, Any] = {
        **model_admin.admin_site.each_context(request),
        "title": "Waits",
        "opts": Run._meta,
        "now": now,
        "rows": rows,
        "kinds": WAIT_CHOICES,
        "ages": [(value, label) for value, label, _ in AGES],
        "kind": kind,
        "workflow": workflow,
        "age": age[0] if age else "",
        "filtered": bool(filters),
        "first_url": f"?{urlencode(filters)}" if filters else "?",
        "next_url": f"?{urlencode({**filters, 'cursor': page.next_cursor})}"
        if page.next_cursor
        else None,
        "paged": cursor is not None,
    }
    return TemplateResponse(request, "workflows/admin/waits.html", context)


def _rows(page: Iterable[Wait], site: str, now: datetime) -> list[dict[str, Any]]:
    """The page's waits as table rows. Times are short texts made here, not with
    template filters: a page shows up to 100 waits, and the filters' formatting
    machinery was most of its render time."""
    return [
        {
            "wait": wait,
            "run_url": reverse(f"{site}:workflows_run_change", args=[wait.run]),
            "run_short": short_id(wait.run),
            "status": badge(wait.run_status),
            "waiting": duration(wait.since, now, now),
            "since": _moment(wait.since),
            "timeout": _timeout(wait.due_at, now, HOLDS[HoldKind(wait.kind)].due),
            "label": HoldKind(wait.kind).label,
            "due_at": _moment(wait.due_at),
            "overdue": wait.due_at is not None and wait.due_at < now,
            "deadline": _timeout(wait.deadline, now),
        }
        for wait in page
    ]
