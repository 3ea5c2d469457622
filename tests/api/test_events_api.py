"""``GET /api/events/`` and ``POST /api/events/ack/`` (consumers over HTTP), and the
per-run cursor's refusals and long poll."""

from __future__ import annotations

import pytest

from tests.api.test_api_basics import assert_error
from tests.services.test_consumers import an_event_committed_meanwhile
from workflows.models import Event, EventConsumer, Run

pytestmark = pytest.mark.django_db


def _run() -> Run:
    return Run.objects.create(workflow_name="http_events", workflow_version=1, snapshot={})


def _consume(api, name: str, role: str = "viewer", **query) -> list[dict]:
    response = api(role).get("/api/events/", {"consumer": name, **query})
    assert response.status_code == 200, response.content
    assert response.json()["consumer"] == name
    return response.json()["events"]


def _create(api, name: str) -> None:
    response = api("manager").post("/api/events/consumers/", {"name": name}, format="json")
    assert response.status_code == 201, response.content


def test_a_consumer_gets_events_until_it_acks_them(api):
    run = _run()
    ids = [Event.objects.create(run=run, type=f"e{n}").pk for n in range(3)]
    _create(api, "http")
    events = _consume(api, "http", limit=2)
    assert [event["id"] for event in events] == ids[:2]
    assert set(events[0]) == {"id", "cursor", "run", "step", "type", "payload", "created_at"}
    assert events[0]["run"] == str(run.pk)
    assert [event["id"] for event in _consume(api, "http", limit=2)] == ids[:2]
    acked = api("operator").post(
        "/api/events/ack/", {"consumer": "http", "cursor": events[-1]["cursor"]}, format="json"
    )
    assert acked.status_code == 200, acked.content
    assert acked.json() == {
        "consumer": "http",
        "cursor": events[-1]["cursor"],
        "version": 2,
        "moved": True,
    }
    assert [event["id"] for event in _consume(api, "http")] == ids[2:]
    again = api("operator").post(
        "/api/events/ack/", {"consumer": "http", "cursor": events[0]["cursor"]}, format="json"
    )
    assert again.json()["moved"] is False and again.json()["version"] == 2


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({}, "consumer"),
        ({"consumer": ""}, "consumer"),
        ({"consumer": "x" * 201}, "consumer"),
        ({"consumer": "a\x00b"}, "consumer"),
        ({"consumer": "   "}, "consumer"),
        ({"consumer": "c", "limit": "0"}, "limit"),
        ({"consumer": "c", "limit": "1001"}, "limit"),
        ({"consumer": "c", "limit": "x"}, "limit"),
        ({"consumer": "c", "wait": "61"}, "wait"),
        ({"consumer": "c", "wait": "-1"}, "wait"),
        ({"consumer": "c", "wait": "nan"}, "wait"),
    ],
)
def test_a_bad_consume_query_is_a_400_naming_the_field(api, query, field):
    response = api("viewer").get("/api/events/", query)
    assert field in assert_error(response, 400, "validation_error")["details"]
    assert not EventConsumer.objects.exists()


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"consumer": "c"}, "cursor"),
        ({"cursor": "x"}, "consumer"),
        ({"consumer": "c", "cursor": "forged"}, "cursor"),
        ({"consumer": "c", "cursor": "1.2:abc"}, "cursor"),
        ({"consumer": "c", "cursor": 5}, "cursor"),
        ({"consumer": "", "cursor": "x"}, "consumer"),
    ],
)
def test_a_bad_ack_is_a_400_naming_the_field(api, body, field):
    response = api("operator").post("/api/events/ack/", body, format="json")
    assert field in assert_error(response, 400, "validation_error")["details"]
    assert not EventConsumer.objects.exists()


@pytest.mark.parametrize(
    ("role", "method", "path", "status"),
    [
        ("anonymous", "get", "/api/events/?consumer=c", 401),
        ("nobody", "get", "/api/events/?consumer=c", 403),
        ("viewer", "post", "/api/events/ack/", 403),
        ("anonymous", "post", "/api/events/ack/", 401),
    ],
)
def test_reading_needs_view_and_acking_needs_operate(api, role, method, path, status):
    response = getattr(api(role), method)(path, {"consumer": "c", "cursor": "x"}, format="json")
    assert response.status_code == status
    assert not EventConsumer.objects.exists()


def test_an_after_seq_of_another_run_is_a_400(api):
    other = Event.objects.create(run=_run(), type="elsewhere").pk
    response = api("viewer").get(f"/api/runs/{_run().pk}/events/?after_seq={other}")
    assert "after_seq" in assert_error(response, 400, "validation_error")["details"]


def test_the_next_link_follows_after_the_last_event(api):
    run = _run()
    ids = [Event.objects.create(run=run, type=f"e{n}").pk for n in range(3)]
    page = api("viewer").get(f"/api/runs/{run.pk}/events/?page_size=2").json()
    assert [event["seq"] for event in page["results"]] == ids[:2]
    assert f"after_seq={ids[1]}" in page["next"] and page["previous"] is None
    rest = api("viewer").get(page["next"]).json()
    assert [event["seq"] for event in rest["results"]] == ids[2:]
    assert rest["next"] is None


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("endpoint", ["run", "consumer"])
def test_a_long_poll_returns_when_an_event_commits(api, endpoint):
    """``wait=60``; a thread commits an event: the request finishing at all shows it was
    answered on the commit (woken, or at its backstop poll), not at its bound."""
    run = _run()
    first = Event.objects.create(run=run, type="first").pk
    path = (
        f"/api/runs/{run.pk}/events/?after_seq={first}&wait=60"
        if endpoint == "run"
        else "/api/events/?consumer=poller&wait=60"
    )
    if endpoint == "consumer":
        _create(api, "poller")
        events = _consume(api, "poller", wait=60)
        api("operator").post(
            "/api/events/ack/",
            {"consumer": "poller", "cursor": events[-1]["cursor"]},
            format="json",
        )

    with an_event_committed_meanwhile(run):
        response = api("operator").get(path)
    assert response.status_code == 200
    body = response.json()
    events = body["results"] if endpoint == "run" else body["events"]
    assert [event["type"] for event in events] == ["late"]


def test_a_long_poll_answers_empty_at_its_bound(api):
    run = _run()
    first = Event.objects.create(run=run, type="only").pk
    response = api("viewer").get(f"/api/runs/{run.pk}/events/?after_seq={first}&wait=0.2")
    assert response.json()["results"] == []


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("page_size=0", "page_size"),
        ("page_size=1001", "page_size"),
        ("page_size=+1", "page_size"),
        ("page_size=1.5", "page_size"),
        ("after_seq=+1", "after_seq"),
        ("after_seq=1_0", "after_seq"),
        ("after_seq=-1", "after_seq"),
        ("after_seq=%EF%BC%91", "after_seq"),
        ("wait=61", "wait"),
    ],
)
def test_a_bad_run_events_query_is_a_400_naming_the_field(api, query, field):
    response = api("viewer").get(f"/api/runs/{_run().pk}/events/?{query}")
    assert field in assert_error(response, 400, "validation_error")["details"]
