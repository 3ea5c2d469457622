"""Webhook signatures, secrets, event types and the payload: no database, no network."""

from __future__ import annotations

import base64
import json
import re
from datetime import UTC, datetime
from pathlib import Path
from uuid import UUID

import pytest
from django.core.exceptions import ValidationError

from tests.support.webhook_receiver import verify
from workflows.models import WebhookEndpoint
from workflows.webhooks.event_types import (
    WEBHOOK_EVENT_TYPES,
    subscribed,
    validate_event_types,
    webhook_type,
)
from workflows.webhooks.payload import encode, event_body
from workflows.webhooks.signing import generate_secret, secret_key, sign, signed_headers

# The Standard Webhooks reference libraries' test vector (their sign tests).
VECTOR_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
VECTOR_ID = "msg_p5jXN8AQM9LWM0D4loKWxJek"
VECTOR_TIMESTAMP = 1614265330
VECTOR_BODY = b'{"test": 2432232314}'
VECTOR_SIGNATURE = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="


def test_the_reference_vector_signs_as_the_standard_says():
    assert sign(VECTOR_SECRET, VECTOR_ID, VECTOR_TIMESTAMP, VECTOR_BODY) == VECTOR_SIGNATURE


def test_the_tests_receiver_accepts_the_vector_and_refuses_a_changed_body():
    headers = signed_headers(VECTOR_SECRET, VECTOR_ID, VECTOR_TIMESTAMP, VECTOR_BODY)
    assert headers == {
        "webhook-id": VECTOR_ID,
        "webhook-timestamp": "1614265330",
        "webhook-signature": VECTOR_SIGNATURE,
        "content-type": "application/json",
    }
    assert verify(VECTOR_SECRET, headers, VECTOR_BODY)
    assert not verify(VECTOR_SECRET, headers, b'{"test": 2432232315}')
    assert not verify(generate_secret(), headers, VECTOR_BODY)


def test_generated_secrets_are_whsec_and_24_random_bytes():
    first, second = generate_secret(), generate_secret()
    assert first.startswith("whsec_") and first != second
    assert len(base64.b64decode(first.removeprefix("whsec_"))) == 24


@pytest.mark.parametrize(
    ("secret", "problem"),
    [
        ("MfKQ9r8GKYqrTwjU", "starts with 'whsec_'"),
        ("whsec_not base64!", "base64"),
        ("whsec_", "at least one key byte"),
    ],
)
def test_a_malformed_secret_is_refused_saying_why(secret, problem):
    with pytest.raises(ValueError, match=problem):
        secret_key(secret)


def test_the_body_has_type_timestamp_and_data_with_the_run():
    body = event_body(
        webhook_type="run.completed",
        event_id=7,
        created_at=datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
        run_id=UUID("12345678-1234-5678-1234-567812345678"),
        step_id=None,
        step=None,
        workflow="order",
        payload={"output": {"total": 3}, "run_id": "overridden"},
    )
    assert body == {
        "type": "run.completed",
        "timestamp": "2026-01-02T03:04:05+00:00",
        "data": {
            "output": {"total": 3},
            "event_id": 7,
            "run_id": "12345678-1234-5678-1234-567812345678",
            "step_id": None,
            "step": None,
            "workflow": "order",
            "tags": {},  # a run's tags; none given here
        },
    }
    encoded = encode(body)
    assert json.loads(encoded) == body
    assert b" " not in encoded  # compact: the bytes signed are the bytes sent


def test_history_events_map_to_webhook_types():
    assert webhook_type("run.completed", {}) == "run.completed"
    assert webhook_type("step.waiting", {"reason": "gate"}) == "gate.waiting"
    assert webhook_type("step.waiting", {"reason": "sleep"}) is None
    assert webhook_type("step.ready", {}) is None
    assert subscribed(["*"], "step.failed")
    assert subscribed(["run.failed", "step.failed"], "step.failed")
    assert not subscribed(["run.failed"], "step.failed")


def test_event_types_must_be_known_and_not_empty():
    validate_event_types(["*"])
    validate_event_types(list(WEBHOOK_EVENT_TYPES))
    with pytest.raises(ValidationError, match="at least one"):
        validate_event_types([])
    with pytest.raises(ValidationError, match=r"Unknown event type.*run\.exploded"):
        validate_event_types(["run.completed", "run.exploded"])


def test_an_endpoint_refuses_a_url_that_is_not_http():
    endpoint = WebhookEndpoint(url="ftp://example.com/hook", event_types=["*"])
    with pytest.raises(ValidationError) as refused:
        endpoint.clean_fields()
    assert "url" in refused.value.message_dict
    WebhookEndpoint(url="https://example.com/hook", event_types=["*"]).clean_fields()


def test_the_guides_verification_snippet_accepts_the_vector():
    guide = Path(__file__).resolve().parents[2] / "docs" / "guide" / "webhooks.md"
    (snippet,) = [
        block
        for block in re.findall(r"```python\n(.*?)```", guide.read_text(), re.DOTALL)
        if "def verify_webhook" in block
    ]
    namespace: dict = {}
    exec(snippet, namespace)
    verify_webhook = namespace["verify_webhook"]
    headers = signed_headers(VECTOR_SECRET, VECTOR_ID, VECTOR_TIMESTAMP, VECTOR_BODY)
    assert verify_webhook(VECTOR_SECRET, headers, VECTOR_BODY, tolerance=10**10)
    assert not verify_webhook(VECTOR_SECRET, headers, VECTOR_BODY)  # too old
    assert not verify_webhook(VECTOR_SECRET, headers, b"{}", tolerance=10**10)
