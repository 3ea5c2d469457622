"""``/api/schedules/``: each endpoint, each refusal (a 400 naming the field, a 404, a
409, never a 500), who may call what, and the run list's schedule filters."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from tests.api.conftest import user_with
from tests.support.workflows import Work
from workflows import create_schedule, trigger_schedule
from workflows.api.schedules import BACKFILL, CHANGE_SCHEDULE, CREATE_EVERY, CREATE_NIGHTLY, PAUSE
from workflows.models import Event, Run, Schedule

pytestmark = pytest.mark.django_db

EVERY = ["view_run", "start_run", "add_schedule", "change_schedule", "delete_schedule"]
NIGHTLY = {"key": "nightly", "workflow": Work.name, "cron": "0 2 * * *", "tz": "Europe/Berlin"}


def client_with(codenames: list[str], name: str = "someone") -> APIClient:
    client = APIClient()
    token = Token.objects.create(user=user_with(name, codenames))
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client


@pytest.fixture
def admin() -> APIClient:
    return client_with(EVERY, "scheduler")


def refused_field(response: Any) -> str:
    """The field a 400 names: the serializer's key, or the engine's ``field``."""
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    if error["code"] == "validation_error":
        return next(iter(error["details"]))
    assert error["code"] == "invalid_input", error
    return error["details"]["field"]


def test_create_answers_201_then_200_for_the_same_spec_and_409_for_another(admin):
    made = admin.post("/api/schedules/", NIGHTLY, format="json")
    assert made.status_code == 201, made.content
    body = made.json()
    assert body["key"] == "nightly"
    assert body["spec_in_words"] == "At 02:00 every day (Europe/Berlin)"
    assert len(body["next_fire_times"]) == 3
    first = datetime.fromisoformat(body["next_fire_times"][0])
    assert first.utcoffset() == timedelta(0)
    assert first.astimezone(Schedule.objects.get().spec().tzinfo).hour == 2
    assert (body["paused"], body["origin"], body["last_run"]) == (False, "operator", None)
    assert body["catchup_window"] == 3600

    again = admin.post("/api/schedules/", NIGHTLY, format="json")
    assert again.status_code == 200
    assert again.json()["created_at"] == body["created_at"]

    other = admin.post("/api/schedules/", {**NIGHTLY, "cron": "0 3 * * *"}, format="json")
    assert other.status_code == 409
    assert other.json()["error"]["code"] == "idempotency_conflict"
    assert Schedule.objects.count() == 1


def test_an_interval_is_taken_as_seconds_or_an_iso_duration_and_answered_in_seconds(admin):
    by_number = admin.post(
        "/api/schedules/",
        {"key": "a", "workflow": Work.name, "every": 300, "jitter": "PT10S"},
        format="json",
    )
    by_text = admin.post(
        "/api/schedules/", {"key": "b", "workflow": Work.name, "every": "PT5M"}, format="json"
    )
    assert (by_number.status_code, by_text.status_code) == (201, 201)
    assert by_number.json()["every"] == by_text.json()["every"] == 300
    assert by_number.json()["jitter"] == 10
    assert by_text.json()["spec_in_words"] == "every 5 minutes"
    assert by_text.json()["cron"] == ""


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"cron": "61 * * * *"}, "cron"),
        ({"cron": "0 2 * *"}, "cron"),
        ({"tz": "Mars/Olympus"}, "tz"),
        ({"cron": "", "every": 0}, "cron"),
        ({"cron": None}, "every"),
        ({"overlap": "sometimes"}, "overlap"),
        ({"input": [1, 2]}, "input"),
        ({"feedbak": "x"}, "feedbak"),
        ({"start_at": "2026-01-05T00:00:00"}, "start_at"),
        ({"end_at": "yesterday"}, "end_at"),
        ({"start_at": "0001-01-01T00:00:00Z"}, "start_at"),
        ({"start_at": "2026-01-05T00:00:00Z", "end_at": "2026-01-04T00:00:00Z"}, "end_at"),
        ({"workflow": "no_such_workflow"}, "workflow"),
        ({"key": "a/b"}, "key"),
        ({"catchup_window": -5}, "catchup_window"),
    ],
)
def test_a_bad_specification_is_a_400_naming_the_field(admin, change, field):
    body = {**NIGHTLY, **change}
    body = {name: value for name, value in body.items() if value is not None}
    assert refused_field(admin.post("/api/schedules/", body, format="json")) == field
    assert not Schedule.objects.exists()


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"key": "k", "workflow": Work.name}, "every"),
        ({"key": "k", "workflow": Work.name, "every": 0}, "every"),
        ({"key": "k", "workflow": Work.name, "every": -60}, "every"),
        ({"key": "k", "workflow": Work.name, "every": "soon"}, "every"),
        ({"key": "k", "workflow": Work.name, "every": 60, "cron": "* * * * *"}, "cron"),
    ],
)
def test_neither_or_both_or_a_non_positive_interval_is_refused(admin, body, field):
    assert refused_field(admin.post("/api/schedules/", body, format="json")) == field


def test_list_filters_by_workflow_and_paused(admin):
    create_schedule(Work, key="one", every=timedelta(minutes=5))
    create_schedule(Work, key="two", every=timedelta(minutes=5), paused=True, note="later")
    everything = admin.get("/api/schedules/").json()["results"]
    assert [s["key"] for s in everything] == ["one", "two"]
    paused = admin.get("/api/schedules/", {"paused": "true"}).json()["results"]
    assert [(s["key"], s["note"]) for s in paused] == [("two", "later")]
    assert admin.get("/api/schedules/", {"workflow": "other"}).json()["results"] == []


def test_retrieve_patch_and_delete(admin):
    create_schedule(Work, key="five", every=timedelta(minutes=5))
    assert admin.get("/api/schedules/five/").json()["every"] == 300

    changed = admin.patch("/api/schedules/five/", {"cron": "30 3 * * 1-5"}, format="json")
    assert changed.status_code == 200, changed.content
    assert (changed.json()["cron"], changed.json()["every"]) == ("30 3 * * 1-5", None)
    assert (
        refused_field(admin.patch("/api/schedules/five/", {"tz": "Nowhere"}, format="json")) == "tz"
    )
    assert (
        refused_field(admin.patch("/api/schedules/five/", {"workflow": "x"}, format="json"))
        == "workflow"
    )

    gone = admin.delete("/api/schedules/five/")
    assert gone.status_code == 200 and gone.json()["key"] == "five"
    assert not Schedule.objects.exists()
    assert Event.objects.filter(type="schedule.deleted").exists()


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("get", "/api/schedules/missing/"),
        ("patch", "/api/schedules/missing/"),
        ("delete", "/api/schedules/missing/"),
        ("post", "/api/schedules/missing/pause/"),
        ("post", "/api/schedules/missing/unpause/"),
        ("post", "/api/schedules/missing/trigger/"),
        ("post", "/api/schedules/missing/backfill/"),
    ],
)
def test_an_unknown_key_is_a_404(admin, method, path):
    response = getattr(admin, method)(path, {}, format="json")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "schedule_not_found"


def test_pause_with_a_note_and_unpause(admin):
    create_schedule(Work, key="five", every=timedelta(minutes=5))
    paused = admin.post("/api/schedules/five/pause/", {"note": "source down"}, format="json")
    assert (paused.json()["paused"], paused.json()["note"]) == (True, "source down")
    assert (
        refused_field(admin.post("/api/schedules/five/pause/", {"reason": "x"}, format="json"))
        == "reason"
    )
    resumed = admin.post("/api/schedules/five/unpause/", {}, format="json")
    assert (resumed.json()["paused"], resumed.json()["note"]) == (False, "")


def test_trigger_answers_the_run_it_started(admin):
    create_schedule(Work, key="five", every=timedelta(minutes=5), paused=True)
    response = admin.post("/api/schedules/five/trigger/", {}, format="json")
    assert response.status_code == 201, response.content
    run = Run.objects.get(pk=response.json()["id"])
    assert run.schedule is not None and run.schedule.key == "five"
    assert response.json()["schedule"] == "five"
    assert response.json()["scheduled_for"] is not None
    shown = admin.get("/api/schedules/five/").json()
    assert shown["last_run"] == str(run.pk)
    assert shown["last_run_status"] == run.status


def test_backfill_dry_run_then_for_real_then_again(admin):
    create_schedule(Work, key="hourly", every=timedelta(hours=1))
    now = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    body = {
        "start": (now - timedelta(hours=3)).isoformat(),
        "end": (now - timedelta(minutes=1)).isoformat(),
    }
    path = "/api/schedules/hourly/backfill/"
    dry = admin.post(path, {**body, "dry_run": True}, format="json").json()
    assert dry == {"slots": 3, "started": [], "existing": 0, "would_start": 3}
    assert not Run.objects.exists()
    done = admin.post(path, body, format="json").json()
    assert (done["slots"], len(done["started"]), done["existing"]) == (3, 3, 0)
    assert Run.objects.filter(schedule__key="hourly").count() == 3
    again = admin.post(path, body, format="json").json()
    assert (again["started"], again["existing"]) == ([], 3)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"start": "2026-01-01T00:00:00Z", "end": "2999-01-01T00:00:00Z"}, "end"),
        ({"start": "2026-01-01T00:00:00", "end": "2026-01-02T00:00:00Z"}, "start"),
        ({"start": "2026-01-02T00:00:00Z", "end": "2026-01-01T00:00:00Z"}, "end"),
        ({"start": "2026-01-01T00:00:00Z"}, "end"),
        ({"start": "2026-01-01T00:00:00Z", "end": "2026-01-02T00:00:00Z", "x": 1}, "x"),
    ],
)
def test_a_bad_backfill_range_is_a_400_naming_the_field(admin, body, field):
    create_schedule(Work, key="hourly", every=timedelta(hours=1))
    path = "/api/schedules/hourly/backfill/"
    assert refused_field(admin.post(path, body, format="json")) == field
    assert not Run.objects.exists()


def test_a_viewer_reads_but_cannot_create_or_change():
    create_schedule(Work, key="five", every=timedelta(minutes=5))
    for codenames in (["view_run"], ["view_schedule"]):
        viewer = client_with(codenames, f"viewer-{codenames[0]}")
        assert viewer.get("/api/schedules/").status_code == 200
        assert viewer.get("/api/schedules/five/").status_code == 200
        refused = viewer.post("/api/schedules/", NIGHTLY, format="json")
        assert refused.status_code == 403
        assert "workflows.add_schedule" in refused.json()["error"]["message"]
        assert viewer.post("/api/schedules/five/pause/", {}, format="json").status_code == 403
        assert viewer.delete("/api/schedules/five/").status_code == 403
    assert client_with([], "nobody").get("/api/schedules/").status_code == 403
    assert not Schedule.objects.filter(key="nightly").exists()
    assert not Schedule.objects.get().paused


def test_each_write_needs_its_model_permission():
    create_schedule(Work, key="five", every=timedelta(minutes=5))
    adder = client_with(["add_schedule"], "adder")
    assert adder.post("/api/schedules/", NIGHTLY, format="json").status_code == 201
    assert adder.patch("/api/schedules/five/", {"note": "x"}, format="json").status_code == 403
    changer = client_with(["change_schedule"], "changer")
    assert changer.patch("/api/schedules/five/", {"note": "x"}, format="json").status_code == 200
    assert changer.post("/api/schedules/five/pause/", {}, format="json").status_code == 200
    assert changer.delete("/api/schedules/five/").status_code == 403
    deleter = client_with(["delete_schedule"], "deleter")
    assert deleter.delete("/api/schedules/five/").status_code == 200


def test_trigger_and_backfill_need_start_run_besides_change_schedule():
    create_schedule(Work, key="five", every=timedelta(minutes=5))
    service = client_with(["view_run", "change_schedule"], "service-account")
    refused = service.post("/api/schedules/five/trigger/", {}, format="json")
    assert refused.status_code == 403
    assert "workflows.start_run" in refused.json()["error"]["message"]
    body = {"start": "2026-01-01T00:00:00Z", "end": "2026-01-01T01:00:00Z"}
    assert service.post("/api/schedules/five/backfill/", body, format="json").status_code == 403
    starter = client_with(["start_run"], "starter-only")
    assert starter.post("/api/schedules/five/trigger/", {}, format="json").status_code == 403
    assert not Run.objects.exists()
    allowed = client_with(["change_schedule", "start_run"], "both")
    assert allowed.post("/api/schedules/five/trigger/", {}, format="json").status_code == 201


def test_runs_filter_by_schedule_and_slot(admin):
    create_schedule(Work, key="hourly", every=timedelta(hours=1))
    create_schedule(Work, key="other", every=timedelta(hours=1))
    now = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    start = now - timedelta(hours=3)
    admin.post(
        "/api/schedules/hourly/backfill/",
        {"start": start.isoformat(), "end": now.isoformat()},
        format="json",
    )
    trigger_schedule("other")
    listed = admin.get("/api/runs/", {"schedule": "hourly"}).json()["results"]
    assert len(listed) == 3
    assert {run["schedule"] for run in listed} == {"hourly"}
    after = admin.get(
        "/api/runs/",
        {"schedule": "hourly", "scheduled_after": (start + timedelta(hours=1)).isoformat()},
    ).json()["results"]
    assert sorted(run["scheduled_for"] for run in after) == sorted(
        (start + timedelta(hours=h)).isoformat().replace("+00:00", "Z") for h in (1, 2)
    )
    before = admin.get(
        "/api/runs/", {"scheduled_before": (start + timedelta(hours=1)).isoformat()}
    ).json()["results"]
    assert [run["schedule"] for run in before] == ["hourly"]
    assert refused_field(admin.get("/api/runs/", {"scheduled_after": "soon"})) == (
        "scheduled_after"
    )


def test_the_schema_examples_run_against_the_demo_workflows(admin):
    made = [
        admin.post("/api/schedules/", body, format="json")
        for body in (CREATE_NIGHTLY, CREATE_EVERY)
    ]
    assert [response.status_code for response in made] == [201, 201], made[-1].content
    key = CREATE_NIGHTLY["key"]
    changed = admin.patch(f"/api/schedules/{key}/", CHANGE_SCHEDULE, format="json")
    assert changed.status_code == 200, changed.content
    paused = admin.post(f"/api/schedules/{key}/pause/", PAUSE, format="json")
    assert paused.json()["note"] == PAUSE["note"]
    counted = admin.post(f"/api/schedules/{key}/backfill/", BACKFILL, format="json")
    assert counted.status_code == 200, counted.content
    # Weekdays at 03:30 Berlin time, from Monday 5 to Thursday 8 January 2026: three.
    assert counted.json() == {"slots": 3, "started": [], "existing": 0, "would_start": 3}
