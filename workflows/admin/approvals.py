"""The approvals inbox and the signed-link pages, inside the Django admin.

Plain admin pages (templates extending ``admin/base_site.html``, URLs from
``StepAdmin.get_urls``, every view wrapped in ``admin_site.admin_view``), so a host
project's admin theme applies and anonymous visitors go to the admin login with
``next``. Who may decide which gate is :mod:`workflows.approvals`' rule; deciding and
claiming go through :mod:`workflows.services`, which check it again under the run lock.
Nothing here writes engine state.

Every refusal a person can meet (a decision that lost a race, a gate claimed by someone
else or timed out, bad selections, no permission) becomes a message on the page, never
an error page: the engine's errors are caught here and worded for a person.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils import timezone
from django.utils.decorators import method_decorator
from django.views.decorators.http import require_POST

from workflows import services
from workflows.admin.offers import gate_offers
from workflows.admin.runs import items
from workflows.approvals import (
    GateCount,
    count_waiting_gates,
    decidable_by,
    gates_for,
    may_override_claim,
    waiting_gates,
)
from workflows.approvals.links import LinkExpired, LinkInvalid, LinkTarget, read_token
from workflows.definitions import Gate, registry
from workflows.errors import (
    GateAlreadyDecided,
    GateClaimed,
    InvalidDecision,
    StaleState,
    StepNotFound,
    WorkflowError,
)
from workflows.models import Run, Step
from workflows.permissions import VIEW_RUN, VIEW_STEP
from workflows.queries import get_step
from workflows.queries.iterations import earlier_iterations
from workflows.status import StepStatus
from workflows.text import duration, short_id

if TYPE_CHECKING:
    from django.http import QueryDict
    from django.utils.datastructures import MultiValueDict

    from workflows.permissions import AnyUser

__all__ = ["ApprovalsViews", "DecisionForm", "decide", "inbox_visible"]

# How much of a run's input the inbox shows on one line.
INPUT_SUMMARY_CHARS = 120
# The inbox lists the oldest waiting gates, this many: a person decides the oldest
# first, and thousands of rows are seconds to build and render.
INBOX_ROWS = 100

# Why a signed link cannot be used: the page's title and what the person may do.
LINK_REFUSALS: dict[str, tuple[str, str]] = {
    "invalid": (
        "This approval link is not valid",
        "The link was changed or cut short on its way to you, or it was signed with a key "
        "this site no longer accepts. Open the approvals inbox instead.",
    ),
    "other_user": (
        "This approval link is for someone else",
        "Each approval link is made for one person. Sign in as the person it was sent to, "
        "or open your own approvals inbox.",
    ),
    "expired": (
        "This approval link has expired",
        "Approval links work for a limited time. If the gate still waits, you find it in "
        "the approvals inbox.",
    ),
    "gone": (
        "This gate no longer exists",
        "The run this link points to has been removed. There is nothing left to decide.",
    ),
    "used": (
        "This approval link has been used",
        "The gate was decided, timed out, or claimed or released since the link was made, "
        "so the link no longer applies. Nothing was changed now. If the gate still waits, "
        "you find it in the approvals inbox.",
    ),
    "not_allowed": (
        "You may not decide this gate",
        "The link is genuine, but your account is not (or no longer) among those who may "
        "decide this gate. Nothing was changed.",
    ),
}


def inbox_visible(user: AnyUser, waiting: GateCount | None = None) -> bool:
    """Whether the admin index links to the inbox for ``user``.

    A staff user who may decide at least one waiting gate, who may view all gates, or
    whom a registered gate names (by its permission, or among its assignees) even while
    none of its gates waits: an approver whose inbox is empty still finds it, instead
    of an index saying they may use nothing. ``waiting``: the gates waiting for the
    user (:func:`count_waiting_gates`), when the caller has counted them already.
    """
    if user.has_perm(VIEW_STEP):
        return True
    if waiting is None:
        waiting = count_waiting_gates(user, cap=0)
    return bool(waiting) or named_by_a_gate(user)


def named_by_a_gate(user: AnyUser) -> bool:
    """Whether a gate of a registered workflow names ``user``: they hold its permission,
    or are among its assignees by username or group.

    Gates naming nobody (which accept anyone signed in) do not count: they would make
    every staff user an approver. Read from the definitions, not the runs; permissions
    are cached on the user, and the groups cost one query, only when a gate lists one.
    """
    groups: set[str] | None = None
    for workflow in registry.all():
        for node in workflow.nodes.values():
            if not isinstance(node, Gate):
                continue
            if node.permission and user.has_perm(node.permission):
                return True
            if user.get_username() in node.assignee_users:
                return True
            if node.assignee_groups:
                if groups is None:
                    groups = set(user.groups.values_list("name", flat=True))
                if groups & set(node.assignee_groups):
                    return True
    return False


def summarise_input(data: Any) -> str:
    """One line of a run's input: scalars as ``key: value``, collections as counts.

    An approver needs to recognise the case at a glance, not to read the whole document,
    which the run page shows.
    """
    if not isinstance(data, dict):
        text = json.dumps(data, ensure_ascii=False)
    else:
        parts = []
        for key, value in data.items():
            if isinstance(value, list):
                shown = f"[{items(len(value))}]"
            elif isinstance(value, dict):
                shown = "{…}"
            else:
                shown = json.dumps(value, ensure_ascii=False).strip('"')
            parts.append(f"{key}: {shown}")
        text = ", ".join(parts)
    if len(text) > INPUT_SUMMARY_CHARS:
        return text[: INPUT_SUMMARY_CHARS - 1] + "…"
    return text


def time_left(due_at: datetime | None, now: datetime) -> str:
    """Time left before a gate's timeout, in words."""
    if due_at is None:
        return "no timeout"
    if due_at <= now:
        return "overdue"
    return duration(due_at - now)


class OfferedOptions(forms.MultipleChoiceField):
    """A gate's options: rendered by the form, checked by the service.

    Whatever was posted is passed on as it came, so unknown values, a second value for
    a radio button and wrong counts all meet :func:`services.clean_selections` and its
    :class:`InvalidDecision`: the rule lives in one place.
    """

    def to_python(self, value: Any) -> list[str]:
        if not value:
            return []
        return [str(value)] if isinstance(value, str) else [str(item) for item in value]

    def validate(self, value: Any) -> None:
        """Accept anything: the service decides what a gate takes."""


class DecisionForm(forms.Form):
    """A gate's options as radio buttons (one choice at most) or checkboxes, and feedback.

    The help text only tells the person what the gate asks for; the service checks it.
    """

    # What was posted, or Django's empty MultiValueDict for an unbound form: never a
    # plain mapping, so :meth:`selections` can read every value of a field.
    data: MultiValueDict[str, str]

    version = forms.IntegerField(widget=forms.HiddenInput)
    feedback = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 3, "cols": 60}),
        help_text="Kept with the decision in the run's history.",
    )

    def __init__(self, gate: Step, data: QueryDict | None = None) -> None:
        super().__init__(data, initial={"version": gate.version})
        choices = [(option["value"], option["label"]) for option in gate.options]
        if not choices:
            return
        span = _selection_span(gate.min_selections, gate.max_selections)
        one = gate.max_selections == 1
        field = OfferedOptions(
            choices=choices,
            required=False,
            widget=forms.RadioSelect if one else forms.CheckboxSelectMultiple,
        )
        field.label = "Options"
        field.help_text = f"Choose {span} to approve; a rejection ignores them."
        self.fields = {"selections": field, **self.fields}

    def selections(self) -> list[str]:
        """Every option value posted, even beyond what the widget lets a browser send."""
        return self.data.getlist(self.add_prefix("selections"))


def _selection_span(low: int, high: int | None) -> str:
    if high is None:
        return f"at least {low}" if low else "any number"
    if low == high:
        return f"exactly {low}"
    return f"{low} to {high}"


def _address(request: HttpRequest) -> str | None:
    return request.META.get("REMOTE_ADDR") or None


def _short(run_id: Any) -> str:
    return short_id(run_id)


def gone(gate: Step) -> str:
    """Why ``gate`` (read again) no longer waits, for someone whose action came too late.

    A decision without a decider is the timeout's (``on_timeout``): every person's
    decision goes through the services, which need a signed-in user.
    """
    if gate.status == StepStatus.TIMED_OUT or (gate.decision and gate.decided_by_id is None):
        outcome = f" and was {gate.decision} automatically" if gate.decision else ""
        return f"This gate timed out before your decision{outcome}; nothing was recorded."
    if gate.decision:
        decider = gate.decided_by
        assert decider is not None  # a decision without a decider is the timeout's, above
        return (
            f"This gate was already {gate.decision} by {decider.get_username()}; "
            "nothing was recorded."
        )
    return f"This gate is no longer waiting (it is {gate.status}); nothing was recorded."


def _refusal(error: Exception, gate: Step | None = None) -> str:
    """What a person is told when the engine refused their decision, claim or release."""
    if isinstance(error, GateAlreadyDecided) and gate is not None:
        gate.refresh_from_db()
        return gone(gate)
    if isinstance(error, StaleState):
        return (
            "This gate changed since you opened it (someone claimed, released or decided it); "
            "nothing was recorded. Check it and try again."
        )
    if isinstance(error, GateClaimed):
        return f"{error.message}. Nothing was recorded; ask them or wait for them to release it."
    if isinstance(error, InvalidDecision):
        return f"{error.message}. Nothing was recorded."
    if isinstance(error, PermissionDenied):
        return f"You may not decide this gate ({error}). Nothing was recorded."
    if isinstance(error, WorkflowError):
        return f"{error.message}. Nothing was recorded."
    raise error


# Errors a decision, claim or release may end in that a person can do something about.
REFUSALS = (WorkflowError, PermissionDenied)


def decide(request: HttpRequest, gate: Step, form: DecisionForm) -> bool:
    """Approve or reject ``gate`` as the signed-in user from a posted, bound ``form``.

    Returns whether the decision was recorded; a refusal is a message for the next page.
    The service decides at the version the person saw, so a gate that was claimed,
    released or decided meanwhile is reported as changed instead of being decided blind
    (checked again by the engine under the run lock).
    """
    if not form.is_valid():
        messages.error(request, "The decision form was incomplete; nothing was recorded.")
        return False
    approve = request.POST.get("decision") == "approve"
    try:
        verb = services.approve_gate if approve else services.reject_gate
        extra = {"selections": form.selections()} if approve else {}
        decided = verb(
            gate,
            user=request.user,
            feedback=form.cleaned_data["feedback"],
            address=_address(request),
            expected_version=form.cleaned_data["version"],
            **extra,
        )
    except REFUSALS as error:
        messages.error(request, _refusal(error, gate))
        return False
    run = Run.objects.only("status", "business_key").get(pk=decided.run_id)
    label = f"{run.business_key} ({_short(run.pk)})" if run.business_key else _short(run.pk)
    messages.success(
        request,
        f"{'Approved' if approve else 'Rejected'} gate “{decided.name}” of run {label}; "
        f"the run is now {run.status}.",
    )
    return True


class ApprovalsViews:
    """The inbox, decision, claim and signed-link pages of one admin site."""

    def __init__(self, admin_site: admin.AdminSite) -> None:
        self.admin_site = admin_site

    def urls(self) -> list[URLPattern]:
        wrap: Callable[[Callable[..., HttpResponse]], Callable[..., HttpResponse]] = (
            self.admin_site.admin_view
        )
        return [
            path("approvals/", wrap(self.inbox), name="workflows_approvals"),
            path("approvals/<int:step_id>/", wrap(self.decision), name="workflows_approval"),
            path(
                "approvals/<int:step_id>/claim/",
                wrap(self.claim),
                name="workflows_approval_claim",
            ),
            path(
                "approvals/<int:step_id>/release/",
                wrap(self.release),
                name="workflows_approval_release",
            ),
            path(
                "approvals/<int:step_id>/take-over/",
                wrap(self.take_over),
                name="workflows_approval_take_over",
            ),
            path(
                "approvals/link/<str:token>/",
                wrap(self.link),
                name="workflows_approval_link",
            ),
        ]

    # -- shared -----------------------------------------------------------------------

    def context(self, request: HttpRequest, title: str, **extra: Any) -> dict[str, Any]:
        return {
            **self.admin_site.each_context(request),
            "title": title,
            "inbox_url": reverse(f"{self.admin_site.name}:workflows_approvals"),
            **extra,
        }

    def may_decide(self, request: HttpRequest, gate: Step) -> bool:
        """The approvals rule on one gate, as the services apply it."""
        return Step.objects.filter(pk=gate.pk).filter(decidable_by(request.user)).exists()

    def run_url(self, request: HttpRequest, run_id: Any) -> str | None:
        """The run's admin page, for those who may view runs."""
        if not request.user.has_perm(VIEW_RUN):
            return None
        return reverse(f"{self.admin_site.name}:workflows_run_change", args=[run_id])

    def gate_facts(self, request: HttpRequest, gate: Step) -> dict[str, Any]:
        """What the decision and link pages show about a gate and its run.

        A gate in a loop shows its earlier rounds' decisions with their feedback (one
        query more, only past the first round). A gate someone else has claimed is
        shown with its holder, and its decision
        buttons are disabled unless the user may override claims (then they may decide
        it anyway, or take it over): the refusal comes before submitting, not after.
        """
        run = gate.run
        holder = gate.claimed_by.get_username() if gate.claimed_by else None
        due = (
            gate.timers.filter(kind="gate_timeout", status="scheduled")
            .order_by("due_at")
            .values_list("due_at", flat=True)
            .first()
        )
        return {
            "gate": gate,
            "run": run,
            "run_short": _short(run.pk),
            "run_url": self.run_url(request, run.pk),
            "input_summary": summarise_input(run.input),
            "due_at": due,
            "time_left": time_left(due, timezone.now()),
            # A gate in a loop: how its earlier rounds were decided, and why.
            "earlier_rounds": earlier_iterations([gate]).get(gate.pk, []),
            "claimed_by": holder,
            "claimed_by_other": holder is not None and holder != request.user.get_username(),
            "may_override": may_override_claim(request.user),
        }

    # -- the inbox --------------------------------------------------------------------

    def inbox(self, request: HttpRequest) -> HttpResponse:
        """Waiting gates the user may decide, oldest first (every gate for viewers)."""
        views_all = request.user.has_perm(VIEW_STEP)
        if views_all:
            listed = waiting_gates(INBOX_ROWS)
            mine = gates_for(request.user, among=[gate.step for gate in listed])
        else:
            listed = mine = gates_for(request.user, INBOX_ROWS)
        decidable = {gate.step for gate in mine}
        total = count_waiting_gates(None if views_all else request.user)
        inputs = {
            str(pk): data
            for pk, data in Run.objects.filter(pk__in={gate.run for gate in listed}).values_list(
                "pk", "input"
            )
        }
        now = timezone.now()
        username = request.user.get_username()
        overrides = may_override_claim(request.user)
        rows = []
        for gate in listed:
            may = gate.step in decidable
            claimed = gate.claimed_by is not None
            rows.append(
                {
                    "gate": gate,
                    "run_short": _short(gate.run),
                    "run_url": self.run_url(request, gate.run),
                    "input_summary": summarise_input(inputs.get(gate.run)),
                    "time_left": time_left(gate.due_at, now),
                    "overdue": gate.due_at is not None and gate.due_at <= now,
                    "may_decide": may,
                    "may_claim": may and not claimed,
                    "may_release": may and claimed and (gate.claimed_by == username or overrides),
                    "mine": gate.claimed_by == username,
                }
            )
        context = self.context(
            request,
            "Approvals",
            rows=rows,
            total=total,
            more_than_listed=total.more or total.number > len(rows),
            views_all=views_all,
            visible=views_all or bool(mine),
        )
        return TemplateResponse(request, "workflows/admin/approvals_inbox.html", context)

    def decision(self, request: HttpRequest, step_id: int) -> HttpResponse:
        """One gate: its prompt, context and options; POST approves or rejects it."""
        gate = self.visible_gate(request, step_id)
        if gate is None:
            return HttpResponseRedirect(reverse(f"{self.admin_site.name}:workflows_approvals"))
        if request.method == "POST":
            form = DecisionForm(gate, request.POST)
            if decide(request, gate, form):
                return HttpResponseRedirect(reverse(f"{self.admin_site.name}:workflows_approvals"))
            return HttpResponseRedirect(request.path)
        claim_url = reverse(f"{self.admin_site.name}:workflows_approval_claim", args=[gate.pk])
        offered, withheld = gate_offers(
            request.user, gate, request.path, claim_url, claimed=gate.claimed_by_id is not None
        )
        context = self.context(
            request,
            f"Decide “{gate.name}”",
            form=DecisionForm(gate),
            may_decide=any(offer.verb == "approve" for offer in offered),
            allowed_actions=offered,
            refused_actions=withheld,
            action=request.path,
            **self.gate_facts(request, gate),
        )
        return TemplateResponse(request, "workflows/admin/approval_decide.html", context)

    def visible_gate(self, request: HttpRequest, step_id: int) -> Step | None:
        """The waiting gate ``step_id`` if the user may see it; else a message and ``None``.

        A gate the user may neither decide nor view is reported as not found, so the
        page does not tell outsiders which gates exist.
        """
        try:
            gate = get_step(step_id)
        except StepNotFound:
            gate = None
        if gate is not None and gate.kind == Gate.kind:
            visible = request.user.has_perm(VIEW_STEP) or self.may_decide(request, gate)
            if visible and gate.status == StepStatus.WAITING:
                return gate
            if visible:
                messages.warning(request, gone(gate))
                return None
        messages.error(request, "No gate waiting for your decision has this id.")
        return None

    @staticmethod
    def _claim_verb(
        request: HttpRequest, step_id: int, verb: Callable[..., Step], done: str
    ) -> None:
        try:
            gate = verb(step_id, request.user, address=_address(request))
        except REFUSALS as error:
            messages.error(request, _refusal(error, Step.objects.filter(pk=step_id).first()))
            return
        messages.success(request, f"{done} gate “{gate.name}” of run {_short(gate.run_id)}.")

    @method_decorator(require_POST)
    def claim(self, request: HttpRequest, step_id: int) -> HttpResponse:
        """Claim a gate for the signed-in user (``services.claim_gate``)."""
        self._claim_verb(request, step_id, services.claim_gate, "You claimed")
        return self.back(request, step_id)

    @method_decorator(require_POST)
    def release(self, request: HttpRequest, step_id: int) -> HttpResponse:
        """Release a claim (``services.unclaim_gate``)."""
        self._claim_verb(request, step_id, services.unclaim_gate, "You released")
        return self.back(request, step_id)

    @method_decorator(require_POST)
    def take_over(self, request: HttpRequest, step_id: int) -> HttpResponse:
        """Release someone else's claim and claim the gate, for holders of
        ``workflows.override_gate_claim`` (the services check it).

        Two service calls, not one transition: a third person may claim the gate between
        the release and the claim, and then this claim is refused as claimed by them.
        """
        address = _address(request)
        try:
            held = Step.objects.select_related("claimed_by").filter(pk=step_id).first()
            previous = held.claimed_by.get_username() if held and held.claimed_by else None
            services.unclaim_gate(step_id, request.user, address=address)
            gate = services.claim_gate(step_id, request.user, address=address)
        except REFUSALS as error:
            messages.error(request, _refusal(error, Step.objects.filter(pk=step_id).first()))
        else:
            taken = f" from {previous}" if previous else ""
            messages.success(
                request, f"You took over gate “{gate.name}” of run {_short(gate.run_id)}{taken}."
            )
        return self.back(request, step_id)

    def back(self, request: HttpRequest, step_id: int) -> HttpResponse:
        """Back to the page the button was on: the inbox or the gate's own page."""
        if request.POST.get("next") == "gate":
            return HttpResponseRedirect(
                reverse(f"{self.admin_site.name}:workflows_approval", args=[step_id])
            )
        return HttpResponseRedirect(reverse(f"{self.admin_site.name}:workflows_approvals"))

    # -- signed links -----------------------------------------------------------------

    def link(self, request: HttpRequest, token: str) -> HttpResponse:
        """A signed approval link: GET confirms and writes nothing, POST decides once."""
        try:
            target = read_token(token)
        except LinkInvalid:
            return self.refused(request, 403, "invalid")
        except LinkExpired:
            return self.refused(request, 410, "expired")
        if str(request.user.pk) != target.user:
            return self.refused(request, 403, "other_user")
        gate = Step.objects.select_related("run", "claimed_by").filter(pk=target.step).first()
        if gate is None or gate.kind != Gate.kind:
            return self.refused(request, 410, "gone")
        if gate.status != StepStatus.WAITING or gate.version != target.version:
            return self.refused(request, 409, "used", gate=gate)
        if not self.may_decide(request, gate):
            return self.refused(request, 403, "not_allowed", gate=gate)
        if request.method == "POST":
            return self.decide_by_link(request, gate, target)
        return self.confirm(request, gate, DecisionForm(gate))

    def confirm(
        self, request: HttpRequest, gate: Step, form: DecisionForm, status: int = 200
    ) -> HttpResponse:
        context = self.context(
            request,
            f"Decide “{gate.name}”",
            form=form,
            may_decide=True,
            action=request.path,
            via_link=True,
            **self.gate_facts(request, gate),
        )
        return TemplateResponse(
            request, "workflows/admin/approval_decide.html", context, status=status
        )

    def decide_by_link(self, request: HttpRequest, gate: Step, target: LinkTarget) -> HttpResponse:
        form = DecisionForm(gate, request.POST)
        if decide(request, gate, form):
            return HttpResponseRedirect(reverse(f"{self.admin_site.name}:workflows_approvals"))
        gate.refresh_from_db()
        if gate.status != StepStatus.WAITING or gate.version != target.version:
            return self.refused(request, 409, "used", gate=gate)
        # Still waiting at the mailed version: bad selections, a claim by someone else or
        # a permission gone; the message says which, and the person may try again.
        return self.confirm(request, gate, DecisionForm(gate), status=400)

    def refused(
        self, request: HttpRequest, status: int, reason: str, gate: Step | None = None
    ) -> HttpResponse:
        """A readable page for a link that cannot be used, with the status that says why."""
        title, explanation = LINK_REFUSALS[reason]
        context = self.context(
            request, title, explanation=explanation, gate=gate, status_code=status
        )
        return render(request, "workflows/admin/approval_link_refused.html", context, status=status)
