"""The budgets page of the admin: usage budget counters with their breaches, the budgets
set at run time, creating or changing one (:mod:`workflows.admin.budget_form`), and
raising or resetting one.

Counters are read-only rows; raise and reset are confirmation pages (what will change,
and how much held work it lets start) whose POST calls
:mod:`workflows.services.budgets` with ``user=request.user``. Who did it is recorded as
an admin ``LogEntry`` on the counter (its history page) and in the
``workflows.budgets`` log. Viewing needs ``workflows.view_run``, acting
``workflows.operate_run``, as for runs.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import Q, QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString

from workflows.admin.actions import act_url, confirmed
from workflows.admin.budget_form import budget_form
from workflows.admin.changelist import SafeChangelistMixin
from workflows.admin.readonly import ReadOnlyMixin
from workflows.admin.runs import badge
from workflows.engine.limits.budgets import LARGEST, BudgetChange
from workflows.models import BudgetCounter
from workflows.permissions import VIEW_RUN
from workflows.services import budgets as budget_services
from workflows.services.access import CHANGE_BUDGETS
from workflows.services.budgets import BudgetView
from workflows.text.durations import duration, relative

if TYPE_CHECKING:
    from workflows.permissions import AnyUser


def number(value: Any) -> str:
    """``12.500000`` as ``12.5``, ``2000000`` as ``2,000,000``."""
    return format(value.normalize(), ",f")


class RaiseForm(forms.Form):
    limit = forms.DecimalField(
        min_value=0,
        max_value=LARGEST - 1,
        max_digits=24,
        decimal_places=6,
        help_text="The new limit. Steps and items this budget holds start again.",
    )


class ResetForm(forms.Form):
    pass


ACTIONS = {
    "raise": ("Raise budget", RaiseForm),
    "reset": ("Reset budget", ResetForm),
}


@admin.register(BudgetCounter)
class BudgetCounterAdmin(SafeChangelistMixin, ReadOnlyMixin, admin.ModelAdmin):
    """Usage budgets: used of limit in the current period, what they hold, actions."""

    list_display = (
        "workflow",
        "dimension",
        "scope",
        "usage",
        "period_ends",
        "when_exhausted",
        "held",
        "operations",
    )
    list_display_links = None
    search_fields = ("workflow_name", "scope_key")
    search_help_text = "A workflow's name or a business key (or their start)."
    list_per_page = 50
    ordering = ("workflow_name", "dimension", "scope_key")
    change_list_template = "workflows/admin/budget_change_list.html"

    def get_queryset(self, request: HttpRequest) -> QuerySet[BudgetCounter]:
        return budget_services.budget_counters()

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[BudgetCounter], search_term: str
    ) -> tuple[QuerySet[BudgetCounter], bool]:
        term = search_term.strip()
        if not term:
            return queryset, False
        return queryset.filter(
            Q(scope_key__startswith=term) | Q(workflow_name__startswith=term)
        ), False

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        site = self.admin_site.name
        context = {
            "title": "Usage budgets",
            "runtime_budgets": [
                (rule, number(rule.limit), duration(rule.period) if rule.period else "none")
                for rule in budget_services.runtime_budgets()
            ],
            "may_change": self.has_operate_permission(request),
            "form_url": reverse(f"{site}:workflows_budget_form"),
            **(extra_context or {}),
        }
        return super().changelist_view(request, context)

    @admin.display(description="workflow", ordering="workflow_name")
    def workflow(self, counter: BudgetCounter) -> str:
        return counter.workflow_name

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return request.user.has_perm(VIEW_RUN)

    def has_operate_permission(self, request: HttpRequest) -> bool:
        return CHANGE_BUDGETS.allows(request.user)

    def get_list_display(
        self, request: HttpRequest
    ) -> tuple[str | Callable[[BudgetCounter], str | bool], ...]:
        shown = tuple(super().get_list_display(request))
        if self.has_operate_permission(request):
            return shown
        return tuple(name for name in shown if name != "operations")

    def _view(self, counter: BudgetCounter) -> BudgetView:
        # Several columns show the view: it is computed once per row and kept on the row
        # (as cached_property keeps its value), not on the admin, which every request shares.
        cache = vars(counter)
        if "_budget_view" not in cache:
            cache["_budget_view"] = budget_services.budget_view(counter)
        return cache["_budget_view"]

    @admin.display(description="business key", ordering="scope_key")
    def scope(self, counter: BudgetCounter) -> str:
        return counter.scope_key or "(all runs)"

    @admin.display(description="used of limit")
    def usage(self, counter: BudgetCounter) -> SafeString:
        view = self._view(counter)
        share = 100 if view.limit == 0 else min(100, int(view.used * 100 / view.limit))
        state = "exhausted" if view.exhausted else "ok"
        return format_html(
            '<span class="wf-usage {}" title="{}% of the limit">'
            '<span class="wf-usage-bar"><span style="width: {}%"></span></span> {} of {}</span>{}',
            state,
            share,
            share,
            number(view.used),
            number(view.limit),
            self._breaches(view),
        )

    @staticmethod
    def _breaches(view: BudgetView) -> SafeString | str:
        """How often usage crossed the limit, and when last: under the usage bar."""
        if not view.breaches or view.last_breached_at is None:
            return ""
        times = "once" if view.breaches == 1 else f"{view.breaches} times"
        return format_html(
            '<br><span class="wf-origin wf-breaches" title="last at {}">reached {}, last {}</span>',
            f"{timezone.localtime(view.last_breached_at):%Y-%m-%d %H:%M:%S}",
            times,
            relative(view.last_breached_at, timezone.now(), depth=1),
        )

    @admin.display(description="period ends")
    def period_ends(self, counter: BudgetCounter) -> Any:
        view = self._view(counter)
        if view.period is None:
            return "no period"
        if view.period_ends_at is None:
            return "at the next report"
        return f"{timezone.localtime(view.period_ends_at):%Y-%m-%d %H:%M}"

    @admin.display(description="when used up")
    def when_exhausted(self, counter: BudgetCounter) -> SafeString | str:
        view = self._view(counter)
        if view.on_exhausted is None:
            return "(not declared)"
        label = f"{view.on_exhausted}s" if view.on_exhausted == "hold" else "fails"
        shown = badge("waiting" if view.on_exhausted == "hold" else "failed", label)
        if view.origin != "run time":
            return shown
        return format_html('{}<br><span class="wf-origin">set at run time</span>', shown)

    @admin.display(description="held")
    def held(self, counter: BudgetCounter) -> SafeString | int:
        view = self._view(counter)
        if not view.held:
            return 0
        return badge("paused", str(view.held))

    @admin.display(description="")
    def operations(self, counter: BudgetCounter) -> SafeString:
        site = self.admin_site.name
        return format_html(
            '<a href="{}?counter={}">Edit</a> · <a href="{}">Raise</a> · <a href="{}">Reset</a>',
            reverse(f"{site}:workflows_budget_form"),
            counter.pk,
            reverse(f"{site}:workflows_budget_act", args=[counter.pk, "raise"]),
            reverse(f"{site}:workflows_budget_act", args=[counter.pk, "reset"]),
        )

    def get_urls(self) -> list[URLPattern]:
        return [
            path(
                "define/",
                self.admin_site.admin_view(partial(budget_form, self)),
                name="workflows_budget_form",
            ),
            act_url(self, budget_action, "<int:counter_id>", "workflows_budget_act"),
            *super().get_urls(),
        ]


def budget_action(
    model_admin: BudgetCounterAdmin, request: HttpRequest, counter_id: int, verb: str
) -> HttpResponse:
    """GET: the confirmation page of raising or resetting one budget. POST: do it."""
    if not model_admin.has_operate_permission(request):
        raise PermissionDenied
    site = model_admin.admin_site.name
    list_url = reverse(f"{site}:workflows_budgetcounter_changelist")
    try:
        counter = budget_services.get_budget(counter_id)
    except BudgetCounter.DoesNotExist as exc:
        messages.error(request, str(exc))
        return HttpResponseRedirect(list_url)
    if verb not in ACTIONS:
        messages.error(request, f"There is no budget action called “{verb}”.")
        return HttpResponseRedirect(list_url)
    title, form_class = ACTIONS[verb]
    view = budget_services.budget_view(counter)
    posted = request.POST if request.method == "POST" else None
    form = form_class(posted, initial={"limit": format(counter.limit.normalize(), "f")})
    if request.method == "POST" and form.is_valid():

        def perform() -> str:
            what = _described(verb, _perform(verb, counter, form.cleaned_data, request.user))
            model_admin.log_change(request, counter, what)
            return f"{counter.workflow_name} {counter.dimension}: {what}."

        return confirmed(request, title, perform, list_url)
    context = {
        **model_admin.admin_site.each_context(request),
        "title": f"{title} “{counter.dimension}” of {counter.workflow_name}?",
        "opts": BudgetCounter._meta,
        "counter": counter,
        "view": view,
        "verb": verb,
        "action_title": title,
        "form": form,
        "list_url": list_url,
        "used": number(view.used),
        "limit": number(view.limit),
    }
    return TemplateResponse(request, "workflows/admin/budget_action.html", context)


def _perform(
    verb: str, counter: BudgetCounter, data: dict[str, Any], user: AnyUser
) -> BudgetChange:
    if verb == "raise":
        return budget_services.raise_budget(
            counter.workflow_name,
            counter.dimension,
            limit=data["limit"],
            scope_key=counter.scope_key,
            user=user,
        )
    return budget_services.reset_budget(
        counter.workflow_name, counter.dimension, scope_key=counter.scope_key, user=user
    )


def _described(verb: str, change: BudgetChange) -> str:
    if verb == "raise":
        done = f"limit set from {number(change.limit_before)} to {number(change.limit)}"
    else:
        done = f"usage reset from {number(change.used_before)} to 0"
    return f"{done}; {change.released} held steps and items released"
