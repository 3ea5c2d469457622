"""Deadlines over HTTP: ``deadline`` when starting (seconds, an ISO 8601 duration or
moment), a 400 naming the field otherwise; runs carry it, the detail says the time left,
the list filters by it; retry and rerun take a new one."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from django.utils.dateparse import parse_datetime

import workflows
from tests.support.handlers import WORK
from tests.support.runs import run_inline
from workflows import Task, WaitForSignal, Workflow
from workflows.engine.sql.clock import database_now
from workflows.models import Run
from workflows.testing import run_pending

from .test_api_basics import assert_error

pytestmark = pytest.mark.django_db


class Ticket(Workflow):
    name = "api_deadline_ticket"
    wait = WaitForSignal("done")
    close = Task(WORK)


def start(api, **body: Any):
    return api("starter").post("/api/runs/", {"workflow": Ticket.name, **body}, format="json")


def moment(response) -> Any:
    return parse_datetime(response.json()["deadline"])


@pytest.mark.parametrize(
    ("deadline", "delta"),
    [(3600, timedelta(hours=1)), (90.5, timedelta(seconds=90.5)), ("PT30M", timedelta(minutes=30))],
)
def test_a_deadline_in_seconds_or_as_a_duration_counts_from_the_start(api, deadline, delta):
    before = database_now()
    response = start(api, deadline=deadline)
    assert response.status_code == 201, response.content
    assert before + delta <= moment(response) <= database_now() + delta
    body = response.json()
    assert body["deadline_passed"] is False
    assert 0 < body["time_left"] <= delta.total_seconds()


def test_a_deadline_as_a_moment_is_kept_and_listed(api):
    when = (timezone.now() + timedelta(days=2)).replace(microsecond=0)
    response = start(api, deadline=when.isoformat())
    assert response.status_code == 201, response.content
    assert moment(response) == when
    listed = api("viewer").get("/api/runs/").json()["results"]
    assert parse_datetime(listed[0]["deadline"]) == when


@pytest.mark.parametrize(
    ("deadline", "words"),
    [
        ("soon", "a deadline is seconds, an ISO 8601 duration"),
        (True, "a deadline is seconds"),
        ({"hours": 1}, "a deadline is seconds"),
        (0, "deadline must be a positive duration"),
        (-5, "deadline must be a positive duration"),
        ("2030-01-01T00:00:00", "has no timezone"),
        (4 * 10**9, "deadline must be at most"),
    ],
)
def test_a_bad_deadline_is_a_400_naming_the_field(api, deadline, words):
    error = assert_error(start(api, deadline=deadline), 400, "validation_error")
    assert words in error["details"]["deadline"][0]
    assert not Run.objects.exists()


def test_a_bad_duration_is_said_in_words_not_as_python(api):
    error = assert_error(start(api, deadline=-90), 400, "validation_error")
    assert error["details"]["deadline"] == [
        "deadline must be a positive duration, got minus 1\xa0minute, 30\xa0seconds"
    ]
    error = assert_error(start(api, deadline=4 * 10**9), 400, "validation_error")
    [said] = error["details"]["deadline"]
    assert said.startswith("deadline must be at most 100\xa0years, got 126\xa0years, 306\xa0days")
    assert "timedelta" not in said


def test_a_moment_already_past_is_a_400_from_the_engine(api):
    error = assert_error(start(api, deadline="2001-01-01T00:00:00+00:00"), 400, "invalid_input")
    assert "is not in the future" in error["message"]
    assert error["details"]["field"] == "deadline"
    assert not Run.objects.exists()


def test_the_runs_list_filters_by_deadline(api):
    soon = workflows.start_run(Ticket, deadline=timedelta(minutes=20))
    later = workflows.start_run(Ticket, deadline=timedelta(days=3))
    workflows.start_run(Ticket)  # no deadline
    done = workflows.start_run(Ticket, deadline=timedelta(minutes=10))
    workflows.send_signal(done, "done")
    run_pending()

    def listed(query: str) -> set[str]:
        response = api("viewer").get(f"/api/runs/?{query}")
        assert response.status_code == 200, response.content
        return {run["id"] for run in response.json()["results"]}

    assert listed("near_deadline=3600") == {str(soon.pk)}  # the ended one is left out
    assert listed(f"near_deadline={5 * 86400}") == {str(soon.pk), str(later.pk)}
    cutoff = (timezone.now() + timedelta(days=1)).isoformat().replace("+00:00", "Z")
    assert listed(f"deadline_before={cutoff}") == {str(soon.pk), str(done.pk)}
    assert listed(f"deadline_after={cutoff}") == {str(later.pk)}
    for query in ("near_deadline=soon", "near_deadline=1.5", "near_deadline=-1"):
        assert_error(api("viewer").get(f"/api/runs/?{query}"), 400, "validation_error")
    assert_error(api("viewer").get("/api/runs/?deadline_before=tomorrow"), 400, "validation_error")


def test_retry_and_rerun_take_a_new_deadline_and_clear_the_old(api):
    run = run_inline(
        Ticket, deadline=timedelta(minutes=5), until=timezone.now() + timedelta(minutes=10)
    )
    assert run.error["code"] == "deadline_exceeded"

    response = api("operator").post(f"/api/runs/{run.pk}/retry/", {}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["deadline"] is None
    assert response.json()["time_left"] is None

    workflows.cancel_run(run)
    run_pending()
    response = api("operator").post(
        f"/api/runs/{run.pk}/rerun/", {"from_step": "wait", "deadline": 600}, format="json"
    )
    assert response.status_code == 200, response.content
    assert 0 < response.json()["time_left"] <= 600
    error = assert_error(
        api("operator").post(f"/api/runs/{run.pk}/retry/", {"deadline": "never"}, format="json"),
        400,
        "validation_error",
    )
    assert "deadline" in error["details"]


@pytest.mark.parametrize(
    ("query", "matches"),
    [
        ("deadline_before=5184-08-25T00%3A49%3A31.847%2B19%3A47", True),
        ("created_after=0257-06-29T12%3A44%3A31.5-15%3A30", True),
        ("deadline_after=9999-12-31T23%3A00-05%3A00", False),
        ("created_before=0001-01-01T00%3A30%2B01%3A00", False),
    ],
)
def test_a_moment_with_any_utc_offset_is_a_filter_or_a_400_never_a_500(api, query, matches):
    """PostgreSQL refuses offsets past ±15:59 that Python parses; moments go in UTC,
    and one whose UTC form leaves the calendar is a 400 naming its parameter."""
    response = api("viewer").get(f"/api/runs/?{query}")
    if matches:
        assert response.status_code == 200, response.content
    else:
        field = query.split("=")[0]
        assert field in assert_error(response, 400, "validation_error")["details"]
