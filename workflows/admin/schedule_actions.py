"""The operator verbs of one schedule: pause (with a note), unpause, trigger now and
backfill a range, each a confirmation page first and a POST second that calls the
schedule verb of :mod:`workflows.services.schedules` with ``user=request.user``.

Pausing and unpausing change the schedule (``workflows.change_schedule``); triggering
and backfilling also start runs (and ``workflows.start_run`` too). A backfill's page
shows its dry run (slots in the range, runs it would start, slots that have one) before
anyone confirms.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django import forms
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import reverse

from workflows.admin.actions import REFUSALS, confirmed, refusal_text
from workflows.models import Schedule
from workflows.services import schedules as verbs
from workflows.services.access import (
    CHANGE_SCHEDULES,
    DELETE_SCHEDULES,
    START_SCHEDULED_RUNS,
    Access,
)
from workflows.text import short_id

if TYPE_CHECKING:
    from django.contrib.admin import ModelAdmin

    from workflows.permissions import AnyUser


class NoteForm(forms.Form):
    note = forms.CharField(
        required=False,
        max_length=2000,
        widget=forms.Textarea(attrs={"rows": 2, "cols": 60}),
        help_text="Why it is paused: shown with the schedule until it is unpaused.",
    )


class NoOptionsForm(forms.Form):
    pass


class BackfillForm(forms.Form):
    start = forms.DateTimeField(help_text="The first instant of the range (your time zone).")
    end = forms.DateTimeField(
        help_text="The end of the range, not included; not in the future (your time zone)."
    )


@dataclass(frozen=True)
class ScheduleAction:
    """A verb on one schedule: its title, what it does, its form and the call.

    ``access``: the verb table's row it needs (trigger and backfill start runs, so they
    need ``start_run`` besides ``change_schedule``). ``leaves``: the schedule is gone
    afterwards, so the list follows, not its page.
    ``perform(schedule, cleaned_data, user)`` returns what the success message says.
    """

    verb: str
    title: str
    summary: str
    form: type[forms.Form]
    perform: Callable[[Schedule, dict[str, Any], AnyUser], str]
    access: Access = CHANGE_SCHEDULES
    leaves: bool = False
    when: Callable[[Schedule], bool] = lambda schedule: True

    def offered(self, schedule: Schedule) -> bool:
        """Whether the page offers the verb for the schedule in its state now."""
        return self.when(schedule)


def _pause(schedule: Schedule, data: dict[str, Any], user: AnyUser) -> str:
    verbs.pause_schedule(schedule.key, data["note"], user=user)
    return "is paused" + (f" (“{data['note']}”)" if data["note"] else "")


def _unpause(schedule: Schedule, data: dict[str, Any], user: AnyUser) -> str:
    done = verbs.unpause_schedule(schedule.key, user=user)
    when = f"; its next slot is {done.next_slot_at:%Y-%m-%d %H:%M %Z}" if done.next_slot_at else ""
    return f"runs again{when}"


def _trigger(schedule: Schedule, data: dict[str, Any], user: AnyUser) -> str:
    run = verbs.trigger_schedule(schedule.key, user=user)
    return f"started run {short_id(run.pk)} now"


def _backfill(schedule: Schedule, data: dict[str, Any], user: AnyUser) -> str:
    done = verbs.backfill_schedule(schedule.key, data["start"], data["end"], user=user)
    return (
        f"backfilled: {done.slots} slots, {len(done.started)} runs started, "
        f"{done.existing} had a run already"
    )


def _delete(schedule: Schedule, data: dict[str, Any], user: AnyUser) -> str:
    verbs.delete_schedule(schedule.key, user=user)
    return "is deleted; its runs and history stay"


SCHEDULE_ACTIONS: dict[str, ScheduleAction] = {
    action.verb: action
    for action in (
        ScheduleAction(
            "pause",
            "Pause schedule",
            "no slot starts a run until it is unpaused; runs already started go on",
            NoteForm,
            _pause,
        ),
        ScheduleAction(
            "unpause",
            "Unpause schedule",
            "it resumes from its next slot after now; slots passed while paused are not "
            "caught up (a backfill starts them)",
            NoOptionsForm,
            _unpause,
            when=lambda schedule: schedule.paused,
        ),
        ScheduleAction(
            "trigger",
            "Trigger now",
            "one run starts now, outside the slot sequence, paused or not and whatever "
            "the overlap policy",
            NoOptionsForm,
            _trigger,
            access=START_SCHEDULED_RUNS,
        ),
        ScheduleAction(
            "backfill",
            "Backfill",
            "one run for each slot in the range that has none, paused or not and whatever "
            "the overlap policy; the same range again starts nothing new",
            BackfillForm,
            _backfill,
            access=START_SCHEDULED_RUNS,
        ),
        ScheduleAction(
            "delete",
            "Delete schedule",
            "no slot of it starts again; the runs it started and its history stay, no "
            "longer pointing at it (a schedule declared in code comes back at the next "
            "migrate or sweeper start while its class declares it)",
            NoOptionsForm,
            _delete,
            access=DELETE_SCHEDULES,
            leaves=True,
        ),
    )
}


def schedule_or_404(schedule_id: str) -> Schedule:
    """The schedule of a page's address; any other id (hostile, stale) is a 404."""
    if not schedule_id.isdigit() or len(schedule_id) > 18:
        raise Http404("No schedule has that id.")
    schedule = Schedule.objects.select_related("last_run").filter(pk=int(schedule_id)).first()
    if schedule is None:
        raise Http404("No schedule has that id.")
    return schedule


def schedule_action(
    model_admin: ModelAdmin[Schedule], request: HttpRequest, schedule_id: str, verb: str
) -> HttpResponse:
    """GET: the confirmation page of ``verb`` on the schedule. POST: do it (a backfill's
    first POST shows its dry run), then the schedule's page."""
    action = SCHEDULE_ACTIONS.get(verb)
    if action is None:
        raise Http404(f"There is no schedule action called “{verb}”.")
    if not action.access.allows(request.user):
        raise PermissionDenied(action.access.refusal)
    schedule = schedule_or_404(schedule_id)
    site = model_admin.admin_site.name
    page_url = reverse(f"{site}:workflows_schedule_change", args=[schedule.pk])
    posted = request.POST if request.method == "POST" else None
    form = action.form(posted, initial={"note": schedule.note})
    valid = posted is not None and form.is_valid()
    if valid and (action.verb != "backfill" or "confirm" in request.POST):

        def perform() -> str:
            done = action.perform(schedule, form.cleaned_data, request.user)
            return f"Schedule {schedule.key} {done}."

        list_url = reverse(f"{site}:workflows_schedule_changelist")
        return confirmed(request, action.title, perform, list_url if action.leaves else page_url)
    dry, refusal = None, None
    if valid:
        try:
            dry = verbs.backfill_schedule(
                schedule.key, form.cleaned_data["start"], form.cleaned_data["end"], dry_run=True
            )
        except REFUSALS as error:
            refusal = refusal_text(error)
    context = {
        **model_admin.admin_site.each_context(request),
        "title": f"{action.title} {schedule.key}?",
        "opts": Schedule._meta,
        "schedule": schedule,
        "action": action,
        "form": form,
        "dry": dry,
        "refusal": refusal,
        "page_url": page_url,
        "list_url": reverse(f"{site}:workflows_schedule_changelist"),
    }
    return TemplateResponse(request, "workflows/admin/schedule_action.html", context)
