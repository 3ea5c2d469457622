"""The console's Log page of one step: the frames its attempts wrote with ``ctx.log``.

A table of frames (seq, attempt, stream, time, text), oldest first, filtered by stream
and paged forward by the frames' own cursor (``after``, the last ``seq`` seen), with a
link to the latest page. Frames trimmed by the per-attempt bound are gone: the page
says how many (``Step.frames_dropped``). Each page is one read of
:func:`workflows.queries.frames.frames` plus the run and the step.

Viewing needs ``workflows.view_run``, as the run page does. A parameter the page did not
issue (a stream that does not exist, a cursor that is not a number) is answered with a
400 page naming it, never with a guess.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.http import urlencode

from workflows.errors import InvalidInput, WorkflowError
from workflows.models import Run, Step
from workflows.queries import get_run, get_step
from workflows.queries.frames import checked_cursor, frames
from workflows.status import FrameStream

__all__ = ["PAGE_SIZE", "step_log"]

PAGE_SIZE = 200


def _cursor(raw: str | None) -> int | None:
    """The ``after`` parameter as a number, or :class:`InvalidInput` naming it; its range
    (a 64-bit ``seq``) is :func:`~workflows.queries.frames.checked_cursor`'s to check."""
    if raw is None or raw == "":
        return None
    if not raw.isascii() or not raw.isdigit():
        raise InvalidInput("after must be a whole number of 0 or more (a frame seq)", field="after")
    return int(raw)


def _run_and_step(run_id: str, step_id: str) -> tuple[Run, Step]:
    """The run and its step, or a 404 for an unknown, malformed or foreign pair."""
    try:
        run, step = get_run(run_id), get_step(step_id)
    except WorkflowError as error:
        raise Http404(error.message) from None
    if step.run_id != run.pk:
        raise Http404(f"step {step.pk} is not a step of run {run.pk}")
    return run, step


def step_log(
    model_admin: admin.ModelAdmin, request: HttpRequest, run_id: str, step_id: str
) -> HttpResponse:
    """The Log page of a step of a run; 400 for a parameter it did not issue."""
    if not model_admin.has_view_permission(request):
        raise PermissionDenied
    run, step = _run_and_step(run_id, step_id)
    context: dict[str, Any] = {
        **model_admin.admin_site.each_context(request),
        "title": f"Log of “{step.name}”",
        "opts": Run._meta,
        "run": run,
        "step": step,
        "run_url": reverse(f"{model_admin.admin_site.name}:workflows_run_change", args=[run.pk]),
        "streams": FrameStream.values,
    }
    stream = request.GET.get("stream") or None
    try:
        after = _cursor(request.GET.get("after"))
        checked_cursor(after, PAGE_SIZE, stream)
    except InvalidInput as error:
        context["problem"] = error.message
        return TemplateResponse(request, "workflows/admin/step_log.html", context, status=400)
    rows = frames(step, after=after, limit=PAGE_SIZE + 1, stream=stream)
    shown = rows[:PAGE_SIZE]
    filters: dict[str, str | int] = {"stream": stream} if stream else {}
    latest = max(step.frames_written - PAGE_SIZE, 0)
    context.update(
        {
            "frames": shown,
            "stream": stream or "",
            "after": after,
            "first_url": f"?{urlencode(filters)}",
            "next_url": f"?{urlencode({**filters, 'after': shown[-1].seq})}"
            if len(rows) > PAGE_SIZE
            else None,
            # The last page of the whole log; with a stream filter it may show fewer rows.
            "latest_url": f"?{urlencode({**filters, 'after': latest})}" if latest else None,
        }
    )
    return TemplateResponse(request, "workflows/admin/step_log.html", context)
