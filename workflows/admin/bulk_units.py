"""The console's "Recover stuck units" page: one unit verb over the steps, fan-out items
or compensations a filter selects (:mod:`workflows.services.bulk_units`).

The filter form is read from the query string (GET changes nothing): once given, the
page shows the dry run — how many units match, how many the verb would act on, why the
others would be skipped, and a sample of the units — and a confirm button that posts the
same filter (CSRF-protected) to apply it. Applied, each unit is its own transaction
pinned to what was read of it; the totals and the units not acted on come back as
messages on the same page, which then shows the dry run of what is left. Both need
``workflows.operate_run``, as the single verbs on a run's page do.

Memory stays bounded on the page too: the dry run is walked unit by unit, keeping the
counts, the reasons and the first :data:`SAMPLE` units only.
"""

from __future__ import annotations

from collections import Counter
from datetime import timedelta
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.utils.http import urlencode

from workflows.admin.actions import REFUSALS, refusal_text
from workflows.engine.guards import FAIL_STEP, RETRY_STEP, REVOKE
from workflows.models import Run
from workflows.services.access import OPERATE_RUNS
from workflows.services.bulk import bulk
from workflows.services.bulk_outcomes import ELIGIBLE, BulkResult, UnitItem
from workflows.services.bulk_units import HELD_ON, UNIT_KINDS, iter_bulk_units
from workflows.status import CompensationStatus, StepStatus

__all__ = ["SAMPLE", "UnitBulkForm", "bulk_units"]

# Units the page lists by name, eligible first; the rest are counted.
SAMPLE = 20
# "Unchanged for at least": (value, label, age).
AGES: list[tuple[str, str, timedelta]] = [
    ("5m", "5 minutes", timedelta(minutes=5)),
    ("30m", "30 minutes", timedelta(minutes=30)),
    ("1h", "an hour", timedelta(hours=1)),
    ("1d", "a day", timedelta(days=1)),
    ("7d", "a week", timedelta(days=7)),
]
_VERBS = [
    (REVOKE.name, "revoke the running attempt"),
    (FAIL_STEP.name, "fail_step: end it as failed"),
    (RETRY_STEP.name, "retry_step (failed steps)"),
]
_STATUSES = sorted(set(StepStatus.values) | set(CompensationStatus.values))


class UnitBulkForm(forms.Form):
    """The verb, the filter and the reason: what a dry run and its apply are given."""

    verb = forms.ChoiceField(
        choices=_VERBS,
        help_text=f"Revoke: {REVOKE.summary}. Fail: {FAIL_STEP.summary}. Retry: "
        f"{RETRY_STEP.summary}.",
    )
    kind = forms.ChoiceField(choices=[(name, f"{name}s") for name in UNIT_KINDS], label="Units")
    status = forms.MultipleChoiceField(
        choices=[(status, status) for status in _STATUSES],
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="Any of these; none ticked: every status.",
    )
    workflow = forms.CharField(required=False, max_length=200, help_text="A workflow's name.")
    queue = forms.CharField(required=False, max_length=60)
    held_on = forms.ChoiceField(
        choices=[("", "anything")] + [(hold, hold) for hold in HELD_ON],
        required=False,
        label="Held on",
        help_text="What holds the unit, as a run's page says: lease (a worker runs it), "
        "retry, external, concurrency, rate, budget.",
    )
    older_than = forms.ChoiceField(
        choices=[("", "any time")] + [(value, label) for value, label, _ in AGES],
        required=False,
        label="Unchanged for at least",
        help_text="A claim or a heartbeat counts as a change.",
    )
    reason = forms.CharField(
        required=False, max_length=500, help_text="Revoke and fail: kept on each unit."
    )

    def units(self) -> dict[str, Any]:
        """The filter as :func:`workflows.bulk` takes it (``units=``)."""
        data = self.cleaned_data
        ages = {value: age for value, _, age in AGES}
        return {
            "kind": data["kind"],
            "statuses": data["status"],
            "workflow": data["workflow"] or None,
            "queue": data["queue"] or None,
            "held_on": data["held_on"] or None,
            "older_than": ages.get(data["older_than"]),
        }

    def options(self) -> dict[str, Any]:
        reason = self.cleaned_data["reason"]
        return {"reason": reason} if reason else {}


def bulk_units(model_admin: admin.ModelAdmin[Run], request: HttpRequest) -> HttpResponse:
    """GET: the form, and once it is filled the dry run and the confirm button; POST:
    apply, then back to the page (showing what is left) with the totals as messages."""
    if not OPERATE_RUNS.allows(request.user):
        raise PermissionDenied
    if request.method == "POST":
        form = UnitBulkForm(request.POST)
        if form.is_valid() and "confirm" in request.POST:
            _apply(request, form)
            query = urlencode(_query(form), doseq=True)
            return HttpResponseRedirect(f"{request.path}?{query}")
    else:
        form = UnitBulkForm(request.GET if "verb" in request.GET else None)
    dry = _dry_run(request, form) if form.is_bound and form.is_valid() else None
    context = {
        **model_admin.admin_site.each_context(request),
        "title": "Recover stuck units",
        "opts": Run._meta,
        "form": form,
        **(dry or {}),
        "checked": dry is not None,
        "posted": _pairs(form) if dry is not None else [],
    }
    return TemplateResponse(request, "workflows/admin/bulk_units.html", context)


def _query(form: UnitBulkForm) -> dict[str, Any]:
    """The form's values as a query string gives them back (the page after an apply)."""
    return {name: value for name, value in form.cleaned_data.items() if value}


def _pairs(form: UnitBulkForm) -> list[tuple[str, str]]:
    """The checked form as (name, value) pairs: the confirm button posts them back."""
    return [
        (name, item)
        for name, value in _query(form).items()
        for item in (value if isinstance(value, list) else [value])
    ]


def _dry_run(request: HttpRequest, form: UnitBulkForm) -> dict[str, Any] | None:
    """The dry run's counts, reasons and sample for the page; a refusal is a message."""
    verb = form.cleaned_data["verb"]
    result = BulkResult(verb, dry_run=True, keep_items=False, units=form.cleaned_data["kind"])
    reasons: Counter[str] = Counter()
    eligible: list[UnitItem] = []
    skipped: list[UnitItem] = []
    try:
        for item in iter_bulk_units(verb, form.units(), dry_run=True, **form.options()):
            result.add(item)
            shown = eligible if item.outcome == ELIGIBLE else skipped
            if item.outcome != ELIGIBLE:
                reasons[item.reason] += 1
            if len(shown) < SAMPLE:
                shown.append(item)
    except REFUSALS as error:
        messages.error(request, f"Bulk {verb} refused: {refusal_text(error)}")
        return None
    sample = (eligible + skipped)[:SAMPLE]
    return {
        "dry": result,
        "reasons": reasons.most_common(),
        "sample": sample,
        "unshown": result.matched - len(sample),
    }


def _apply(request: HttpRequest, form: UnitBulkForm) -> None:
    verb = form.cleaned_data["verb"]
    try:
        result = bulk(verb, units=form.units(), dry_run=False, user=request.user, **form.options())
    except REFUSALS as error:
        messages.error(request, f"Bulk {verb} refused: {refusal_text(error)}")
        return
    totals = ", ".join(f"{count} {name}" for name, count in result.totals().items())
    level = messages.SUCCESS if not result.failed else messages.WARNING
    messages.add_message(request, level, f"Bulk {verb} of {result.units}s: {totals}.")
    not_done = [
        item for item in result.items if isinstance(item, UnitItem) and item.outcome != "done"
    ]
    for item in not_done[:SAMPLE]:
        messages.add_message(
            request,
            messages.WARNING if item.outcome == "failed" else messages.INFO,
            f"{item.kind.capitalize()} {item.unit} ({item.status}) {item.outcome}: {item.reason}",
        )
