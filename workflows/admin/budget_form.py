"""The budgets page's form: create a budget without a deploy, or change one.

One page for both (``create_budget`` creates or changes): opened empty from the list's
"Create a budget", or filled in from a row's "Edit" with that budget as it counts now
(declared or set at run time). Its POST calls :func:`workflows.services.budgets.
create_budget` with ``user=request.user``; a refusal comes back on the field it names,
and nothing is written. The change is recorded as an admin ``LogEntry`` on the budget
(and in the ``workflows.budgets`` log). Needs ``workflows.operate_run``.
"""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from django import forms
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse

from workflows.definitions import registry
from workflows.engine.limits.budgets import LARGEST
from workflows.errors import InvalidInput, StaleState
from workflows.models import BudgetCounter
from workflows.services import budgets as budget_services
from workflows.validation import check_text

if TYPE_CHECKING:
    from workflows.admin.budgets import BudgetCounterAdmin

PER = [("workflow", "the whole workflow"), ("business_key", "each business key apart")]
ON_EXHAUSTED = [
    ("hold", "hold its steps until the budget is raised, reset or its period ends"),
    ("fail", "fail its steps with budget_exhausted"),
]


class BudgetForm(forms.Form):
    workflow = forms.ChoiceField(help_text="Budgets count by workflow name, every version.")
    dimension = forms.CharField(
        max_length=60, help_text="What is counted, as handlers report it: tokens, usd, calls."
    )
    limit = forms.DecimalField(
        min_value=0,
        max_value=LARGEST - 1,
        max_digits=24,
        decimal_places=6,
        help_text="Usage at which the budget is used up.",
    )
    per = forms.ChoiceField(choices=PER, initial="workflow", label="Counted for")
    period = forms.DurationField(
        required=False,
        help_text="Count from zero again every period (1:00:00 an hour, 1 00:00:00 a day); "
        "empty: never.",
    )
    on_exhausted = forms.ChoiceField(
        choices=ON_EXHAUSTED, initial="hold", label="When used up", widget=forms.RadioSelect
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        names = sorted({workflow.name for workflow in registry.all()})
        self.fields["workflow"].choices = [(name, name) for name in names]  # type: ignore[attr-defined]


def _initial(request: HttpRequest) -> dict[str, Any]:
    """The form filled in with the budget an "Edit" link names, as it counts now: a
    counter's (``?counter=<id>``) or one set at run time (``?workflow=&dimension=&per=``);
    empty otherwise."""
    query = request.GET
    if "counter" in query:
        try:
            view = budget_services.budget_view(budget_services.get_budget(query["counter"]))
        except BudgetCounter.DoesNotExist:
            return {}
        found = (view.workflow_name, view.dimension, view.per, view.limit)
        return _filled(*found, view.period, view.on_exhausted or "hold")
    named = {key: query.get(key, "") for key in ("workflow", "dimension", "per")}
    try:
        for key, value in named.items():
            check_text(value, field=key)
    except InvalidInput:  # no budget can be named so: an empty form, not a 500
        return {}
    rule = (
        budget_services.runtime_budgets(workflow=named["workflow"])
        .filter(dimension=named["dimension"], per=named["per"])
        .first()
    )
    if rule is None:
        return {}
    found = (rule.workflow_name, rule.dimension, rule.per, rule.limit)
    return _filled(*found, rule.period, rule.on_exhausted)


def _filled(
    workflow: str,
    dimension: str,
    per: str,
    limit: Decimal,
    period: timedelta | None,
    on_exhausted: str,
) -> dict[str, Any]:
    return {
        "workflow": workflow,
        "dimension": dimension,
        "limit": format(limit.normalize(), "f"),
        "per": per,
        "period": period,
        "on_exhausted": on_exhausted,
    }


def budget_form(model_admin: BudgetCounterAdmin, request: HttpRequest) -> HttpResponse:
    """GET: the form (empty, or a row's budget). POST: create or change the budget."""
    if not model_admin.has_operate_permission(request):
        raise PermissionDenied
    list_url = reverse(f"{model_admin.admin_site.name}:workflows_budgetcounter_changelist")
    form = BudgetForm(request.POST or None, initial=_initial(request))
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            made = budget_services.create_budget(
                data["workflow"],
                data["dimension"],
                limit=data["limit"],
                per=data["per"],
                period=data["period"],
                on_exhausted=data["on_exhausted"],
                user=request.user,
            )
        except InvalidInput as refused:
            field = refused.details.get("field")
            form.add_error(field if field in form.fields else None, refused.message)
        except StaleState as lost:
            form.add_error(None, f"{lost.message}. Look again and resubmit.")
        else:
            done = "created" if made.created else "changed"
            what = (
                f"budget “{data['dimension']}” of {data['workflow']} per {data['per']} {done}: "
                f"{made.counters} counters set, {made.released} held steps and items released"
            )
            rule = budget_services.runtime_budgets(workflow=data["workflow"]).get(
                dimension=data["dimension"], per=data["per"]
            )
            log = model_admin.log_addition if made.created else model_admin.log_change
            log(request, rule, what)
            messages.success(request, what[0].upper() + what[1:] + ".")
            return HttpResponseRedirect(list_url)
    editing = bool(form.initial)
    context = {
        **model_admin.admin_site.each_context(request),
        "title": "Change a budget" if editing else "Create a budget",
        "opts": BudgetCounter._meta,
        "form": form,
        "list_url": list_url,
        "editing": editing,
    }
    return TemplateResponse(request, "workflows/admin/budget_form.html", context)
