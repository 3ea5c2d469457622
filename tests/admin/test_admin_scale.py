"""Every console page and API list that ``bench/admin_pages.py`` measures costs the same
number of queries for 100 runs and for 100,000, and that number is pinned here: a page
that starts counting, aggregating or loading per row shows up as a changed count.

The history is the benchmark's own (runs in every status with steps, events, timers,
waiting gates, deadlines and flows; one real run at its approval gate), so the pages
have rows to show at both sizes.
"""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from bench.admin_pages import add_fixtures, add_history
from bench.pages import api_lists, console_pages, tags_exist
from workflows.models import Run
from workflows.queries import Attention

pytestmark = [pytest.mark.django_db, pytest.mark.slow]

SMALL = 100
LARGE = 100_000
# Per page: the queries of one request, after a first one warmed the session.
# The runs list: its rows, count and filters, the schedule filter's choices among them
# (at most ``ScheduleFilter.OFFERED`` schedules, one query whatever the runs), and the
# tag keys in use (a loose index scan, one query whatever the tags).
RUNS_LIST = 8
CONSOLE_QUERIES = {
    "runs list": RUNS_LIST,
    **{f"runs list, attention={value}": RUNS_LIST for value in Attention},
    **{f"runs list, deadline={value}": RUNS_LIST for value in ("hour", "day", "passed", "any")},
    "runs list, search BK-4": RUNS_LIST,
    "runs list, status=failed": RUNS_LIST,
    "runs list, workflow=bulk_1": RUNS_LIST,
    **{
        f"runs list, sorted by {column}": RUNS_LIST
        for column in ("workflow", "workflow, descending", "status", "start", "start, descending")
    },
    "dashboard": 15,
    "approvals inbox": 7,
    "gate decision page": 7,
    "waits page": 7,
    "consumers page": 3,
    "flows list": 5,
    "flow page": 6,
    # The bench's run waits at a gate: its rule is asked once for the decision and once
    # for the skip (workflows.admin.offers), a query each.
    "run page": 18,
    # The counters' page, and the budgets set at run time listed above it (one read).
    "budgets": 6,
    "workers": 5,
    # Counted up to the cap, once (no full count beside it); the kinds are choices.
    "steps list": 4,
    "timers list": 4,
}
API_QUERIES = {
    "api runs": 2,
    **{f"api runs, attention={value}": 2 for value in Attention},
    "api runs, status=failed": 2,
    "api runs, workflow=bulk_1": 2,
    "api runs, business_key": 2,
    "api runs, near_deadline": 2,
    "api runs, created_after": 2,
    "api run": 9,
    "api run events": 4,
    "api step": 2,
    "api gates inbox": 2,
    "api waits": 6,
    "api flows": 2,
    "api flow": 4,
    "api budgets": 2,
    "api workflows": 1,
    "api events (consumer)": 3,
}

# The tag filters (absent from the page lists until the code has tags).
# A tag filter adds its tag's bounded count (queries/tags.py: a rare tag is read as a
# join, a common one as a semi-join); the console adds the values in use of its key.
TAG_QUERIES = {
    "runs list, tag": RUNS_LIST + 2,
    "api runs, tag": 3,
    "api runs, tag and status=failed": 3,
}


def queries_of(client: Client, url: str) -> int:
    client.get(url)  # warm: sessions, permissions, content types
    with CaptureQueriesContext(connection) as queries:
        response = client.get(url)
    assert response.status_code == 200, url
    return len(queries)


def test_fixed_queries_at_100_and_100000_runs():
    add_history(range(SMALL))
    ids = add_fixtures()
    console = Client()
    console.force_login(User.objects.get(username="bench"))
    api = Client(HTTP_AUTHORIZATION=f"Token {ids['token']}")
    urls = [(console, console_pages(ids)), (api, api_lists(ids))]

    def counts() -> dict[str, int]:
        return {name: queries_of(c, url) for c, pages in urls for name, url in pages.items() if url}

    small = counts()
    add_history(range(SMALL, LARGE))
    assert Run.objects.count() == LARGE + 1  # and the real run
    large = counts()
    assert small == large
    assert large == CONSOLE_QUERIES | API_QUERIES | (TAG_QUERIES if tags_exist() else {})
    page = console.get(reverse("admin:workflows_run_changelist")).content.decode()
    assert "more than 10000 runs" in page
