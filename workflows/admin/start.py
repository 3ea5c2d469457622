"""Starting a run from the console: choose a workflow, see its steps and an example
input, start it.

A refusal is a message, never an error page. A workflow that is not registered (a
stale bookmark, a wrong case, a hand-edited address) is named in a message on the start
page, which answers 404 and offers the registered ones, as the API answers 404; the
engine's refusals (input the workflow rejects, an idempotency conflict) are messages
too. A repeat with an idempotency key seen before starts nothing: the message says so
and links the run that the key started, instead of claiming a start.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from django import forms
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.html import format_html
from django.utils.http import urlencode
from django.utils.safestring import SafeString

from workflows import services
from workflows.admin.actions import REFUSALS, refusal_text
from workflows.admin.deadline_field import DEADLINE_FORMS, DeadlineField
from workflows.admin.graph import graph_steps, step_graph_svg
from workflows.admin.tags import TagsField
from workflows.definitions import Workflow, registry
from workflows.models import Run
from workflows.status import RunTrigger
from workflows.text import short_id

if TYPE_CHECKING:
    from workflows.admin.registered import RunAdmin

__all__ = ["StartForm", "printable", "start_run"]

# How much of an unknown name a message quotes.
QUOTED_CHARS = 80


class StartForm(forms.Form):
    workflow = forms.ChoiceField(help_text="The latest registered version is started.")
    input = forms.JSONField(
        required=False,  # "{}" is empty to a form, yet a workflow may accept it
        initial=dict,
        widget=forms.Textarea(attrs={"rows": 8, "cols": 70}),
        help_text="A JSON object, checked by the workflow before anything is written.",
    )
    title = forms.CharField(
        required=False,
        max_length=200,
        help_text="Optional: what the runs list shows of it (default: its workflow).",
    )
    business_key = forms.CharField(
        required=False, max_length=255, help_text="Optional: how people name this case."
    )
    idempotency_key = forms.CharField(
        required=False,
        max_length=255,
        help_text="Optional: starting again with the same key returns the same run.",
    )
    deadline = DeadlineField(
        help_text="Optional: when the run must have ended, or it fails and compensates: "
        f"{DEADLINE_FORMS}. Default: the workflow's deadline.",
    )
    variables = forms.JSONField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 3, "cols": 70}),
        help_text="Optional: the run's first variables, a JSON object its steps read and change.",
    )
    tags = TagsField(
        help_text="Optional: tags to find the run by, one key=value a line (customer=acme); "
        "keys are a lowercase letter then up to 63 of a-z 0-9 _ . -, values at most 255 "
        "characters, at most 32 tags.",
    )

    def __init__(self, *args: Any, names: list[str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        workflow = self.fields["workflow"]
        assert isinstance(workflow, forms.ChoiceField)  # declared so above
        workflow.choices = [(name, name) for name in names]


def printable(text: str, limit: int = QUOTED_CHARS) -> str:
    """``text`` as a message may quote it: control characters escaped, cut at ``limit``.

    What a person typed or bookmarked may hold a NUL or a newline; the message shows
    them as escapes rather than passing them to the page.
    """
    shown = "".join(char if char.isprintable() else repr(char)[1:-1] for char in text)
    return shown if len(shown) <= limit else shown[: limit - 1] + "…"


def unknown_workflow(requested: str, names: list[str], start_url: str) -> SafeString:
    """Why the page shows no such workflow, linking the registered name it may have
    meant (the same name in another case)."""
    same = [name for name in names if name.casefold() == requested.casefold()]
    hint = (
        format_html(
            ' Did you mean <a href="{}?{}">“{}”</a>?',
            start_url,
            urlencode({"workflow": same[0]}),
            same[0],
        )
        if same
        else " Choose one of the registered workflows."
    )
    return format_html("No workflow called “{}” is registered.{}", printable(requested), hint)


def example_text(definition: type[Workflow] | None) -> str | None:
    """The workflow's declared ``input_example`` as indented JSON, if it declares one."""
    if definition is None or definition.input_example is None:
        return None
    return json.dumps(definition.input_example, indent=2, ensure_ascii=False)


def start_run(model_admin: RunAdmin, request: HttpRequest) -> HttpResponse:
    """A form to start a run of a registered workflow; it shows the workflow's graph and
    its example input (prefilled)."""
    if not model_admin.has_start_permission(request):
        raise PermissionDenied
    names = sorted({workflow.name for workflow in registry.all()})
    posted = request.POST if request.method == "POST" else None
    requested = (posted or request.GET).get("workflow")
    known = requested is None or requested in names
    if requested is not None and not known:
        messages.error(request, unknown_workflow(requested, names, request.path))
    definition = registry.latest(requested if known and requested else names[0]) if names else None
    example = example_text(definition)
    form = StartForm(
        posted,
        names=names,
        initial={
            "workflow": definition.name if definition else None,
            "input": json.loads(example) if example else {},
        },
    )
    if posted is not None and known and form.is_valid():
        done = _start(model_admin, request, form.cleaned_data)
        if done is not None:
            return done
    context = {
        **model_admin.admin_site.each_context(request),
        "title": "Start a run",
        "opts": Run._meta,
        "form": form,
        "definition": definition,
        "example": example,
        "description": (definition.__doc__ or "").strip() if definition else "",
        "graph": step_graph_svg(
            graph_steps(definition.snapshot(), {}), title=f"Steps of {definition.label()}"
        )
        if definition
        else "",
    }
    return TemplateResponse(
        request, "workflows/admin/run_start.html", context, status=200 if known else 404
    )


def _start(
    model_admin: RunAdmin, request: HttpRequest, data: dict[str, Any]
) -> HttpResponse | None:
    """Start the run, or find the one its idempotency key started; the next page, or
    ``None`` after a refusal (the form is shown again with the message)."""
    key = data["idempotency_key"] or None
    # Asked before starting, as the API does: start_run returns the existing run of a
    # key it has seen, and only this tells a repeat from a start.
    repeat = (
        key is not None
        and Run.objects.filter(workflow_name=data["workflow"], idempotency_key=key).exists()
    )
    try:
        run = services.start_run(
            data["workflow"],
            data["input"] if data["input"] is not None else {},
            business_key=data["business_key"] or None,
            idempotency_key=key,
            user=request.user,
            deadline=data.get("deadline"),
            variables=data.get("variables"),
            title=data["title"],
            trigger=RunTrigger.ADMIN,
            tags=data.get("tags"),
        )
    except REFUSALS as error:
        messages.error(request, f"The run was not started: {refusal_text(error)}")
        return None
    site = model_admin.admin_site.name
    viewer = model_admin.has_view_permission(request)
    run_url = reverse(f"{site}:workflows_run_change", args=[run.pk]) if viewer else None
    if repeat:
        messages.info(request, _already_started(run, key, run_url))
    else:
        messages.success(request, f"Started run {short_id(run.pk)} of {run.workflow_name}.")
    return HttpResponseRedirect(run_url or request.path)


def _already_started(run: Run, key: str | None, run_url: str | None) -> SafeString:
    short = short_id(run.pk)
    run_ref = format_html('<a href="{}">{}</a>', run_url, short) if run_url else short
    return format_html(
        "Run {} of {} was already started with idempotency key “{}”; nothing new was "
        "started (it is {}).",
        run_ref,
        run.workflow_name,
        key,
        run.status,
    )
