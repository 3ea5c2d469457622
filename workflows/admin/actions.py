"""Operator actions of the console: one run and many runs.

Every action is a confirmation page first (what will happen, and whether the run's
state allows it now) and a POST second, which calls the same service function the
commands and the API call, with ``user=request.user`` so the run's history records who
did it. Nothing here writes engine state. The engine's refusals (a run that moved, a
step that does not accept the verb, bad JSON) become admin messages, never error pages.

A verb is one :class:`RunAction`: its form and the call it makes. Bulk actions are the
run verbs of :func:`workflows.bulk`, whose dry run gives the confirmation page its
matched / eligible / skipped counts.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils import timezone
from django.utils.translation import ngettext

from workflows import services
from workflows.admin.deadline_field import DEADLINE_FORMS, DeadlineField, shown_deadline
from workflows.admin.revoke import RevokeForm, revoke
from workflows.engine.guards import RUN_VERBS, STEP_VERBS
from workflows.errors import DefinitionMissing, WorkflowError
from workflows.models import Run, Step
from workflows.permissions import OVERRIDE_GATE_RULE
from workflows.queries import get_run
from workflows.queries.explain import explain
from workflows.services.access import OPERATE_RUNS, VERBS
from workflows.services.bulk import BulkResult, bulk
from workflows.status import DecisionVia, RunStatus
from workflows.text import short_id

if TYPE_CHECKING:
    from django.http import QueryDict

    from workflows.admin.registered import RunAdmin
    from workflows.permissions import AnyUser

    class RunFormClass(Protocol):
        """The form class of a :class:`RunAction`: every one is built for its run."""

        def __call__(
            self, data: QueryDict | None, *, run: Run, initial: dict[str, Any] | None
        ) -> forms.Form: ...


__all__ = [
    "BULK_VERBS",
    "REFUSALS",
    "RUN_ACTIONS",
    "RunAction",
    "bulk_actions",
    "refusal_text",
    "run_action",
]

# Engine refusals a person can act on: shown as messages.
REFUSALS = (WorkflowError, PermissionDenied)
# Runs a bulk skips listed by id on its confirmation page, and after it is applied; the
# rest are counted by reason.
SKIPPED_SHOWN = 20


class RunForm(forms.Form):
    """The form of a run verb, built for its run (``run``: ``None`` for a bulk action's).

    The forms of a verb are mixed (a rerun asks for a step, a reason and a deadline):
    each passes ``run`` on, and this one, last before Django's form, drops it.
    """

    def __init__(self, *args: Any, run: Run | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)


class NoOptionsForm(RunForm):
    pass


class ReasonForm(RunForm):
    reason = forms.CharField(
        required=False,
        max_length=2000,
        widget=forms.Textarea(attrs={"rows": 2, "cols": 60}),
        help_text="Kept in the run's history with your name.",
    )


class CancelForm(ReasonForm):
    compensate = forms.BooleanField(
        required=False,
        initial=True,
        label="Compensate",
        help_text="Undo what the run completed, newest first. Untick to stop without undoing.",
    )


class PriorityForm(RunForm):
    priority = forms.IntegerField(
        min_value=-1000,
        max_value=1000,
        help_text="-1000 to 1000; higher is claimed first. Steps not started yet (and "
        "live child runs) take it too; a queued run moves in its workflow's queue.",
    )

    def __init__(self, *args: Any, run: Run | None = None, **kwargs: Any) -> None:
        super().__init__(*args, run=run, **kwargs)
        if run is not None:
            self.fields["priority"].initial = run.priority


class BusinessKeyForm(RunForm):
    business_key = forms.CharField(
        max_length=255,
        strip=False,
        help_text="Names the run in the lists and to budgets kept per business key. A "
        "workflow with unique keys refuses one another live run holds.",
    )

    def __init__(self, *args: Any, run: Run | None = None, **kwargs: Any) -> None:
        super().__init__(*args, run=run, **kwargs)
        if run is not None:
            self.fields["business_key"].initial = run.business_key


def _step_choices(run: Run, verb: str | None) -> list[tuple[str, str]]:
    """The run's steps, or those a step verb's guard accepts now, as (id, label)."""
    steps = Step.objects.filter(run_id=run.pk).order_by("id").values_list("id", "name", "status")
    accepted = STEP_VERBS[verb].accepts if verb else None
    return [
        (str(pk), f"{name} ({status})")
        for pk, name, status in steps
        if accepted is None or status in accepted
    ]


class StepForm(RunForm):
    """A step of the run; ``step_verb`` narrows the choice to the steps it accepts."""

    step_verb: str | None = None
    step = forms.ChoiceField()

    def __init__(self, *args: Any, run: Run, **kwargs: Any) -> None:
        super().__init__(*args, run=run, **kwargs)
        step = self.fields["step"]
        assert isinstance(step, forms.ChoiceField)  # declared so above
        step.choices = _step_choices(run, self.step_verb)


class ReplayDeadlineForm(RunForm):
    """The deadline of a replay (retry, rerun), shown as the run's deadline now.

    A replay clears the deadline unless given one (:func:`workflows.services.retry_run`),
    so the field starts with the run's deadline and posts it back: left as shown it is
    kept (to the microsecond), changed it is the new one, emptied there is none. A
    deadline that has passed cannot be kept, nor can a run whose compensation failed
    have one: the field then starts empty and says why.
    """

    deadline = DeadlineField()

    def __init__(self, *args: Any, run: Run, **kwargs: Any) -> None:
        super().__init__(*args, run=run, **kwargs)
        self.kept = run.deadline
        field = self.fields["deadline"]
        if run.status == RunStatus.COMPENSATION_FAILED:
            # Its retry unwinds again, which the engine lets no deadline stop.
            field.help_text = (
                "None: a retry runs the failed compensations again, which no deadline stops."
            )
            self.kept = None
        elif self.kept is None:
            field.help_text = f"Optional: none now. {DEADLINE_FORMS.capitalize()}."
        elif self.kept <= timezone.now():
            field.help_text = (
                f"The run's deadline, {shown_deadline(self.kept)}, has passed: give a new "
                f"one ({DEADLINE_FORMS}), or leave this empty for none."
            )
            self.kept = None
        else:
            field.initial = shown_deadline(self.kept)
            field.help_text = (
                f"The run's deadline, kept as shown; change it ({DEADLINE_FORMS}), or "
                "empty it for none."
            )

    def clean_deadline(self) -> timedelta | datetime | None:
        posted = self.data.get(self.add_prefix("deadline"), "").strip()
        if self.kept is not None and posted == shown_deadline(self.kept):
            return self.kept
        deadline: timedelta | datetime | None = self.cleaned_data["deadline"]
        return deadline


class RerunForm(ReplayDeadlineForm, StepForm, ReasonForm):
    pass


class RetryStepForm(StepForm):
    step_verb = "retry_step"


class SkipStepForm(StepForm):
    step_verb = "skip_step"
    output = forms.JSONField(
        required=False,
        initial=None,
        widget=forms.Textarea(attrs={"rows": 4, "cols": 60}),
        help_text=(
            "JSON recorded as the step's output (what downstream steps read). Skipping a "
            'gate decides it: give the decision, e.g. {"decision": "approved", '
            '"selections": ["express"], "feedback": "…"} (empty: approved, nothing selected); '
            f"only those who may decide the gate, or hold {OVERRIDE_GATE_RULE} "
            "(recorded as an override), may skip it."
        ),
    )


class SignalForm(RunForm):
    name = forms.CharField(max_length=200)
    payload = forms.JSONField(
        required=False, widget=forms.Textarea(attrs={"rows": 4, "cols": 60}), help_text="JSON."
    )
    idempotency_key = forms.CharField(
        required=False, max_length=255, help_text="Optional: the same key sends the signal once."
    )

    def __init__(self, *args: Any, run: Run, **kwargs: Any) -> None:
        super().__init__(*args, run=run, **kwargs)
        try:
            names = services.signals_waited_for(run)
        except DefinitionMissing:
            return
        if names:
            self.fields["name"] = forms.ChoiceField(choices=[(name, name) for name in names])


@dataclass(frozen=True)
class RunAction:
    """An operator verb on one run: its title, form, the guard it shows, and the call.

    ``perform(run, cleaned_data, user)`` calls one service function and returns what the
    success message says; ``guard`` names the verb in :data:`RUN_VERBS` whose refusal
    the confirmation page shows before anyone posts.
    """

    verb: str
    title: str
    summary: str
    form: RunFormClass
    perform: Callable[[Run, dict[str, Any], AnyUser], str]
    guard: str | None = None


def _cancel(run: Run, data: dict[str, Any], user: AnyUser) -> str:
    done = services.request_cancel(
        run, reason=data["reason"], compensate=data["compensate"], user=user
    )
    if done.already:  # a second cancel: the run is left as it was
        return f"was {done.stopped_as} already; nothing changed (it is {done.run.status})"
    return f"is now {done.run.status}" + ("" if data["compensate"] else " (without compensation)")


def _with_reason(service: Callable[..., Run]) -> Callable[[Run, dict[str, Any], AnyUser], str]:
    def perform(run: Run, data: dict[str, Any], user: AnyUser) -> str:
        return f"is now {service(run, reason=data['reason'], user=user).status}"

    return perform


def _plain(service: Callable[..., Run]) -> Callable[[Run, dict[str, Any], AnyUser], str]:
    def perform(run: Run, data: dict[str, Any], user: AnyUser) -> str:
        return f"is now {service(run, user=user).status}"

    return perform


def _priority(run: Run, data: dict[str, Any], user: AnyUser) -> str:
    done = services.change_priority(run, data["priority"], user=user)
    return f"has priority {done.priority} (it was {run.priority}); it is {done.status}"


def _business_key(run: Run, data: dict[str, Any], user: AnyUser) -> str:
    done = services.set_business_key(run, data["business_key"], user=user)
    if done.version == run.version:
        return f"has the business key {done.business_key!r} already; nothing changed"
    return f"has the business key {done.business_key!r}"


def _dismissal(
    service: Callable[..., Run], word: str
) -> Callable[[Run, dict[str, Any], AnyUser], str]:
    """Dismiss or undismiss, saying when the run was so already (nothing changed)."""

    def perform(run: Run, data: dict[str, Any], user: AnyUser) -> str:
        done = service(run, user=user)
        return (
            f"was {word} already; nothing changed" if done.version == run.version else f"is {word}"
        )

    return perform


def _deadline_now(before: datetime | None, after: datetime | None) -> str:
    """What a replay did to the run's deadline, in words."""
    if after is None:
        return "; it has no deadline now" if before is not None else ""
    verb = "stays" if after == before else "is now"
    return f"; its deadline {verb} {shown_deadline(after)}"


def _retry(run: Run, data: dict[str, Any], user: AnyUser) -> str:
    done = services.retry_run(run, user=user, deadline=data["deadline"])
    return f"is now {done.status}{_deadline_now(run.deadline, done.deadline)}"


def _rerun(run: Run, data: dict[str, Any], user: AnyUser) -> str:
    done = services.rerun_from(
        run, int(data["step"]), reason=data["reason"], user=user, deadline=data["deadline"]
    )
    return (
        f"runs again from step #{data['step']}; it is now {done.status}"
        f"{_deadline_now(run.deadline, done.deadline)}"
    )


def _retry_step(run: Run, data: dict[str, Any], user: AnyUser) -> str:
    step = services.retry_step(int(data["step"]), user=user)
    return f"retries step “{step.name}” ({step.status})"


def _skip_step(run: Run, data: dict[str, Any], user: AnyUser) -> str:
    step = services.skip_step(int(data["step"]), output=data["output"], user=user)
    if step.decided_via == DecisionVia.OVERRIDE:
        return f"skipped gate “{step.name}” ({step.decision}), overriding the gate's rule"
    if step.decided_via == DecisionVia.SKIP:
        return f"skipped gate “{step.name}” ({step.decision})"
    return f"skipped step “{step.name}” ({step.status})"


def _signal(run: Run, data: dict[str, Any], user: AnyUser) -> str:
    signal = services.send_signal(
        run,
        data["name"],
        data["payload"],
        idempotency_key=data["idempotency_key"] or None,
        user=user,
    )
    state = f"consumed by step #{signal.consumed_by_id}" if signal.consumed_by_id else "kept"
    return f"received signal “{signal.name}” ({state})"


def _check_step(run: Run, data: dict[str, Any]) -> None:
    """A posted step id must be one of this run's steps (the form offered only those)."""
    if "step" in data and not Step.objects.filter(pk=int(data["step"]), run_id=run.pk).exists():
        raise PermissionDenied("that step is not a step of this run")


RUN_ACTIONS: dict[str, RunAction] = {
    action.verb: action
    for action in (
        RunAction(
            "cancel", "Cancel run", RUN_VERBS["cancel"].summary, CancelForm, _cancel, "cancel"
        ),
        RunAction(
            "terminate",
            "Terminate run",
            RUN_VERBS["terminate"].summary,
            ReasonForm,
            _with_reason(services.terminate_run),
            "terminate",
        ),
        RunAction(
            "pause",
            "Pause run",
            RUN_VERBS["pause"].summary,
            ReasonForm,
            _with_reason(services.pause_run),
            "pause",
        ),
        RunAction(
            "resume",
            "Resume run",
            RUN_VERBS["resume"].summary,
            NoOptionsForm,
            _plain(services.resume_run),
            "resume",
        ),
        RunAction(
            "retry",
            "Retry run",
            RUN_VERBS["retry"].summary,
            ReplayDeadlineForm,
            _retry,
            "retry",
        ),
        RunAction(
            "rerun", "Rerun from a step", RUN_VERBS["rerun"].summary, RerunForm, _rerun, "rerun"
        ),
        RunAction(
            "priority",
            "Change priority",
            RUN_VERBS["priority"].summary,
            PriorityForm,
            _priority,
            "priority",
        ),
        RunAction(
            "business_key",
            "Set business key",
            RUN_VERBS["business_key"].summary,
            BusinessKeyForm,
            _business_key,
            "business_key",
        ),
        RunAction(
            "dismiss",
            "Dismiss run",
            RUN_VERBS["dismiss"].summary,
            NoOptionsForm,
            _dismissal(services.dismiss_run, "dismissed"),
            "dismiss",
        ),
        RunAction(
            "undismiss",
            "Undismiss run",
            RUN_VERBS["undismiss"].summary,
            NoOptionsForm,
            _dismissal(services.undismiss_run, "shown in the lists again (undismissed)"),
            "undismiss",
        ),
        RunAction(
            "retry_step",
            "Retry a step",
            STEP_VERBS["retry_step"].summary,
            RetryStepForm,
            _retry_step,
        ),
        RunAction(
            "skip_step", "Skip a step", STEP_VERBS["skip_step"].summary, SkipStepForm, _skip_step
        ),
        RunAction("revoke", "Revoke lease", STEP_VERBS["revoke"].summary, RevokeForm, revoke),
        RunAction(
            "signal",
            "Send a signal",
            "deliver a named signal with a JSON payload to a step waiting for it",
            SignalForm,
            _signal,
        ),
    )
}


def run_action(model_admin: RunAdmin, request: HttpRequest, run_id: str, verb: str) -> HttpResponse:
    """GET: the confirmation page of ``verb`` on the run. POST: do it, then the run page.

    Who may is the verb's row of :data:`VERBS` (operating runs for every verb here), the
    row the run page asks before it offers the verb (:mod:`workflows.admin.offers`)."""
    access = VERBS.get(verb, OPERATE_RUNS)
    if not access.allows(request.user):
        raise PermissionDenied(access.refusal)
    site = model_admin.admin_site.name
    action = RUN_ACTIONS.get(verb)
    try:
        run = get_run(run_id)
    except WorkflowError as error:
        messages.error(request, error.message)
        return HttpResponseRedirect(reverse(f"{site}:workflows_run_changelist"))
    run_url = reverse(f"{site}:workflows_run_change", args=[run.pk])
    if action is None:
        messages.error(request, f"There is no operator action called “{verb}”.")
        return HttpResponseRedirect(run_url)
    initial = {"step": request.GET.get("step")} if request.GET.get("step") else None
    posted = request.POST if request.method == "POST" else None
    form = action.form(posted, run=run, initial=initial)
    if request.method == "POST" and form.is_valid():

        def perform() -> str:
            _check_step(run, form.cleaned_data)
            return f"Run {short_id(run.pk)} {action.perform(run, form.cleaned_data, request.user)}."

        return confirmed(request, action.title, perform, run_url)
    refusal = RUN_VERBS[action.guard].refusal(run.status) if action.guard else None
    context = {
        **model_admin.admin_site.each_context(request),
        "title": f"{action.title} {short_id(run.pk)}?",
        "opts": Run._meta,
        "run": run,
        "run_url": run_url,
        "action": action,
        "form": form,
        "refusal": refusal,
        "explanation": explain(run),
    }
    return TemplateResponse(request, "workflows/admin/run_action.html", context)


def refusal_text(error: Exception) -> str:
    """An engine refusal as a sentence for a message: its text, ending with a full stop."""
    text = error.message if isinstance(error, WorkflowError) else str(error) or "permission denied"
    return text if text.endswith(".") else f"{text}."


def act_url(
    model_admin: admin.ModelAdmin, view: Callable[..., HttpResponse], row: str, name: str
) -> URLPattern:
    """The address of a row's operator actions, ``<row>/act/<verb>/`` (``row`` a path
    converter, e.g. ``<str:run_id>``), served by ``view(model_admin, request, <row>,
    verb)`` behind the admin's login."""
    wrapped = model_admin.admin_site.admin_view(partial(view, model_admin))
    return path(f"{row}/act/<str:verb>/", wrapped, name=name)


def confirmed(
    request: HttpRequest, title: str, perform: Callable[[], str], back_to: str
) -> HttpResponseRedirect:
    """An operator's confirmed action, done: what ``perform`` returns as a success
    message, or the engine's refusal as an error message saying nothing changed; back
    to ``back_to`` either way."""
    try:
        outcome = perform()
    except REFUSALS as error:
        messages.error(request, f"{title} refused: {refusal_text(error)} Nothing changed.")
    else:
        messages.success(request, outcome)
    return HttpResponseRedirect(back_to)


# -- bulk ----------------------------------------------------------------------------


@dataclass(frozen=True)
class BulkVerb:
    """A run verb offered as an admin action on the selected runs, and its form.

    ``needs``: the option of the form without which the dry run cannot say which runs it
    would act on (the step a rerun starts from; the priority, which the verb refuses to
    go without), and ``ask``: what the page says until the form gives it.
    """

    verb: str
    label: str
    form: type[forms.Form]
    needs: str | None = None
    ask: str = ""


class BulkRerunForm(ReasonForm):
    from_step = forms.CharField(
        max_length=200, help_text="The name of the step to run again in every selected run."
    )


BULK_VERBS = (
    BulkVerb("cancel", "Cancel selected runs…", CancelForm),
    BulkVerb("terminate", "Terminate selected runs…", ReasonForm),
    BulkVerb("pause", "Pause selected runs…", ReasonForm),
    BulkVerb("resume", "Resume selected runs…", NoOptionsForm),
    BulkVerb("retry", "Retry selected runs…", NoOptionsForm),
    BulkVerb(
        "rerun",
        "Rerun selected runs from a step…",
        BulkRerunForm,
        "from_step",
        "Name the step to rerun from to see which runs have it.",
    ),
    BulkVerb(
        "priority",
        "Set the priority of selected runs…",
        PriorityForm,
        "priority",
        "Give the priority to see which runs take it.",
    ),
    BulkVerb("dismiss", "Dismiss selected runs…", NoOptionsForm),
    BulkVerb("undismiss", "Undismiss selected runs…", NoOptionsForm),
)


def _options(data: dict[str, Any]) -> dict[str, Any]:
    """The form's data as :func:`workflows.bulk` options (no empty reason)."""
    return {name: value for name, value in data.items() if not (name == "reason" and not value)}


def _report(
    model_admin: admin.ModelAdmin[Run], request: HttpRequest, verb: str, result: BulkResult
) -> None:
    """The totals of an applied bulk, then each run it did not act on with the reason
    (the first :data:`SKIPPED_SHOWN` by id, the rest counted by reason)."""
    totals = ", ".join(f"{count} {name}" for name, count in result.totals().items())
    level = messages.SUCCESS if not result.failed else messages.WARNING
    model_admin.message_user(request, f"Bulk {verb}: {totals}.", level)
    not_done = [item for item in result.items if item.outcome != "done"]
    for item in not_done[:SKIPPED_SHOWN]:
        state = f" ({item.status})" if item.status else ""
        model_admin.message_user(
            request,
            f"Run {short_id(item.run)}{state} {item.outcome}: {item.reason}",
            messages.WARNING if item.outcome == "failed" else messages.INFO,
        )
    for reason, count in Counter(item.reason for item in not_done[SKIPPED_SHOWN:]).most_common(5):
        runs = ngettext("%(count)d more run", "%(count)d more runs", count) % {"count": count}
        model_admin.message_user(request, f"{runs}: {reason}", messages.INFO)


def _bulk_action(spec: BulkVerb) -> Callable[..., HttpResponse | None]:
    def action(
        model_admin: admin.ModelAdmin[Run], request: HttpRequest, queryset: QuerySet[Run]
    ) -> HttpResponse | None:
        # Bound once the page was shown (checked again, or confirmed): what was typed
        # stays in the form, and a bad value is an error on its field.
        posted = "confirm" in request.POST or "preview" in request.POST
        form = spec.form(request.POST if posted else None)
        valid = posted and form.is_valid()
        if "confirm" in request.POST and valid:
            try:
                result = bulk(
                    spec.verb,
                    queryset,
                    dry_run=False,
                    user=request.user,
                    **_options(form.cleaned_data),
                )
            except REFUSALS as error:
                messages.error(request, f"Bulk {spec.verb} refused: {refusal_text(error)}")
                return None
            _report(model_admin, request, spec.verb, result)
            return None
        try:
            if spec.needs is None:
                dry: BulkResult | None = bulk(spec.verb, queryset, dry_run=True)
            elif valid:
                needed = {spec.needs: form.cleaned_data[spec.needs]}
                dry = bulk(spec.verb, queryset, dry_run=True, **needed)
            else:
                dry = None
        except REFUSALS as error:
            messages.error(request, f"Bulk {spec.verb} refused: {refusal_text(error)}")
            return None
        skipped = [item for item in dry.items if item.outcome != "eligible"] if dry else []
        context = {
            **model_admin.admin_site.each_context(request),
            "title": spec.label.rstrip("…"),
            "opts": Run._meta,
            "spec": spec,
            "summary": RUN_VERBS[spec.verb].summary,
            "dry": dry,
            "reasons": Counter(item.reason for item in skipped).most_common(),
            "skipped": skipped[:SKIPPED_SHOWN],
            "form": form,
            "selected": request.POST.getlist(ACTION_CHECKBOX_NAME),
            "select_across": request.POST.get("select_across", "0"),
            "action_name": request.POST.get("action"),
            "index": request.POST.get("index", "0"),
            "query_string": request.META.get("QUERY_STRING", ""),
        }
        return TemplateResponse(request, "workflows/admin/bulk_action.html", context)

    action.__name__ = f"bulk_{spec.verb}"
    return admin.action(description=spec.label, permissions=["operate"])(action)


def bulk_actions() -> list[Callable[..., HttpResponse | None]]:
    """The admin actions of the runs list, one per :data:`BULK_VERBS` entry."""
    return [_bulk_action(spec) for spec in BULK_VERBS]
