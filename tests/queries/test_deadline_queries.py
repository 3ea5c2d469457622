"""Runs whose deadline passed: ``deadline <= now`` alone selects what the plain query
(``deadline IS NOT NULL AND deadline <= now``) selects, dismissed runs left to the
caller, on a small history of runs with and without deadlines, over or not."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from workflows.models import Run
from workflows.queries.deadlines import deadline_passed
from workflows.status import RunStatus

pytestmark = pytest.mark.django_db


def test_deadline_passed_is_the_plain_query():
    now = timezone.now()
    runs = []
    for number in range(60):
        deadline = None if number % 3 == 0 else now + timedelta(hours=number % 7 - 3)
        runs.append(
            Run(
                workflow_name="wf",
                workflow_version=1,
                snapshot={},
                status=RunStatus.values[number % len(RunStatus.values)],
                deadline=deadline,
                dismissed_at=now if number % 5 == 0 else None,
            )
        )
    Run.objects.bulk_create(runs)
    plain = Run.objects.filter(deadline__isnull=False, deadline__lte=now)
    passed = Run.objects.filter(deadline_passed(now))
    assert set(passed.values_list("pk", flat=True)) == set(plain.values_list("pk", flat=True))
    assert 0 < passed.count() < Run.objects.exclude(deadline=None).count()
    kept = passed.filter(dismissed_at=None)
    assert kept.count() == plain.filter(dismissed_at=None).count() > 0
