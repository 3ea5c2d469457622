"""Runs lists newest first read in creation order where SQLite would read every match and
sort it (issue #42, at a million runs), and the rows they must keep: the same as the
straightforward query's.

- A search that more runs match than the count's cap: the page walks the creation
  index (``queries/newest_first``), on SQLite; PostgreSQL plans that from its statistics.
- The failed attention class and the runs with a deadline: each read from a partial
  index of those runs in creation order (``workflows_run_failed_created``,
  ``workflows_run_deadline_created``), whose condition the query repeats.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.db.models import Q, QuerySet
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from bench.admin_pages import add_history
from tests.support.database import is_sqlite
from workflows.admin.runs import key_or_its_start
from workflows.models import Run, RunTag
from workflows.queries import runs_needing_attention
from workflows.queries.deadlines import deadline_passed
from workflows.queries.newest_first import newest_first
from workflows.queries.tags import tagged

pytestmark = pytest.mark.django_db

RUNS = "admin:workflows_run_changelist"


def ids(rows: Any) -> list[Any]:
    return [run.pk for run in rows]


def newest(runs: QuerySet[Run]) -> QuerySet[Run]:
    return runs.order_by("-created_at", "-id")


@pytest.fixture
def history() -> None:
    # Two calls, so two creation times, each shared by a whole batch: ties broken by id.
    add_history(range(150))
    add_history(range(150, 300))
    # Deadlines on more runs than the history gives (one in 50): passed and to come.
    keys = sorted(Run.objects.values_list("pk", flat=True))
    now = timezone.now()
    Run.objects.filter(pk__in=keys[::7]).update(deadline=now - timedelta(hours=1))
    Run.objects.filter(pk__in=keys[3::11]).update(deadline=now + timedelta(hours=1))


def test_a_walked_page_has_the_rows_of_the_slice_in_its_order(history):
    runs = newest(Run.objects.filter(key_or_its_start("BK-1")))
    assert runs.count() == 111  # BK-1, BK-10 … BK-19, BK-100 … BK-199
    for bottom, top in ((0, 50), (50, 100), (100, 111), (10, 13), (111, 120)):
        assert ids(newest_first(runs, bottom, top)) == ids(runs[bottom:top])


def test_a_walked_page_of_a_joined_list_has_the_rows_of_the_slice(history):
    """A rare tag's list joins the tag rows: the walk keeps the join's conditions."""
    runs = list(Run.objects.filter(key_or_its_start("BK-2")))
    RunTag.objects.bulk_create(
        RunTag(run=run, key="customer", value="acme", created_at=run.created_at) for run in runs
    )
    listed = newest(tagged(Run.objects.filter(key_or_its_start("BK-")), {"customer": "acme"}))
    assert len(listed.query.alias_map) > 1  # the join form
    for bottom, top in ((0, 50), (50, 100), (100, 120)):
        assert ids(newest_first(listed, bottom, top)) == ids(listed[bottom:top])
    assert len(ids(listed)) == len(runs)


def test_a_search_more_runs_match_than_the_cap_is_paged_by_walking_the_creation_index(
    history, admin_client, monkeypatch
):
    monkeypatch.setattr("workflows.admin.runs.COUNT_CAP", 60)
    expected = newest(Run.objects.filter(key_or_its_start("BK-1")))
    for page, rows in (("1", expected[0:50]), ("2", expected[50:60])):
        with CaptureQueriesContext(connection) as queries:
            response = admin_client.get(reverse(RUNS), {"q": "BK-1", "p": page})
        assert ids(response.context["cl"].result_list) == ids(rows)
        walked = [q["sql"] for q in queries.captured_queries if "INDEXED BY" in q["sql"]]
        assert len(walked) == (1 if is_sqlite() else 0)
    # Under the cap, and unsearched lists, read as before.
    for query in ({"q": "BK-19"}, {}):
        with CaptureQueriesContext(connection) as queries:
            response = admin_client.get(reverse(RUNS), query)
        assert not [q for q in queries.captured_queries if "INDEXED BY" in q["sql"]]


def test_the_failed_class_and_the_deadline_filters_list_what_the_plain_conditions_do(
    history, admin_client
):
    now = timezone.now()
    cases = {
        "attention=failed": (
            runs_needing_attention("failed", now=now),
            Run.objects.filter(status="failed", dismissed_at__isnull=True),
        ),
        "deadline=passed": (
            Run.objects.filter(deadline_passed(now)),
            Run.objects.filter(deadline__lte=now),
        ),
    }
    for name, (chosen, plain) in cases.items():
        assert ids(newest(chosen)) == ids(newest(plain)), name
        assert len(ids(plain)) > 5, name
    listed = admin_client.get(reverse(RUNS), {"deadline": "any"}).context["cl"].result_list
    assert ids(listed) == ids(newest(Run.objects.filter(deadline__isnull=False))[:50])


def plan_of(runs: QuerySet[Run]) -> str:
    sql, params = runs.query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN QUERY PLAN {sql}", params)
        return " | ".join(str(row[-1]) for row in cursor.fetchall())


@pytest.mark.skipif("not is_sqlite()", reason="SQLite's plans (EXPLAIN QUERY PLAN)")
@pytest.mark.parametrize(
    ("name", "index"),
    [
        ("failed", "workflows_run_failed_created"),
        ("passed", "workflows_run_deadline_created"),
        ("any", "workflows_run_deadline_created"),
        ("walk", "workflows_run_created"),
    ],
)
def test_sqlite_reads_each_page_in_creation_order_from_its_index(history, name, index):
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    runs = {
        "failed": runs_needing_attention("failed"),
        "passed": Run.objects.filter(deadline_passed()),
        "any": Run.objects.filter(deadline__isnull=False),
    }.get(name)
    page = (
        newest(runs)[:50]
        if runs is not None
        else newest_first(newest(Run.objects.filter(key_or_its_start("BK-1"))), 0, 50)
    )
    plan = plan_of(page)
    assert f"INDEX {index}" in plan, plan
    if runs is None:
        # The walk gives the page's ids; the rows are read by them and only they sorted.
        assert "USING INDEX sqlite_autoindex_workflows_run_1 (id=?)" in plan, plan
        assert "LIST SUBQUERY" in plan, plan
    else:
        # Read in the index's order: no sort of every match.
        assert "USE TEMP B-TREE FOR ORDER BY" not in plan, plan


@pytest.mark.skipif("not is_sqlite()", reason="SQLite's plans (EXPLAIN QUERY PLAN)")
def test_sqlite_counts_the_runs_with_a_deadline_from_their_index_alone(history):
    """The runs list's bounded count of "passed" and "has a deadline" (not dismissed):
    the index holds the deadline and the dismissal, so no run is read to count."""
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    for condition in (deadline_passed(), Q(deadline__isnull=False)):
        runs = Run.objects.filter(condition, dismissed_at__isnull=True)
        sql, params = runs.values("pk")[:10_001].query.sql_with_params()
        with connection.cursor() as cursor:
            cursor.execute(f"EXPLAIN QUERY PLAN SELECT COUNT(*) FROM ({sql})", params)
            plan = " | ".join(str(row[-1]) for row in cursor.fetchall())
        assert "COVERING INDEX workflows_run_deadline_created" in plan, plan
