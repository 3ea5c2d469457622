"""Every admin URL of the workflows app answers garbage with a message, a redirect or a
4xx, never a server error: a refusal is a message, never an error page.

The URLs come from the admin's own URL patterns (every ``ModelAdmin.get_urls`` of a
model of the app, custom views included), so a view added later is swept without
touching this test. Each pattern's arguments are filled with real ids (so the view goes
past its lookup) and with stale or malformed ones; each URL is then requested with one
malformed query parameter at a time, by GET and by POST, by a superuser and by a staff
user who holds no permission.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import product
from typing import Any
from urllib.parse import quote

import pytest
from django.contrib import admin
from django.contrib.auth.models import User
from django.urls import URLPattern, URLResolver
from django.urls.resolvers import RoutePattern

import workflows
from tests.admin.admin_console import checkout, failed_checkout
from tests.support.loop_review import ExportPoll, review_in_round
from tests.support.users import staff
from workflows.admin.actions import RUN_ACTIONS
from workflows.models import Run, Step
from workflows.testing import run_pending

pytestmark = pytest.mark.django_db

APP = "workflows"
# Stale bookmarks and hand-edited addresses: unknown, malformed, NUL, too large for
# the database's integers, wrong case.
GARBAGE_ARGUMENTS = (
    "nonexistent",
    "00000000-0000-0000-0000-000000000000",
    "\x00",
    "99999999999999999999999",
    "ORDER_FULFILMENT",
)
# Arguments that pick a row: the sweep with malformed parameters takes one real value of
# each (the others pick code, such as a verb, and are all swept).
IDS = frozenset({"object_id", "run_id", "step_id", "counter_id"})
# Django's own pages that read no query string: swept with garbage arguments only, which
# keeps the sweep to a minute.
IGNORE_QUERY_STRINGS = ("_add", "_delete", "_history")
# One malformed parameter per request, so that an early refusal of one cannot hide
# the crash another would cause.
GARBAGE_PARAMETERS: tuple[dict[str, str], ...] = (
    {},
    {"workflow": "no_such_workflow"},
    {"workflow": "ORDER_FULFILMENT"},
    {"workflow": "\x00"},
    {"step": "abc"},
    {"step": "99999999999999999999999"},
    {"q": "\x00"},
    {"o": "x.99"},
    {"o": "-3.-"},
    {"p": "-3"},
    {"status__exact": "no_such_status"},
    {"status": "\x00"},
    {"attention": "bogus"},
    {"workflow_name": "\x00"},
    {"events": "\x00"},
    {"events_page": "zz"},
    {"created_at__gte": "not a date"},
    {"created_at__year": "99999"},
    {"parent_run__id__exact": "not-a-uuid"},
    {"step__id__exact": "abc"},
    {"next": "\x00"},
    {"decision": "approve", "version": "abc"},
    {"input": "{not json", "workflow": "order_fulfilment"},
    {"_changelist_filters": "\x00"},
    {"stream": "\x00"},
    {"after": "zz"},
    {"after": "99999999999999999999999"},
)


def admin_urls(resolvers: list[Any], prefix: str = "") -> Iterator[tuple[str, URLPattern]]:
    """Every pattern under ``resolvers``: its route as a template and the pattern."""
    for entry in resolvers:
        route = prefix + str(entry.pattern)
        if isinstance(entry, URLResolver):
            yield from admin_urls(entry.url_patterns, route)
        else:
            yield route, entry


def app_patterns() -> list[tuple[str, str, URLPattern]]:
    """(model name, route, pattern) of every URL of every ``ModelAdmin`` of the app."""
    found = []
    for model, model_admin in admin.site._registry.items():
        if model._meta.app_label != APP:
            continue
        name = model._meta.model_name
        found.extend(
            (name, f"/admin/{APP}/{name}/{route}", pattern)
            for route, pattern in admin_urls(model_admin.urls)
        )
    return found


def fill(route: str, values: dict[str, str]) -> str:
    """``route`` with each ``<converter:name>`` replaced by its value, URL-quoted."""
    for name, value in values.items():
        start = route.index("<")
        end = route.index(">", start)
        assert route[start + 1 : end].split(":")[-1] == name
        route = route[:start] + quote(value, safe="") + route[end + 1 :]
    return route


def addresses(real: dict[str, list[str]]) -> tuple[list[str], list[str], list[str]]:
    """Every admin address of the app, three ways: with every combination of real
    arguments; with one real row id (and every verb), for the views that read a query
    string; and
    with each argument in turn garbage. ``real`` maps ``<model>.<argument>`` or an
    argument's name to real values."""
    combined, reading, stale = {"/admin/", f"/admin/{APP}/"}, {f"/admin/{APP}/"}, set()
    for model_name, route, pattern in app_patterns():
        assert isinstance(pattern.pattern, RoutePattern), f"teach the sweep {pattern.pattern}"
        names = list(pattern.pattern.converters)
        choices = [real.get(f"{model_name}.{name}") or real.get(name) or ["1"] for name in names]
        for values in product(*choices):
            combined.add(fill(route, dict(zip(names, values, strict=True))))
        first = {name: options[0] for name, options in zip(names, choices, strict=True)}
        if pattern.name and not pattern.name.endswith(IGNORE_QUERY_STRINGS):
            # One row per id, but every verb: each verb reads its own parameters.
            selectors = [
                options if name not in IDS else options[:1]
                for name, options in zip(names, choices, strict=True)
            ]
            for values in product(*selectors):
                reading.add(fill(route, dict(zip(names, values, strict=True))))
        for name in names:
            stale.update(fill(route, {**first, name: value}) for value in GARBAGE_ARGUMENTS)
    return sorted(combined), sorted(reading), sorted(stale)


@pytest.fixture
def engine_rows() -> dict[str, list[str]]:
    """A run of each kind the pages treat apart, and real values of every URL argument:
    ``<model>.object_id`` the first rows of each model, ``run_id`` the runs."""
    waiting = checkout()
    failed = failed_checkout()
    dispatch = workflows.start_run(
        "warehouse_dispatch",
        {"order_id": "G-1", "card": "valid", "parcels": [{"id": "P1", "weight_kg": 1}]},
    )
    run_pending()
    gate = Step.objects.get(run=dispatch, name="approval")
    # A review in its second round (earlier iterations, a Loops table, a gate's earlier
    # decisions) and a poll between two polls (on the Waits page).
    looped = review_in_round(2, User.objects.create_user("reviewer"))
    workflows.start_run(ExportPoll)
    run_pending()
    looped_gate = Step.objects.get(run=looped, name="review")
    real = {
        "run_id": [str(run.pk) for run in (waiting, failed, dispatch, looped)],
        "step_id": [str(gate.pk), str(looped_gate.pk)],
        "verb": sorted(RUN_ACTIONS),
        "token": ["not-a-token"],
    }
    for model in admin.site._registry:
        if model._meta.app_label == APP:
            pks = model.objects.order_by("pk").values_list("pk", flat=True)[:2]
            real[f"{model._meta.model_name}.object_id"] = [str(pk) for pk in pks]
    real["run.object_id"] = real["run_id"]
    return real


def request_each(client: Any, requests: list[tuple[str, str, dict[str, Any]]]) -> list[str]:
    """Make each (method, url, data) request; the ones that crashed or answered 5xx."""
    failures = []
    for method, url, data in requests:
        try:
            status = getattr(client, method)(url, data).status_code
        except Exception as error:  # the test reports every crash, not only the first
            failures.append(f"{method.upper()} {url} {data}: {error!r}")
            continue
        if status >= 500:
            failures.append(f"{method.upper()} {url} {data}: {status}")
    return failures


def test_the_sweep_covers_every_custom_view():
    """The list is built from the patterns: the custom views are in it."""
    names = {pattern.name for _model, _route, pattern in app_patterns()}
    assert {
        "workflows_dashboard",
        "workflows_run_start",
        "workflows_waits",
        "workflows_consumers",
        "workflows_step_log",
        "workflows_run_act",
        "workflows_approvals",
        "workflows_approval",
        "workflows_approval_claim",
        "workflows_approval_link",
        "workflows_budget_act",
        "workflows_run_changelist",
        "workflows_run_change",
    } <= names


@pytest.mark.slow
@pytest.mark.parametrize("role", ["superuser", "staff without permissions"])
def test_no_admin_url_answers_garbage_with_a_server_error(client, engine_rows, role):
    user = User.objects.create_superuser("root") if role == "superuser" else staff("approver")
    client.force_login(user)
    combined, reading, stale = addresses(engine_rows)
    requests = [
        *((method, url, {}) for url in (*combined, *stale) for method in ("get", "post")),
        *(
            (method, url, parameters)
            for url in reading
            for parameters in GARBAGE_PARAMETERS
            for method in ("get", "post")
        ),
    ]
    failures = request_each(client, requests)
    assert not failures, "\n".join(failures)


def test_bulk_confirmation_pages_answer_garbage_selections_with_a_message(client, engine_rows):
    client.force_login(User.objects.create_superuser("root"))
    runs = Run.objects.count()
    requests = [
        ("post", f"/admin/{APP}/run/", {"action": action, "_selected_action": selected, **extra})
        for action in ("bulk_cancel", "bulk_rerun", "bulk_retry", "no_such_action")
        for selected in (["not-a-uuid"], ["\x00"], [], engine_rows["run_id"])
        for extra in ({}, {"from_step": "\x00"}, {"confirm": "yes"}, {"index": "x"})
    ]
    failures = request_each(client, requests)
    assert not failures, "\n".join(failures)
    assert Run.objects.count() == runs
