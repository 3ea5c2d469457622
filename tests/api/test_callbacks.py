"""``/api/callbacks/``: resolving parked tasks by their token alone, and the throttle."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.core import signing
from rest_framework.test import APIClient

import workflows
from tests.api.test_api_basics import assert_error
from tests.support.handlers import ASK_BANK, NOOP, TOKENS
from tests.support.runs import waiting_step
from workflows import Retry, Task, Workflow
from workflows.engine.nodes.callback import SALT
from workflows.models import Event, Run, Step
from workflows.testing import run_pending

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fresh_throttle")]


class Transfer(Workflow):
    name = "api_callbacks_transfer"
    transfer = Task(ASK_BANK, retry=Retry(max_attempts=2))
    receipt = Task(NOOP, after=["transfer"])


@pytest.fixture
def parked() -> Step:
    """A run whose transfer step waits for its callback (token in ``TOKENS[0]``)."""
    return waiting_step(Transfer, step="transfer")


@pytest.fixture
def client() -> APIClient:
    """No credentials at all: the token is the only one a callback needs."""
    return APIClient()


def post(client: APIClient, verb: str, body: dict, **extra: str):
    return client.post(f"/api/callbacks/{verb}/", body, format="json", **extra)


def test_complete_resolves_the_step_and_the_run_moves_on(parked, client):
    response = post(client, "complete", {"token": TOKENS[0], "output": {"reference": "TX-1"}})
    assert response.status_code == 200, response.content
    assert response.json() == {
        "run": str(parked.run_id),
        "step": parked.pk,
        "attempt": 1,
        "step_status": "completed",
        "run_status": "running",
    }
    run_pending()
    run = Run.objects.get(pk=parked.run_id)
    assert run.status == "completed"
    assert run.steps.get(name="transfer").output == {"reference": "TX-1"}


def test_fail_fails_the_attempt_which_is_retried(parked, client):
    response = post(client, "fail", {"token": TOKENS[0], "error": "insufficient funds"})
    assert response.status_code == 200, response.content
    assert response.json()["step_status"] == "retry_scheduled"
    error = Step.objects.get(pk=parked.pk).error
    assert (error["code"], error["message"]) == ("callback_failed", "insufficient funds")


def test_heartbeat_says_whether_to_go_on_and_changes_nothing(parked, client):
    before = (Step.objects.get(pk=parked.pk).version, Event.objects.count())
    beat = post(client, "heartbeat", {"token": TOKENS[0]})
    assert beat.status_code == 200, beat.content
    assert beat.json() == {
        "run": str(parked.run_id),
        "step": parked.pk,
        "attempt": 1,
        "step_status": "waiting",
        "run_status": "running",
        "cancel_requested": False,
    }
    assert (Step.objects.get(pk=parked.pk).version, Event.objects.count()) == before
    workflows.cancel_run(parked.run_id, reason="customer left")
    after = post(client, "heartbeat", {"token": TOKENS[0]}).json()
    assert after["cancel_requested"] is True
    assert after["run_status"] in ("cancelling", "cancelled")


def test_heartbeat_asks_to_stop_once_the_attempt_no_longer_waits(parked, client):
    workflows.fail_callback(TOKENS[0], "lost")
    beat = post(client, "heartbeat", {"token": TOKENS[0]}).json()
    assert (beat["step_status"], beat["cancel_requested"]) == ("retry_scheduled", True)
    Run.objects.filter(pk=parked.run_id).delete()  # purged by retention
    gone = post(client, "heartbeat", {"token": TOKENS[0]}).json()
    assert (gone["step_status"], gone["run_status"], gone["cancel_requested"]) == (
        None,
        None,
        True,
    )


def test_a_used_token_is_a_409_token_used(parked, client):
    assert post(client, "complete", {"token": TOKENS[0], "output": 1}).status_code == 200
    for verb, body in (("complete", {"output": 2}), ("fail", {"error": "late"})):
        error = assert_error(post(client, verb, {"token": TOKENS[0], **body}), 409, "token_used")
        assert error["details"]["engine_code"] == "callback_already_used"
    assert Step.objects.get(pk=parked.pk).output == 1


def test_an_expired_token_is_a_410_token_expired(parked, client):
    expired = signing.dumps({**signing.loads(TOKENS[0], salt=SALT), "t": -1}, salt=SALT)
    for verb, body in (("complete", {}), ("fail", {"error": "x"}), ("heartbeat", {})):
        error = assert_error(post(client, verb, {"token": expired, **body}), 410, "token_expired")
        assert error["details"]["engine_code"] == "callback_expired"
    assert Step.objects.get(pk=parked.pk).status == "waiting"


def test_a_tampered_token_is_a_403(parked, client):
    for token in (TOKENS[0][:-2] + "xx", "not-a-token"):
        for verb in ("complete", "heartbeat"):
            assert_error(post(client, verb, {"token": token}), 403, "invalid_callback_token")
    assert Step.objects.get(pk=parked.pk).status == "waiting"


@pytest.mark.parametrize(
    ("verb", "body", "field"),
    [
        ("complete", {"output": 1}, "token"),
        ("heartbeat", {}, "token"),
        ("heartbeat", {"token": ""}, "token"),
        ("fail", {"token": "t"}, "error"),
        ("complete", {"token": 12345}, "token"),
        ("fail", {"token": "t", "error": ["no"]}, "error"),
        ("heartbeat", {"token": "t", "attempt": 2}, "attempt"),
    ],
)
def test_a_missing_or_mistyped_field_is_a_400(client, verb, body, field):
    error = assert_error(post(client, verb, body), 400, "validation_error")
    assert field in error["details"]


def test_calls_are_throttled_per_client_address(parked, client, settings):
    settings.WORKFLOWS = {**settings.WORKFLOWS, "API_CALLBACK_RATE": "2/min"}
    for _ in range(2):
        assert post(client, "heartbeat", {"token": TOKENS[0]}).status_code == 200
    refused = post(client, "heartbeat", {"token": TOKENS[0]})
    error = assert_error(refused, 429, "throttled")
    assert error["retryable"] is True
    assert 0 < int(refused["Retry-After"]) <= 61
    assert_error(post(client, "complete", {"token": TOKENS[0]}), 429, "throttled")
    assert Step.objects.get(pk=parked.pk).status == "waiting"
    elsewhere = post(client, "heartbeat", {"token": TOKENS[0]}, REMOTE_ADDR="10.0.0.2")
    assert elsewhere.status_code == 200
    spoofed = post(client, "heartbeat", {"token": TOKENS[0]}, HTTP_X_FORWARDED_FOR="10.9.9.9")
    assert_error(spoofed, 429, "throttled")


def test_a_session_cookie_without_csrf_and_a_bad_credential_are_ignored(parked):
    browser = APIClient(enforce_csrf_checks=True)
    browser.force_login(User.objects.create_user("someone"))
    assert post(browser, "heartbeat", {"token": TOKENS[0]}).status_code == 200
    with_bad_token = post(browser, "heartbeat", {"token": TOKENS[0]}, HTTP_AUTHORIZATION="Token x")
    assert with_bad_token.status_code == 200
    response = post(browser, "complete", {"token": TOKENS[0], "output": "ok"})
    assert response.status_code == 200, response.content


def test_the_schema_documents_the_callbacks(client):
    viewer = APIClient()
    viewer.force_login(User.objects.create_superuser("root"))
    schema = viewer.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    for verb in ("complete", "fail", "heartbeat"):
        operation = schema["paths"][f"/api/callbacks/{verb}/"]["post"]
        assert "application/json" in operation["requestBody"]["content"]
        assert {"200", "403", "410", "429"} <= set(operation["responses"])
