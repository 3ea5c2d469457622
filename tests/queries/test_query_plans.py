"""PostgreSQL reads the runs, steps and events of every console page, API list and
explanation through an index, never by a sequential scan of the table.

Each page ``bench/pages.py`` names (those ``bench/million.py`` times at a million runs:
the runs list plain, filtered by status, workflow, attention, deadline and tag, searched
by a business key's start, sorted by each column; the dashboard; the approvals inbox;
the steps list; the API's runs lists, a run's events, the gates inbox ...) is
requested over a small history, its statements captured, and each statement that reads
``workflows_run``, ``workflows_step`` or ``workflows_event`` is explained with
``enable_seqscan = off``: the planner then takes any index that can serve, so a
``Seq Scan`` on one of these tables in the plan means none can (a missing index, or a
condition written so that no index applies), which at a million runs is a read of
the whole table. SQLite has no such switch; these tests skip there.
"""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

import workflows
from bench.admin_pages import add_fixtures, add_history
from bench.pages import api_lists, console_pages
from tests.support.database import is_sqlite  # noqa: F401 (the skipif condition's name)

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif("is_sqlite()", reason="PostgreSQL's plans (EXPLAIN, enable_seqscan)"),
]

LARGE_TABLES = ("workflows_run", "workflows_step", "workflows_event")
SEQ_SCAN = re.compile(r"Seq Scan on (" + "|".join(LARGE_TABLES) + r")\b")
# A bounded count (``BoundedCountPaginator``, the dashboard's tiles): its rows are
# read in any order and the read stops at the cap, so a scan reads at most the cap's
# rows of those the filter passes; the list's own rows are checked in their statement.
BOUNDED_COUNT = re.compile(r"^SELECT COUNT\(\*\) FROM \(.* LIMIT \d+\) subquery$", re.S)


def sequential_scans(sql: str) -> list[str]:
    """The lines of ``sql``'s plan that scan a large table sequentially, with
    ``enable_seqscan`` off (so only where no index can serve)."""
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        try:
            cursor.execute(f"EXPLAIN {sql}")
            plan = [line for (line,) in cursor.fetchall()]
        finally:
            cursor.execute("SET LOCAL enable_seqscan = on")
    return [line.strip() for line in plan if SEQ_SCAN.search(line)]


def reads_large_table(sql: str) -> bool:
    return (
        sql.lstrip().upper().startswith(("SELECT", "WITH"))
        and not BOUNDED_COUNT.match(sql)
        and any(f'"{table}"' in sql for table in LARGE_TABLES)
    )


def offenders(statements: list[str]) -> list[tuple[str, list[str]]]:
    return [
        (sql, scans)
        for sql in statements
        if reads_large_table(sql) and (scans := sequential_scans(sql))
    ]


def captured(client: Client, url: str) -> list[str]:
    client.get(url)  # warm: sessions, permissions
    with CaptureQueriesContext(connection) as queries:
        response = client.get(url)
    assert response.status_code == 200, url
    return [query["sql"] for query in queries.captured_queries]


@pytest.fixture
def history() -> dict[str, str]:
    add_history(range(300))
    ids = add_fixtures()
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    return ids


def describe(found: list[tuple[str, str, list[str]]]) -> str:
    return "\n".join(f"{page}: {scans}\n    {sql[:400]}" for page, sql, scans in found)


@pytest.mark.parametrize("surface", ["console", "api"])
def test_every_page_reads_large_tables_by_index(history: dict[str, str], surface: str) -> None:
    if surface == "console":
        client = Client()
        client.force_login(User.objects.get(username="bench"))
        pages = console_pages(history)
    else:
        client = Client(HTTP_AUTHORIZATION=f"Token {history['token']}")
        pages = api_lists(history)
    found = [
        (page, sql, scans)
        for page, url in pages.items()
        if url
        for sql, scans in offenders(captured(client, url))
    ]
    assert not found, describe(found)


def test_explain_reads_large_tables_by_index(history: dict[str, str]) -> None:
    with CaptureQueriesContext(connection) as queries:
        workflows.explain(history["run"])
    found = [
        ("explain", sql, scans)
        for sql, scans in offenders([query["sql"] for query in queries.captured_queries])
    ]
    assert not found, describe(found)


def test_a_missing_index_is_caught(history: dict[str, str]) -> None:
    """The check is not vacuous: without the index the runs list sorted by start
    reads through, its plan scans the runs table."""
    console = Client()
    console.force_login(User.objects.get(username="bench"))
    url = console_pages(history)["runs list, sorted by start"]
    assert not offenders(captured(console, url))
    with connection.cursor() as cursor:
        cursor.execute("DROP INDEX workflows_run_started")
    found = offenders(captured(console, url))
    assert found
    assert all("Seq Scan on workflows_run" in scans[0] for _, scans in found)
