"""The runs list, the dashboard and the approvals inbox cost the same number of queries
for 100 runs and for 100,000 (bulk-created, with a step each)."""

from __future__ import annotations

import uuid
from collections.abc import Callable

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from workflows.models import Run, Step
from workflows.status import RunStatus, StepStatus

pytestmark = [pytest.mark.django_db, pytest.mark.slow]

LARGE = 100_000
BATCH = 5_000
STATUSES = [
    RunStatus.COMPLETED,
    RunStatus.WAITING,
    RunStatus.FAILED,
    RunStatus.COMPENSATED,
    RunStatus.RUNNING,
]
PAGES = {
    "runs list": "admin:workflows_run_changelist",
    "dashboard": "admin:workflows_dashboard",
    "inbox": "admin:workflows_approvals",
}


def add_runs(count: int, offset: int = 0) -> None:
    """``count`` runs of a two-step workflow in a spread of statuses, each with a step."""
    snapshot = {"name": "bulk", "version": 1, "steps": [{"name": "work", "kind": "task"}]}
    for start in range(0, count, BATCH):
        runs = [
            Run(
                id=uuid.uuid4(),
                workflow_name=f"bulk_{(offset + n) % 3}",
                workflow_version=1,
                snapshot=snapshot,
                status=STATUSES[(offset + n) % len(STATUSES)],
                business_key=f"BK-{offset + n}",
            )
            for n in range(start, min(start + BATCH, count))
        ]
        Run.objects.bulk_create(runs)
        Step.objects.bulk_create(
            Step(run=run, name="work", kind="task", status=StepStatus.COMPLETED) for run in runs
        )


def queries_of(client, url: str) -> int:
    client.get(url)  # warm: sessions, permissions, content types
    with CaptureQueriesContext(connection) as queries:
        response = client.get(url)
    assert response.status_code == 200
    return len(queries)


def test_fixed_queries_at_100_and_100000_runs(client):
    client.force_login(User.objects.create_superuser("root"))
    urls: dict[str, Callable[[], str]] = {
        "runs list": lambda: reverse(PAGES["runs list"]),
        "filtered list": lambda: reverse(PAGES["runs list"]) + "?attention=failed",
        "searched list": lambda: reverse(PAGES["runs list"]) + "?q=BK-4",
        "dashboard": lambda: reverse(PAGES["dashboard"]),
        "inbox": lambda: reverse(PAGES["inbox"]),
    }
    add_runs(100)
    small = {name: queries_of(client, url()) for name, url in urls.items()}
    add_runs(LARGE - 100, offset=100)
    assert Run.objects.count() == LARGE
    large = {name: queries_of(client, url()) for name, url in urls.items()}
    assert small == large
    page = client.get(reverse(PAGES["runs list"])).content.decode()
    assert "more than 10000 runs" in page
