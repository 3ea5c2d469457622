"""The console pages and API lists a benchmark times, and how it times them: shared by
``bench/admin_pages.py`` (100,000 runs) and ``bench/million.py`` (1,000,000 runs).

Each page is named, requested once to warm (sessions, permissions, templates), once
under a statement counter (its query count, which must not grow with the history:
``tests/admin/test_admin_scale.py`` pins it), then ``repeats`` times on the clock: the
whole request through the middleware, as the server spends it (no network, no
browser). A page the code under test lacks (an older commit, or tags before they
landed) is "absent" rather than a failure.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

CONSOLE_GOAL_MS = 150.0
API_GOAL_MS = 50.0
# The tag the tag filters ask for: one customer of the few hundred bench/million.py
# gives its runs (other benchmarks' histories have no tags: the lists are empty).
TAG = "customer:C-7"


def tags_exist() -> bool:
    """Whether the code under test has run tags (the ``RunTag`` model)."""
    from django.apps import apps

    try:
        apps.get_model("workflows", "RunTag")
    except LookupError:
        return False
    return True


class StatementCounter:
    """An ``execute_wrapper`` that counts statements, whatever ``DEBUG`` says."""

    def __init__(self) -> None:
        self.statements = 0

    def __call__(self, execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        self.statements += 1
        return execute(sql, params, many, context)


def console_pages(ids: dict[str, str]) -> dict[str, str]:
    """Every console page an operator reaches, by name; each attention and deadline filter."""
    from django.urls import NoReverseMatch, reverse

    from workflows.queries import Attention

    def url(name: str, *args: str) -> str:
        try:
            return reverse(f"admin:{name}", args=args)
        except NoReverseMatch:
            return ""

    runs = url("workflows_run_changelist")
    pages = {"runs list": runs}
    pages |= {f"runs list, attention={value}": f"{runs}?attention={value}" for value in Attention}
    pages |= {
        f"runs list, deadline={value}": f"{runs}?deadline={value}"
        for value in ("hour", "day", "passed", "any")
    }
    pages |= {
        "runs list, search BK-4": f"{runs}?q=BK-4",
        "runs list, status=failed": f"{runs}?status__exact=failed",
        "runs list, workflow=bulk_1": f"{runs}?workflow=bulk_1",
        "runs list, sorted by workflow": f"{runs}?o=3",
        "runs list, sorted by workflow, descending": f"{runs}?o=-3",
        "runs list, sorted by status": f"{runs}?o=2",
        "runs list, sorted by start": f"{runs}?o=6",
        "runs list, sorted by start, descending": f"{runs}?o=-6",
        "runs list, tag": f"{runs}?tag={TAG}" if tags_exist() else "",
        "dashboard": url("workflows_dashboard"),
        "approvals inbox": url("workflows_approvals"),
        "gate decision page": url("workflows_approval", ids["gate"]),
        "waits page": url("workflows_waits"),
        "consumers page": url("workflows_consumers"),
        "flows list": url("workflows_flow_changelist"),
        "flow page": url("workflows_flow_change", ids["flow"]),
        "run page": url("workflows_run_change", ids["run"]),
        "budgets": url("workflows_budgetcounter_changelist"),
        "workers": url("workflows_workerpresence_changelist"),
        "steps list": url("workflows_step_changelist"),
        "timers list": url("workflows_timer_changelist"),
    }
    return pages


def api_lists(ids: dict[str, str]) -> dict[str, str]:
    """Every API list (and the detail pages an API client reads alongside), by name."""
    from workflows.queries import Attention

    runs = "/api/runs/"
    pages = {"api runs": runs}
    pages |= {f"api runs, attention={value}": f"{runs}?attention={value}" for value in Attention}
    pages |= {
        "api runs, status=failed": f"{runs}?status=failed",
        "api runs, workflow=bulk_1": f"{runs}?workflow=bulk_1",
        "api runs, business_key": f"{runs}?business_key=BK-4",
        "api runs, near_deadline": f"{runs}?near_deadline=3600",
        "api runs, created_after": f"{runs}?created_after=2000-01-01T00:00:00Z",
        "api runs, tag": f"{runs}?tag={TAG}" if tags_exist() else "",
        "api runs, tag and status=failed": f"{runs}?tag={TAG}&status=failed"
        if tags_exist()
        else "",
        "api run": f"{runs}{ids['run']}/",
        "api run events": f"{runs}{ids['run']}/events/",
        "api step": f"/api/steps/{ids['gate']}/",
        "api gates inbox": "/api/gates/",
        "api waits": "/api/waits/",
        "api flows": "/api/flows/",
        "api flow": f"/api/flows/{ids['flow']}/",
        "api budgets": "/api/budgets/",
        "api workflows": "/api/workflows/",
        "api events (consumer)": "/api/events/?consumer=bench",
    }
    return pages


def timed(client: Any, url: str, repeats: int) -> tuple[list[float], int] | None:
    """``repeats`` request times of ``url`` and its query count; None when it is absent."""
    if not url or client.get(url).status_code == 404:  # warm: sessions, permissions, templates
        return None

    def request() -> None:
        response = client.get(url)
        if response.status_code != 200:
            raise SystemExit(f"{url}: HTTP {response.status_code}")

    return timed_call(request, repeats)


def timed_call(action: Callable[[], Any], repeats: int) -> tuple[list[float], int]:
    """``action``'s statement count (once), then ``repeats`` times of it, in seconds."""
    from django.db import connection

    counter = StatementCounter()
    with connection.execute_wrapper(counter):
        action()
    seconds = []
    for _ in range(repeats):
        started = time.perf_counter()
        action()
        seconds.append(time.perf_counter() - started)
    return seconds, counter.statements


def clients(ids: dict[str, str]) -> tuple[Any, Any]:
    """A console client signed in as the benchmark's superuser, and an API client with
    its token."""
    from django.contrib.auth.models import User
    from django.test import Client

    console = Client(HTTP_HOST="localhost")
    console.force_login(User.objects.get(username="bench"))
    api = Client(HTTP_HOST="localhost", HTTP_AUTHORIZATION=f"Token {ids['token']}")
    return console, api


def every_page(ids: dict[str, str]) -> list[tuple[str, str, bool, float]]:
    """(name, url, whether it is an API list, goal in ms) of every page, console first."""
    console = [(name, url, False, CONSOLE_GOAL_MS) for name, url in console_pages(ids).items()]
    api = [(name, url, True, API_GOAL_MS) for name, url in api_lists(ids).items()]
    return console + api


def render_times(repeats: int, ids: dict[str, str]) -> list[tuple[str, str, str, str, str]]:
    """Request each page ``repeats`` times; return the table's rows."""
    console, api = clients(ids)
    rows = []
    for name, url, is_api, goal in every_page(ids):
        figures = timed(api if is_api else console, url, repeats)
        if figures is None:
            rows.append((name, "absent", "", "", ""))
            continue
        seconds, queries = figures
        median = statistics.median(seconds) * 1000
        verdict = "met" if median <= goal else "NOT met"
        rows.append(
            (
                name,
                f"{median:.1f}",
                f"{max(seconds) * 1000:.1f}",
                str(queries),
                f"≤ {goal:g} {verdict}",
            )
        )
    return rows


def print_pages(rows: list[tuple[str, str, str, str, str]]) -> None:
    headers = ("page", "median ms", "slowest ms", "queries", "goal")
    widths = [max(len(row[i]) for row in [headers, *rows]) for i in range(len(headers))]
    for row in [headers, tuple("-" * width for width in widths), *rows]:
        values = zip(row[1:], widths[1:], strict=True)
        cells = [row[0].ljust(widths[0]), *(cell.rjust(width) for cell, width in values)]
        print("  " + "  ".join(cells))
    print()
