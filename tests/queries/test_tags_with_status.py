"""A tag filter with a status filter of rare final statuses: the containment read through
the partial GIN index (PostgreSQL, when few runs match) lists exactly the runs the plain
tag forms list, on both databases; with many matching runs the plain forms are kept."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from workflows.models import Run, RunTag
from workflows.queries import tags as tag_queries
from workflows.queries.tags import ENDED_RARELY, tagged
from workflows.status import RunStatus

pytestmark = pytest.mark.django_db

CUSTOMERS = ("acme", "globex", "initech")


def history() -> None:
    """Runs of every status, tagged with a customer and a region (both rows and column)."""
    now = timezone.now()
    runs = [
        Run(
            workflow_name="wf",
            workflow_version=1,
            snapshot={},
            status=RunStatus.values[number % len(RunStatus.values)],
            tags={"customer": CUSTOMERS[number % 3], "region": "eu" if number % 2 else "us"},
        )
        for number in range(120)
    ]
    Run.objects.bulk_create(runs)
    RunTag.objects.bulk_create(
        RunTag(run=run, key=key, value=value, created_at=now)
        for run in runs
        for key, value in run.tags.items()
    )
    for run in runs:  # the tag rows carry the run's creation time, as the engine writes them
        RunTag.objects.filter(run=run).update(created_at=Run.objects.get(pk=run.pk).created_at)


def plain(statuses: list[str], tags: dict[str, str]) -> set:
    runs = Run.objects.filter(status__in=statuses)
    for key, value in tags.items():
        runs = runs.filter(id__in=RunTag.objects.filter(key=key, value=value).values("run_id"))
    return set(runs.values_list("pk", flat=True))


@pytest.mark.parametrize(
    "statuses",
    [["failed"], ["cancelled", "compensated"], ["completed"], ["failed", "running"], ["waiting"]],
)
@pytest.mark.parametrize("tags", [{"customer": "acme"}, {"customer": "globex", "region": "eu"}])
def test_the_runs_are_those_of_the_plain_forms(statuses, tags):
    history()
    found = tagged(Run.objects.filter(status__in=statuses), tags, statuses)
    assert set(found.values_list("pk", flat=True)) == plain(statuses, tags)


def test_on_postgresql_few_ended_runs_are_read_by_containment_and_many_are_not(monkeypatch):
    history()
    statuses = ["failed", "terminated"]
    tags = {"customer": "acme"}
    expected = plain(statuses, tags)
    assert expected and set(statuses) <= ENDED_RARELY
    postgresql = connection.vendor == "postgresql"
    with CaptureQueriesContext(connection) as few:
        found = tagged(Run.objects.filter(status__in=statuses), tags, statuses)
        assert set(found.values_list("pk", flat=True)) == expected
    assert ("@>" in few.captured_queries[-1]["sql"]) == postgresql
    monkeypatch.setattr(tag_queries, "FEW_ENDED_RUNS", len(expected) - 1)
    with CaptureQueriesContext(connection) as many:
        found = tagged(Run.objects.filter(status__in=statuses), tags, statuses)
        assert set(found.values_list("pk", flat=True)) == expected
    assert "@>" not in many.captured_queries[-1]["sql"]
