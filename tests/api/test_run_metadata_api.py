"""Run metadata over HTTP: a title and the ``api`` trigger at the start, the
``business_key``, ``dismiss`` and ``undismiss`` verbs, and the ``trigger`` and
``dismissed`` filters of the runs list."""

from __future__ import annotations

import pytest

import workflows
from tests.engine.runs.test_run_metadata import Fails, Keyed, Waits
from tests.support.runs import run_inline
from workflows.models import Event, Run

from .test_api_basics import assert_error

pytestmark = pytest.mark.django_db


def listed(api, query: str = "") -> list[str]:
    response = api("viewer").get(f"/api/runs/{query}")
    assert response.status_code == 200, response.content
    return [run["id"] for run in response.json()["results"]]


def test_a_start_over_http_has_its_title_the_api_trigger_and_its_user(api):
    response = api("starter").post(
        "/api/runs/", {"workflow": "meta_waits", "title": "Order 7"}, format="json"
    )
    assert response.status_code == 201, response.content
    body = response.json()
    assert (body["title"], body["trigger"], body["started_by"]) == (
        "Order 7",
        "api",
        "starter-user",
    )
    assert (body["dismissed_at"], body["dismissed_by"]) == (None, None)
    row = api("viewer").get("/api/runs/").json()["results"][0]
    assert (row["title"], row["trigger"]) == ("Order 7", "api")


@pytest.mark.parametrize("title", ["x" * 201, 5, "a\x00b"])
def test_a_title_that_cannot_be_stored_is_a_400(api, title):
    response = api("starter").post(
        "/api/runs/", {"workflow": "meta_waits", "title": title}, format="json"
    )
    assert response.status_code == 400, response.content
    assert not Run.objects.exists()


def test_the_trigger_filter(api):
    coded = workflows.start_run(Waits)
    api("starter").post("/api/runs/", {"workflow": "meta_waits"}, format="json")
    by_api = Run.objects.get(trigger="api")
    assert listed(api, "?trigger=api") == [str(by_api.pk)]
    assert listed(api, "?trigger=code") == [str(coded.pk)]
    assert_error(api("viewer").get("/api/runs/?trigger=pigeon"), 400, "validation_error")


def test_business_key_verb_sets_it_and_refuses_a_key_in_use(api):
    holder = workflows.start_run(Keyed, business_key="ORDER-1")
    run = workflows.start_run(Keyed)
    url = f"/api/runs/{run.pk}/business_key/"
    response = api("operator").post(url, {"business_key": "ORDER-2"}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["business_key"] == "ORDER-2"
    error = assert_error(
        api("operator").post(url, {"business_key": "ORDER-1"}, format="json"),
        409,
        "business_key_in_use",
    )
    assert "unique_business_key" in error["message"]
    assert Run.objects.get(pk=run.pk).business_key == "ORDER-2"
    assert holder.business_key == "ORDER-1"
    assert_error(api("operator").post(url, {}, format="json"), 400, "validation_error")
    assert_error(
        api("viewer").post(url, {"business_key": "X"}, format="json"), 403, "permission_denied"
    )


def test_business_key_verb_refuses_an_ended_run(api):
    run = run_inline(Fails)
    assert_error(
        api("operator").post(
            f"/api/runs/{run.pk}/business_key/", {"business_key": "X"}, format="json"
        ),
        409,
        "invalid_state",
    )


def test_dismiss_hides_a_run_from_the_default_list_and_the_attention_filter(api):
    failed, live = run_inline(Fails), workflows.start_run(Waits)
    assert listed(api, "?attention=failed") == [str(failed.pk)]
    response = api("operator").post(f"/api/runs/{failed.pk}/dismiss/", {}, format="json")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["dismissed_at"] is not None
    assert (body["dismissed_by"], body["attention"]) == ("operator-user", "ok")
    assert Event.objects.filter(run=failed, type="run.dismissed").count() == 1
    assert listed(api) == [str(live.pk)]
    assert listed(api, "?attention=failed") == []
    assert listed(api, "?dismissed=yes") == [str(failed.pk)]
    assert listed(api, "?dismissed=all") == [str(live.pk), str(failed.pk)]
    assert listed(api, "?dismissed=no") == [str(live.pk)]
    assert_error(api("viewer").get("/api/runs/?dismissed=maybe"), 400, "validation_error")
    # Dismissed runs stay readable by id.
    assert api("viewer").get(f"/api/runs/{failed.pk}/").status_code == 200
    response = api("operator").post(f"/api/runs/{failed.pk}/undismiss/", {}, format="json")
    assert response.json()["dismissed_at"] is None
    assert listed(api) == [str(live.pk), str(failed.pk)]


def test_dismiss_refuses_a_live_run(api):
    run = workflows.start_run(Waits)
    error = assert_error(
        api("operator").post(f"/api/runs/{run.pk}/dismiss/", {}, format="json"),
        409,
        "invalid_state",
    )
    assert "dismiss needs" in error["message"]
