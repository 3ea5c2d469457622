"""Requests Django refuses to read (``SuspiciousOperation``) are 4xx in the envelope,
answered at once, on every endpoint under the API, the schema and callbacks included,
with or without :class:`~workflows.api.middleware.SuspiciousRequestMiddleware`."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.core.exceptions import RequestDataTooBig, SuspiciousOperation, TooManyFilesSent
from django.test import Client, override_settings

from tests.api.test_api_basics import assert_error
from workflows.api.errors import handle_exception
from workflows.checks import check_api_middleware

pytestmark = pytest.mark.django_db

MIDDLEWARE = "workflows.api.middleware.SuspiciousRequestMiddleware"
TOO_MANY = "&".join(f"p{index}=1" for index in range(settings.DATA_UPLOAD_MAX_NUMBER_FIELDS + 1))
ENDPOINTS = [
    ("get", "/api/runs/"),
    ("get", "/api/workflows/"),
    ("get", "/api/schema/"),
    ("get", "/api/docs/"),
    ("post", "/api/callbacks/complete/"),
    ("post", "/api/runs/"),
]


def call(client, method: str, path: str, query: str):
    return getattr(client, method)(f"{path}?{query}", content_type="application/json")


@override_settings(DEBUG=True)  # Django's debug page took seconds for this, then a 500
@pytest.mark.parametrize(("method", "path"), ENDPOINTS)
def test_too_many_query_parameters_is_a_fast_400_before_authentication(api, method, path):
    assert_error(call(api("anonymous"), method, path, TOO_MANY), 400, "too_many_parameters")


@pytest.mark.parametrize(("method", "path"), ENDPOINTS)
def test_the_views_answer_it_themselves_without_the_middleware(api, method, path):
    without = [name for name in settings.MIDDLEWARE if name != MIDDLEWARE]
    with override_settings(MIDDLEWARE=without, DEBUG=True):
        response = call(api("viewer"), method, path, TOO_MANY)
    assert_error(response, 400, "too_many_parameters")


def test_a_disallowed_host_is_a_400_under_the_api_only():
    assert_error(Client().get("/api/runs/", HTTP_HOST="evil.example"), 400, "bad_request")
    outside = Client().get("/admin/", HTTP_HOST="evil.example")
    assert outside.status_code == 400 and "error" not in outside.content.decode()


@pytest.mark.parametrize(
    ("exc", "status", "code"),
    [
        (RequestDataTooBig("body"), 413, "payload_too_large"),
        (TooManyFilesSent("files"), 400, "too_many_parameters"),
        (SuspiciousOperation("anything else"), 400, "bad_request"),
    ],
)
def test_every_kind_of_suspicious_operation_has_its_status(exc, status, code):
    """Those no request of the API reaches on its own (its parser reads the body with
    its own limit), met by a project's middleware or a future view."""
    response = handle_exception(exc, {})
    assert response.status_code == status and response.data["error"]["code"] == code
    assert "anything else" not in response.data["error"]["message"]


def test_a_project_without_the_middleware_first_is_warned():
    without = [name for name in settings.MIDDLEWARE if name != MIDDLEWARE]
    assert check_api_middleware() == []
    for middleware, placed in ((without, "is missing"), ([*without, MIDDLEWARE], "is not first")):
        with override_settings(MIDDLEWARE=middleware):
            (warning,) = check_api_middleware()
        assert warning.id == "workflows.W008"
        assert warning.msg.startswith(f"{MIDDLEWARE} {placed} in MIDDLEWARE")
