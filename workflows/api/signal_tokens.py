"""``/signals/by-token/``: an outside system sends the one signal its token allows.

The token (``workflows.signal_token(run, signal)``) is the only credential: no account,
no session, so no CSRF. It travels in the body so that access logs never hold it, and
calls are throttled per client address, sharing the callbacks' budget
(``WORKFLOWS["API_CALLBACK_RATE"]``): both are the endpoints anyone may call.

Delivery is :func:`workflows.services.signal_tokens.send_signal_with_token`: 201 for a
new signal, 200 for a repeat (the same idempotency key, or the same token without one,
with the same payload), 409 ``idempotency_conflict`` for another payload. Refusals write
nothing: 403 ``signal_token_invalid``, ``signal_token_foreign`` or
``signal_token_wrong_signal``, 410 ``signal_token_expired``, 409 ``invalid_transition``
for a run that has ended, 429 ``throttled``.
"""

from __future__ import annotations

from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import serializers
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from workflows.api.base import TokenViewSet
from workflows.api.errors import error_responses
from workflows.api.runs import IDEMPOTENCY_HEADER, validated, with_idempotency_key
from workflows.api.schema import created_or_repeated
from workflows.api.serializers_runs import SignalSerializer
from workflows.api.strict import StrictCharField, StrictSerializer
from workflows.queries import signal_summary
from workflows.services.signal_tokens import send_signal_with_token_once


class SignalByTokenSerializer(StrictSerializer):
    token = StrictCharField(help_text="the token signal_token made, as it was given")
    payload = serializers.JSONField(
        required=False, default=None, allow_null=True, help_text="the signal's payload"
    )
    idempotency_key = StrictCharField(
        required=False,
        max_length=255,
        help_text="distinct keys send distinct signals with one token; without one, the "
        "token is the key and delivers one signal (instead of the Idempotency-Key header; "
        "both given must be equal)",
    )
    signal = StrictCharField(
        required=False,
        max_length=200,
        help_text="the signal meant; if it is not the one the token allows, 403 "
        "signal_token_wrong_signal and nothing is sent",
    )


_EXAMPLE = OpenApiExample(
    "a payment provider confirms a payment",
    value={
        "token": "<the token handed out by signal_token(run, 'payment_received')>",
        "payload": {"amount": "49.90", "reference": "PAY-1042"},
        "idempotency_key": "PAY-1042",
    },
    request_only=True,
)


class SignalTokenViewSet(TokenViewSet):
    """Send a signal with a signal token; no account is involved."""

    @extend_schema(
        parameters=[IDEMPOTENCY_HEADER],
        request=SignalByTokenSerializer,
        responses=created_or_repeated(
            SignalSerializer, error_responses(400, 403, 409, 410, 413, 429)
        ),
        examples=[_EXAMPLE],
    )
    @action(detail=False, methods=["post"], url_path="by-token")
    def by_token(self, request: Request) -> Response:
        """Send the signal the token allows to the run it names, with ``payload``."""
        body = validated(with_idempotency_key(request), SignalByTokenSerializer)
        token = body["token"]
        sent = send_signal_with_token_once(
            token, body["payload"], body.get("idempotency_key"), signal=body.get("signal")
        )
        return Response(
            SignalSerializer(signal_summary(sent.value)).data, status=201 if sent.created else 200
        )
