"""Every long poll's answer says whether its wait ran out (``timed_out``): true when it
waited and what it waits for did not come, false when it came or no wait was asked; and
the OpenAPI document lists the field on each long poll's answer."""

from __future__ import annotations

import pytest

import workflows
from tests.api.schema_doc import api_schema
from workflows import Gate, Task, Workflow
from workflows.models import Event
from workflows.testing import run_pending

pytestmark = pytest.mark.django_db(transaction=True)


def say(ctx):
    ctx.log("hello")


class Held(Workflow):
    name = "timed_out_held"
    review = Gate(prompt="go?")


class Talking(Workflow):
    name = "timed_out_talking"
    talk = Task(f"{__name__}.say")


def test_a_run_poll_says_whether_it_timed_out(api):
    client = api("viewer")
    run = workflows.start_run(Held)
    assert client.get(f"/api/runs/{run.pk}/?wait=0.2").json()["timed_out"] is True
    assert client.get(f"/api/runs/{run.pk}/").json()["timed_out"] is False
    workflows.cancel_run(run.pk)
    ended = client.get(f"/api/runs/{run.pk}/?wait=30").json()
    assert (ended["status"], ended["timed_out"]) == ("cancelled", False)


def test_an_event_poll_says_whether_it_timed_out(api):
    client = api("viewer")
    run = workflows.start_run(Held)
    last = Event.objects.filter(run=run).order_by("-pk").first().pk
    empty = client.get(f"/api/runs/{run.pk}/events/?after_seq={last}&wait=0.2").json()
    assert (empty["results"], empty["timed_out"]) == ([], True)
    found = client.get(f"/api/runs/{run.pk}/events/?wait=30").json()
    assert found["results"] and found["timed_out"] is False


def test_a_consumer_poll_says_whether_it_timed_out(api):
    run = workflows.start_run(Held)
    created = api("manager").post("/api/events/consumers/", {"name": "p"}, format="json")
    assert created.status_code == 201
    first = api("manager").get("/api/events/?consumer=p&wait=30").json()
    assert first["events"] and first["timed_out"] is False
    cursor = first["events"][-1]["cursor"]
    api("manager").post("/api/events/ack/", {"consumer": "p", "cursor": cursor}, format="json")
    assert api("manager").get("/api/events/?consumer=p&wait=0.2").json() == {
        "consumer": "p",
        "events": [],
        "timed_out": True,
    }
    workflows.cancel_run(run.pk)
    assert api("manager").get("/api/events/?consumer=p&wait=30").json()["timed_out"] is False


def test_a_frame_poll_says_whether_it_timed_out(api):
    run = workflows.start_run(Talking)
    run_pending()
    url = f"/api/runs/{run.pk}/steps/talk/frames/"
    found = api("viewer").get(f"{url}?wait=30").json()
    assert [frame["text"] for frame in found["frames"]] == ["hello"]
    assert found["timed_out"] is False
    after = found["next_after"]
    empty = api("viewer").get(f"{url}?after={after}&wait=0.2").json()
    assert (empty["frames"], empty["timed_out"]) == ([], True)
    assert api("viewer").get(f"{url}?after={after}").json()["timed_out"] is False


def test_the_schema_lists_timed_out_on_every_long_poll_answer():
    components = api_schema()["components"]["schemas"]
    for name in ("PolledRun", "EventPage", "FramePage", "Consumed"):
        assert components[name]["properties"]["timed_out"]["type"] == "boolean", name
        assert "timed_out" in components[name]["required"], name
    assert "timed_out" not in components["RunDetail"]["properties"]
