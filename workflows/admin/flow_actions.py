"""Operator actions on a flow: cancel it (with a policy) and seal it.

As for a run's actions (:mod:`workflows.admin.actions`), each is a confirmation page
first (what will happen to how many members, and whether the flow's state allows it
now) and a POST second, which calls the service the API and the commands call
(:mod:`workflows.services.flows`) with ``user=request.user``, so the flow's history
records who did it. Who may use each is the verb table's answer
(:data:`workflows.services.access.VERBS`: ``cancel_flow``, ``seal_flow``). Refusals (a
flow that ended meanwhile, a policy that is none) are messages or form errors, never
error pages; posting the same action twice says that the second one changed nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django import forms
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.db.models import Count
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.translation import ngettext

from workflows.admin.actions import confirmed, refusal_text
from workflows.admin.offers import Offer, because, split
from workflows.engine.flows.close import CancelPolicy
from workflows.errors import WorkflowError
from workflows.models import Flow, Run
from workflows.queries.flows import get_flow
from workflows.services import flows as flow_services
from workflows.services.access import VERBS, Access
from workflows.status import RUN_FINAL, FlowStatus, RunStatus

if TYPE_CHECKING:
    from workflows.admin.flows import FlowAdmin
    from workflows.permissions import AnyUser

__all__ = ["FLOW_ACTIONS", "FlowAction", "flow_action", "flow_offers"]


def _members(count: int) -> str:
    return ngettext("%(count)d member", "%(count)d members", count) % {"count": count}


def _statuses(flow: Flow) -> dict[str, int]:
    """How many of the flow's members are in each run status (one query)."""
    rows = Run.objects.filter(flow_id=flow.pk).values_list("status").annotate(n=Count("id"))
    return dict(rows.order_by())


class CancelFlowForm(forms.Form):
    policy = forms.ChoiceField(widget=forms.RadioSelect, initial=CancelPolicy.CANCEL_ALL.value)
    reason = forms.CharField(
        required=False,
        max_length=2000,
        widget=forms.Textarea(attrs={"rows": 2, "cols": 60}),
        help_text="Kept in the flow's history, and each cancelled member's, with your name.",
    )

    def __init__(self, *args: Any, statuses: Mapping[str, int], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        unfinished = sum(n for status, n in statuses.items() if status not in RUN_FINAL)
        blocked = statuses.get(RunStatus.BLOCKED, 0)
        policy = self.fields["policy"]
        assert isinstance(policy, forms.ChoiceField)  # declared so above
        policy.choices = [
            (
                CancelPolicy.CANCEL_ALL.value,
                f"Cancel every member not ended ({_members(unfinished)} now), compensating "
                "what they completed as “Cancel run” does",
            ),
            (
                CancelPolicy.CANCEL_PENDING.value,
                f"Cancel only the blocked members ({_members(blocked)} now); "
                "members already started run on",
            ),
            (
                CancelPolicy.FLOW_ONLY.value,
                "Only close the flow to new members and edges; leave every member alone",
            ),
        ]


class SealFlowForm(forms.Form):
    def __init__(self, *args: Any, statuses: Mapping[str, int], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)


@dataclass(frozen=True)
class FlowAction:
    """An operator verb on one flow: who may use it, its form, what the flow's state
    says of it before anyone posts (``refusal``), and the call (``perform``, returning
    what the success message says)."""

    verb: str
    title: str
    summary: str
    access: Access
    form: Callable[..., forms.Form]
    refusal: Callable[[Flow], str | None]
    perform: Callable[[Flow, dict[str, Any], AnyUser], str]


def _cancel_refusal(flow: Flow) -> str | None:
    if flow.status in (FlowStatus.COMPLETED, FlowStatus.FAILED):
        return f"the flow has ended {flow.status}; there is nothing to cancel"
    return None


def _cancel(flow: Flow, data: dict[str, Any], user: AnyUser) -> str:
    record = flow_services.cancel_flow(flow, data["policy"], reason=data["reason"], user=user)
    done = f"{_members(record.cancelled)} cancelled by policy {record.policy}"
    if flow.status == FlowStatus.CANCELLED:
        return f"was already cancelled; {done}"
    return f"is cancelled; {done}"


def _seal_refusal(flow: Flow) -> str | None:
    if flow.status == FlowStatus.OPEN:
        return None
    if flow.status == FlowStatus.SEALED:
        return "the flow is sealed already; it ends once every member has ended"
    return f"the flow is {flow.status}; only an open flow can be sealed"


def _seal(flow: Flow, data: dict[str, Any], user: AnyUser) -> str:
    status = flow_services.seal_flow(flow, user=user)
    if flow.status == FlowStatus.SEALED:
        return "was already sealed; nothing changed"
    if status == FlowStatus.SEALED:
        return "is sealed: it ends once every member has ended"
    return f"is sealed, and has ended {status}: every member had ended already"


FLOW_ACTIONS: dict[str, FlowAction] = {
    action.verb: action
    for action in (
        FlowAction(
            "cancel",
            "Cancel flow",
            "close the flow to new members and edges, and cancel its members as the "
            "policy you choose says",
            VERBS["cancel_flow"],
            CancelFlowForm,
            _cancel_refusal,
            _cancel,
        ),
        FlowAction(
            "seal",
            "Seal flow",
            "no more members or edges: the flow ends (completed, or failed naming the "
            "members that did not complete) once every member has ended",
            VERBS["seal_flow"],
            SealFlowForm,
            _seal_refusal,
            _seal,
        ),
    )
}


def flow_offers(user: AnyUser, flow: Flow, admin_name: str) -> tuple[list[Offer], list[Offer]]:
    """The flow page's actions for ``user``: each offered, or withheld for the flow's
    state and for the permission its row of the verb table names (what
    :func:`flow_action` asks before it acts)."""
    return split(
        Offer(
            verb=action.verb,
            label=action.title,
            summary=action.summary,
            url=reverse(f"{admin_name}:workflows_flow_act", args=[flow.pk, action.verb]),
            reason=because(
                action.refusal(flow),
                [] if action.access.allows(user) else [action.access.refusal],
            ),
        )
        for action in FLOW_ACTIONS.values()
    )


def flow_action(
    model_admin: FlowAdmin, request: HttpRequest, object_id: str, verb: str
) -> HttpResponse:
    """GET: the confirmation page of ``verb`` on the flow. POST: do it, then the flow page."""
    if not model_admin.has_view_permission(request):
        raise PermissionDenied
    site = model_admin.admin_site.name
    try:
        flow = get_flow(object_id)
    except WorkflowError as error:
        text = refusal_text(error)
        messages.error(request, f"{text[:1].upper()}{text[1:]} It may have been deleted.")
        return HttpResponseRedirect(reverse(f"{site}:workflows_flow_changelist"))
    flow_url = reverse(f"{site}:workflows_flow_change", args=[flow.pk])
    action = FLOW_ACTIONS.get(verb)
    if action is None:
        known = " or ".join(f"“{name}”" for name in FLOW_ACTIONS)
        messages.error(request, f"There is no flow action called “{verb}”; there is {known}.")
        return HttpResponseRedirect(flow_url)
    if not action.access.allows(request.user):
        raise PermissionDenied(action.access.refusal)
    statuses = _statuses(flow)
    form = action.form(request.POST if request.method == "POST" else None, statuses=statuses)
    if request.method == "POST" and form.is_valid():
        return confirmed(
            request,
            action.title,
            lambda: f"Flow “{flow.name}” {action.perform(flow, form.cleaned_data, request.user)}.",
            flow_url,
        )
    context = {
        **model_admin.admin_site.each_context(request),
        "title": f"{action.title} “{flow.name}”?",
        "opts": Flow._meta,
        "flow": flow,
        "flow_url": flow_url,
        "action": action,
        "form": form,
        "refusal": action.refusal(flow),
        "members": _members(sum(statuses.values())),
        "statuses": ", ".join(
            f"{count} {status.replace('_', ' ')}"
            for status, count in sorted(statuses.items(), key=lambda entry: (-entry[1], entry[0]))
        ),
    }
    return TemplateResponse(request, "workflows/admin/flow_action.html", context)
