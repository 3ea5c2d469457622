"""One error format for every response: ``{"error": {code, message, details, retryable}}``.

The engine's errors keep their stable ``code``; each maps to one HTTP status here.
Django REST framework's own errors (bad JSON, missing credentials, throttling, ...) are
reworded into the same envelope, and SQLite staying locked becomes a 503 with
``Retry-After`` rather than a 500. Django's ``SuspiciousOperation`` (more than
``DATA_UPLOAD_MAX_NUMBER_FIELDS`` query parameters, a form body over
``DATA_UPLOAD_MAX_MEMORY_SIZE``, a disallowed ``Host``) is the client's doing, so a 4xx
here, whether a view meets it or :mod:`workflows.api.middleware` does before one.
"""

from __future__ import annotations

import logging
from typing import Any

from django.core.exceptions import (
    PermissionDenied as DjangoPermissionDenied,
    RequestDataTooBig,
    SuspiciousOperation,
    TooManyFieldsSent,
    TooManyFilesSent,
)
from django.db import OperationalError
from django.http import Http404
from drf_spectacular.utils import OpenApiResponse
from rest_framework import exceptions, serializers, status
from rest_framework.response import Response

from workflows import errors

logger = logging.getLogger("workflows.api")

# The HTTP status of each engine error; anything not listed is a 400.
_STATUS_OF: list[tuple[type[errors.WorkflowError], int]] = [
    (errors.RunNotFound, status.HTTP_404_NOT_FOUND),
    (errors.StepNotFound, status.HTTP_404_NOT_FOUND),
    (errors.DefinitionMissing, status.HTTP_404_NOT_FOUND),
    (errors.FlowNotFound, status.HTTP_404_NOT_FOUND),
    (errors.ScheduleNotFound, status.HTTP_404_NOT_FOUND),
    (errors.ConsumerNotFound, status.HTTP_404_NOT_FOUND),
    # Too many long polls of one user at once: retry when one has answered.
    (errors.TooManyWaits, status.HTTP_429_TOO_MANY_REQUESTS),
    (errors.CallbackExpired, status.HTTP_410_GONE),
    (errors.InvalidCallbackToken, status.HTTP_403_FORBIDDEN),
    # A signal token: expired is gone for good; the others do not allow this request.
    (errors.SignalTokenExpired, status.HTTP_410_GONE),
    (errors.SignalTokenRefused, status.HTTP_403_FORBIDDEN),
    (errors.IdempotencyConflict, status.HTTP_409_CONFLICT),
    (errors.InvalidTransition, status.HTTP_409_CONFLICT),
    (errors.GateClaimed, status.HTTP_409_CONFLICT),
    (errors.InvalidFlowChange, status.HTTP_409_CONFLICT),
    # Gate decided, lease lost, callback used; a flow's graph moved past the revision
    # an edge was staged against (stale_revision, with the current revision).
    (errors.StaleState, status.HTTP_409_CONFLICT),
]
# Django's refusals of a request it will not read, each as (status, code, message).
_SUSPICIOUS: list[tuple[type[SuspiciousOperation], int, str, str]] = [
    (
        TooManyFieldsSent,
        status.HTTP_400_BAD_REQUEST,
        "too_many_parameters",
        "the request has more parameters than the server reads",
    ),
    (
        TooManyFilesSent,
        status.HTTP_400_BAD_REQUEST,
        "too_many_parameters",
        "the request has more files than the server reads",
    ),
    (
        RequestDataTooBig,
        status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
        "payload_too_large",
        "the request body is larger than the server reads",
    ),
]
# Errors a client may retry as they are (the state may have moved on by then).
_RETRYABLE = (errors.RunBusy, errors.TooManyWaits)
# Engine codes the API spells as its callers know them (the names); the
# engine's own code stays in ``details.engine_code`` for operators grepping logs.
_API_CODE_OF: list[tuple[type[errors.WorkflowError], str]] = [
    (errors.CallbackAlreadyUsed, "token_used"),
    (errors.CallbackExpired, "token_expired"),
]


class APIError(exceptions.APIException):
    """An error of the API itself (not of the engine) with a stable code."""

    def __init__(
        self, status_code: int, code: str, message: str, details: dict[str, Any] | None = None
    ) -> None:
        super().__init__(detail=message, code=code)
        self.status_code = status_code
        self.error_code = code
        self.details = details or {}


class ErrorBodySerializer(serializers.Serializer):
    code = serializers.CharField(help_text="stable: what clients branch on")
    message = serializers.CharField(help_text="for people; may change")
    details = serializers.JSONField(help_text="per field for validation_error, else context")
    retryable = serializers.BooleanField(help_text="whether the same request may succeed later")


class ErrorSerializer(serializers.Serializer):
    """The envelope of every error response, for the OpenAPI schema."""

    error = ErrorBodySerializer()


def error_responses(*statuses: int) -> dict[int, OpenApiResponse]:
    """``extend_schema(responses=...)`` entries: each status answered with the envelope."""
    return {code: OpenApiResponse(ErrorSerializer) for code in statuses}


def envelope(code: str, message: str, details: Any = None, *, retryable: bool = False) -> dict:
    """The body of an error response."""
    return {
        "error": {
            "code": code,
            "message": message,
            "details": details if details is not None else {},
            "retryable": retryable,
        }
    }


def error_response(
    status_code: int,
    code: str,
    message: str,
    details: Any = None,
    *,
    retryable: bool = False,
    headers: dict[str, str] | None = None,
) -> Response:
    body = envelope(code, message, details, retryable=retryable)
    return Response(body, status=status_code, headers=headers)


def suspicious(exc: SuspiciousOperation) -> tuple[int, dict]:
    """The status and body answering a request Django refused to read.

    The exception's own text is not echoed (for a disallowed host it repeats the header
    the client sent); it goes to the ``django.security`` logger, as Django logs the
    ones it answers itself.
    """
    logging.getLogger(f"django.security.{type(exc).__name__}").error(str(exc))
    for kind, status_code, code, message in _SUSPICIOUS:
        if isinstance(exc, kind):
            return status_code, envelope(code, message)
    return status.HTTP_400_BAD_REQUEST, envelope(
        "bad_request", "the request was refused as malformed"
    )


def handle_exception(exc: Exception, context: dict[str, Any]) -> Response | None:
    """DRF exception handler: every error the API can meet, in the one envelope."""
    if isinstance(exc, errors.DatabaseBusy) or (
        isinstance(exc, OperationalError) and "locked" in str(exc)
    ):
        return error_response(
            503,
            "database_busy",
            "the database is busy; try again shortly",
            retryable=True,
            headers={"Retry-After": "1"},
        )
    if isinstance(exc, errors.WorkflowError):
        return _workflow_error(exc)
    if isinstance(exc, APIError):
        return error_response(exc.status_code, exc.error_code, str(exc.detail), exc.details)
    if isinstance(exc, Http404):
        return error_response(404, "not_found", str(exc) or "not found")
    if isinstance(exc, SuspiciousOperation):
        status_code, body = suspicious(exc)
        return Response(body, status=status_code)
    if isinstance(exc, DjangoPermissionDenied):
        return error_response(403, "permission_denied", str(exc) or "permission denied")
    if isinstance(exc, exceptions.APIException):
        return _drf_error(exc)
    return None  # a bug: Django's 500 handling logs it


def _workflow_error(exc: errors.WorkflowError) -> Response:
    status_code = next(
        (code for kind, code in _STATUS_OF if isinstance(exc, kind)), status.HTTP_400_BAD_REQUEST
    )
    details = {key: _jsonable(value) for key, value in exc.details.items()}
    code = next((api_code for kind, api_code in _API_CODE_OF if isinstance(exc, kind)), exc.code)
    if code != exc.code:
        details["engine_code"] = exc.code
    headers = {"Retry-After": "1"} if isinstance(exc, errors.TooManyWaits) else None
    return error_response(
        status_code,
        code,
        exc.message,
        details,
        retryable=isinstance(exc, _RETRYABLE),
        headers=headers,
    )


def _drf_error(exc: exceptions.APIException) -> Response:
    headers = {}
    auth_header = getattr(exc, "auth_header", None)  # set by DRF for a missing or bad credential
    if auth_header:
        headers["WWW-Authenticate"] = auth_header
    if isinstance(exc, exceptions.Throttled):
        # Throttled.__init__ sets wait; the stubs omit it.
        wait: float | None = exc.wait  # type: ignore[attr-defined]
        if wait is not None:
            headers["Retry-After"] = str(int(wait) + 1)
    if isinstance(exc, exceptions.ValidationError):
        return error_response(
            400, "validation_error", "the request is not valid; see details", exc.detail
        )
    code = {
        exceptions.NotAuthenticated: "not_authenticated",
        exceptions.AuthenticationFailed: "authentication_failed",
        exceptions.PermissionDenied: "permission_denied",
        exceptions.NotFound: "not_found",
        exceptions.MethodNotAllowed: "method_not_allowed",
        exceptions.NotAcceptable: "not_acceptable",
        exceptions.UnsupportedMediaType: "unsupported_media_type",
        exceptions.ParseError: "malformed_request",
        exceptions.Throttled: "throttled",
    }.get(type(exc), str(exc.default_code))
    return error_response(
        exc.status_code,
        code,
        str(exc.detail),
        retryable=isinstance(exc, exceptions.Throttled),
        headers=headers,
    )


def _jsonable(value: Any) -> Any:
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    if isinstance(value, list | tuple):
        return [_jsonable(item) for item in value]
    if isinstance(value, dict):
        return {str(key): _jsonable(item) for key, item in value.items()}
    return str(value)
