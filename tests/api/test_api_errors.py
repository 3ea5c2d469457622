"""The error envelope for what no endpoint test reaches on purpose: a database that
stays locked past its busy timeout, a database error that is a bug, retryable errors."""

from __future__ import annotations

import pytest
from django.db import OperationalError

from workflows import errors
from workflows.api.errors import handle_exception


def test_a_database_that_stays_locked_is_a_503_the_client_may_retry():
    response = handle_exception(OperationalError("database is locked"), {})
    assert response is not None
    assert response.status_code == 503
    assert response["Retry-After"] == "1"
    assert response.data["error"]["code"] == "database_busy"
    assert response.data["error"]["retryable"] is True


def test_other_database_errors_are_left_to_django_and_logged_as_bugs():
    assert handle_exception(OperationalError("no such column: x"), {}) is None


def test_an_engine_error_keeps_its_code_and_details():
    response = handle_exception(
        errors.IdempotencyConflict("key reused", run="r-1", idempotency_key="k"), {}
    )
    assert response.status_code == 409
    assert response.data["error"] == {
        "code": "idempotency_conflict",
        "message": "key reused",
        "details": {"run": "r-1", "idempotency_key": "k"},
        "retryable": False,
    }


def test_a_run_held_elsewhere_is_retryable():
    response = handle_exception(errors.RunBusy("held"), {})
    assert (response.status_code, response.data["error"]["retryable"]) == (409, True)


@pytest.mark.django_db
def test_a_body_nested_deeper_than_the_parser_follows_is_malformed_not_a_crash(api):
    deep = "[" * 100_000 + "]" * 100_000  # well under the size limit
    response = api("starter").post("/api/runs/", data=deep, content_type="application/json")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "malformed_request"
