"""``POST /api/signals/by-token/``: no login, the token is the credential; each refusal
its status and code, nothing written; repeats; throttled like the callbacks."""

from __future__ import annotations

import time
import uuid
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.core import signing
from rest_framework.test import APIClient

import workflows
from tests.api.test_api_basics import assert_error
from tests.support.handlers import NOOP
from workflows import Task, WaitForSignal, Workflow
from workflows.approvals.links import LINK_SALT
from workflows.engine.nodes.callback import make_token
from workflows.models import Event, Run, Signal, Step
from workflows.services.signal_tokens import SALT
from workflows.testing import run_pending

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fresh_throttle")]

URL = "/api/signals/by-token/"


class Delivery(Workflow):
    name = "api_signal_token_delivery"
    prepare = Task(NOOP)
    delivered = WaitForSignal("delivered")
    invoice = Task(NOOP, after=["delivered"])
    returned = WaitForSignal("returned", after=["prepare"])


@pytest.fixture
def run() -> Run:
    started = workflows.start_run(Delivery, business_key="PARCEL-9")
    run_pending()
    return started


@pytest.fixture
def token(run: Run) -> str:
    return workflows.signal_token(run, "delivered")


@pytest.fixture
def client() -> APIClient:
    """No credentials at all: the token is the only one needed."""
    return APIClient()


def post(client: APIClient, body: object, **extra: str):
    return client.post(URL, body, format="json", **extra)


def written() -> tuple[int, int, list[tuple[str, int]]]:
    return (
        Signal.objects.count(),
        Event.objects.count(),
        list(Step.objects.order_by("id").values_list("status", "version")),
    )


def test_a_token_delivers_its_signal_without_any_login(run, token, client):
    response = post(client, {"token": token, "payload": {"signed_by": "R. Doe"}})
    assert response.status_code == 201, response.content
    body = response.json()
    assert (body["run"], body["name"], body["payload"]) == (
        str(run.pk),
        "delivered",
        {"signed_by": "R. Doe"},
    )
    assert body["consumed_by"] == "delivered"
    assert token not in response.content.decode()  # the key is a digest, not the token
    assert Step.objects.get(run=run, name="delivered").status == "completed"
    # A retry after a lost answer: 200, the same signal, nothing written.
    before = written()
    again = post(client, {"token": token, "payload": {"signed_by": "R. Doe"}})
    assert again.status_code == 200, again.content
    assert again.json()["id"] == body["id"]
    assert written() == before
    conflict = post(client, {"token": token, "payload": {"signed_by": "someone else"}})
    assert_error(conflict, 409, "idempotency_conflict")
    assert written() == before


def test_keys_in_the_body_or_the_header_send_distinct_signals(run, token, client):
    first = post(client, {"token": token, "payload": 1, "idempotency_key": "scan-1"})
    assert first.status_code == 201, first.content
    second = post(client, {"token": token, "payload": 2}, HTTP_IDEMPOTENCY_KEY="scan-2")
    assert second.status_code == 201, second.content
    repeat = post(client, {"token": token, "payload": 2}, HTTP_IDEMPOTENCY_KEY="scan-2")
    assert (repeat.status_code, repeat.json()["id"]) == (200, second.json()["id"])
    assert Signal.objects.filter(run=run).count() == 2


def forged(token: str) -> str:
    return token[:5] + ("A" if token[5] != "A" else "B") + token[6:]


@pytest.mark.parametrize(
    ("make", "status", "code"),
    [
        (forged, 403, "signal_token_invalid"),
        (lambda t: t[:-4], 403, "signal_token_invalid"),
        (lambda t: "not-a-token", 403, "signal_token_invalid"),
        (lambda t: t + "x" * 10_000, 403, "signal_token_invalid"),
        (
            lambda t: signing.dumps({**signing.loads(t, salt=SALT), "e": 1}, salt=SALT),
            410,
            "signal_token_expired",
        ),
        (
            lambda t: make_token(uuid.uuid4(), 1, 1, timedelta(hours=1)),
            403,
            "signal_token_foreign",
        ),
        (
            lambda t: signing.dumps({"s": 1, "v": 1, "u": "1"}, salt=LINK_SALT),
            403,
            "signal_token_foreign",
        ),
        (
            lambda t: signing.dumps(
                {**signing.loads(t, salt=SALT), "r": str(uuid.uuid4())}, salt=SALT
            ),
            403,
            "signal_token_foreign",
        ),
    ],
    ids=["bit flip", "truncated", "garbage", "huge", "expired", "callback", "link", "no run"],
)
def test_a_refused_token_has_its_status_and_code_and_writes_nothing(
    run, token, client, make, status, code
):
    before = written()
    assert_error(post(client, {"token": make(token), "payload": {}}), status, code)
    assert written() == before


@pytest.mark.parametrize(
    ("make", "says"),
    [
        (forged, "the signal token is not valid"),
        (lambda t: t[:-4], "the signal token is not valid"),
        (lambda t: t + "x" * 10_000, "a signal token is text of 1 to 4096 ASCII characters"),
        (
            lambda t: signing.dumps({**signing.loads(t, salt=SALT), "e": 1}, salt=SALT),
            "the signal token expired at 1970-01-01T00:00:01+00:00; ask for a new one",
        ),
    ],
    ids=["bit flip", "truncated", "huge", "expired"],
)
def test_an_anonymous_caller_is_told_the_problem_without_internals(run, token, client, make, says):
    message = post(client, {"token": make(token)}).json()["error"]["message"]
    assert message.startswith(says)
    for internal in ("SECRET_KEY", "fallback", "WORKFLOWS[", "signal_token made", "timedelta"):
        assert internal not in message
    assert len(message) < 120


def test_naming_another_signal_is_403_wrong_signal(run, token, client):
    before = written()
    error = assert_error(
        post(client, {"token": token, "signal": "returned"}), 403, "signal_token_wrong_signal"
    )
    assert error["details"] == {"allowed": "delivered", "sent": "returned"}
    assert written() == before
    named = post(client, {"token": token, "signal": "delivered"})
    assert named.status_code == 201, named.content


def test_a_run_that_has_ended_or_is_gone_refuses_the_token(run, token, client):
    workflows.cancel_run(run, reason="parcel lost")
    run_pending()
    before = written()
    assert_error(post(client, {"token": token}), 409, "invalid_transition")
    assert written() == before
    Run.objects.filter(pk=run.pk).delete()
    error = assert_error(post(client, {"token": token}), 403, "signal_token_foreign")
    assert error["details"]["reason"] == "run_not_found"


def test_an_expired_token_made_in_the_past_is_410(run, client, monkeypatch):
    week_ago = time.time() - 8 * 86400
    with monkeypatch.context() as patched:
        patched.setattr(time, "time", lambda: week_ago)
        old = workflows.signal_token(run, "delivered")
    error = assert_error(post(client, {"token": old}), 410, "signal_token_expired")
    assert error["retryable"] is False


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "token"),
        ({"token": ""}, "token"),
        ({"token": 12345}, "token"),
        ({"token": None}, "token"),
        ({"token": "t", "idempotency_key": ""}, "idempotency_key"),
        ({"token": "t", "signal": 7}, "signal"),
        ({"token": "t", "run": "x"}, "run"),
    ],
)
def test_a_missing_or_mistyped_field_is_a_400(client, body, field):
    error = assert_error(post(client, body), 400, "validation_error")
    assert field in error["details"]


def test_a_body_key_and_a_header_key_that_differ_are_a_400(token, client):
    response = post(client, {"token": token, "idempotency_key": "a"}, HTTP_IDEMPOTENCY_KEY="b")
    assert_error(response, 400, "validation_error")


def test_calls_are_throttled_per_client_address_sharing_the_callbacks_budget(
    run, token, client, settings
):
    settings.WORKFLOWS = {**settings.WORKFLOWS, "API_CALLBACK_RATE": "3/min"}
    assert post(client, {"token": token}).status_code == 201
    assert (
        client.post("/api/callbacks/heartbeat/", {"token": "x"}, format="json").status_code == 403
    )
    assert post(client, {"token": token}).status_code == 200
    before = written()
    refused = post(client, {"token": forged(token)})
    error = assert_error(refused, 429, "throttled")
    assert error["retryable"] is True
    assert 0 < int(refused["Retry-After"]) <= 61
    assert_error(post(client, {"token": token, "payload": 2}), 429, "throttled")
    assert written() == before
    elsewhere = post(client, {"token": token}, REMOTE_ADDR="10.0.0.2")
    assert elsewhere.status_code == 200
    spoofed = post(client, {"token": token}, HTTP_X_FORWARDED_FOR="10.9.9.9")
    assert_error(spoofed, 429, "throttled")


def test_a_session_cookie_without_csrf_and_a_bad_credential_are_ignored(run, token):
    browser = APIClient(enforce_csrf_checks=True)
    browser.force_login(User.objects.create_user("someone"))
    response = post(browser, {"token": token}, HTTP_AUTHORIZATION="Token not-a-real-one")
    assert response.status_code == 201, response.content
    received = Event.objects.get(run=run, type="signal.received")
    assert (received.payload["by"], received.payload["via"]) == (None, "token")


def test_the_schema_documents_the_endpoint():
    viewer = APIClient()
    viewer.force_login(User.objects.create_superuser("root"))
    schema = viewer.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    operation = schema["paths"][URL]["post"]
    assert {"200", "201", "400", "403", "409", "410", "413", "429"} <= set(operation["responses"])
    assert "401" not in operation["responses"]
    assert operation.get("security") in (None, [], [{}])
