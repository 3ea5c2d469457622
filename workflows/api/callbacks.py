"""``/callbacks/``: external systems resolve the tasks that parked behind a token.

A task handler returns ``ctx.await_callback(...)`` and hands its token to another
system, which answers here: ``complete`` with the output, ``fail`` with an error,
``heartbeat`` to ask whether it should go on. The signed token is the only credential
(no account, no session, so no CSRF), it travels in the body so that access logs never
hold it, and calls are throttled per client address.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from workflows import services
from workflows.api.base import TokenViewSet
from workflows.api.errors import error_responses
from workflows.api.schema import View, documented_action
from workflows.api.strict import StrictCharField, StrictSerializer
from workflows.engine.nodes.callback import read_token
from workflows.models import Step
from workflows.status import RUN_ALIVE, RunStatus, StepStatus

if TYPE_CHECKING:
    from rest_framework.decorators import ViewSetAction


def callback_state(claims: dict[str, Any]) -> dict[str, Any]:
    """Where the run and step a token names stand, and whether the caller should stop.

    ``cancel_requested`` is true exactly when the engine would now refuse the token's
    completion: the run is over or unwinding (cancelling, cancelled, terminated, failed,
    compensating, ...), or the step no longer waits for this attempt (resolved, timed
    out, retried). A step that is gone (its run purged) is a stop too. One SELECT; reads
    only, so it never competes with the transitions it reports on.
    """
    row = (
        Step.objects.filter(pk=claims["s"]).values_list("status", "attempt", "run__status").first()
    )
    step_status, attempt, run_status = row if row is not None else (None, None, None)
    waits = attempt == claims["a"] and step_status in (StepStatus.WAITING, StepStatus.RUNNING)
    return {
        "run": claims["r"],
        "step": claims["s"],
        "attempt": claims["a"],
        "step_status": step_status,
        "run_status": run_status,
        "cancel_requested": not (waits and run_status in RUN_ALIVE),
    }


class TokenSerializer(StrictSerializer):
    token = StrictCharField(help_text="the token the task handed out, as it was given")


class CompleteSerializer(TokenSerializer):
    output = serializers.JSONField(
        required=False, default=None, allow_null=True, help_text="the task's output"
    )


class FailSerializer(TokenSerializer):
    error = StrictCharField(allow_blank=True, help_text="why the work failed")


class CallbackStateSerializer(serializers.Serializer):
    run = serializers.UUIDField()
    step = serializers.IntegerField()
    attempt = serializers.IntegerField()
    step_status = serializers.ChoiceField(choices=StepStatus.choices, allow_null=True)
    run_status = serializers.ChoiceField(choices=RunStatus.choices, allow_null=True)


class HeartbeatSerializer(CallbackStateSerializer):
    cancel_requested = serializers.BooleanField(
        help_text="stop the work: the run is no longer waiting for this attempt's result"
    )


# A used token and a lost lease are conflicts only of a resolution, not of a heartbeat.
_RESOLVE_ERRORS = error_responses(400, 403, 409, 410, 413, 429)


def _resolution(
    body_class: type[TokenSerializer],
) -> Callable[[View], ViewSetAction[View]]:
    """The route and schema of a resolution: ``POST /callbacks/<verb>/`` with a
    ``body_class`` body, answered with where the run and step stand."""

    schema = {"request": body_class, "responses": {200: CallbackStateSerializer, **_RESOLVE_ERRORS}}
    return documented_action(schema, detail=False, methods=["post"])


class CallbackViewSet(TokenViewSet):
    """Resolve or ask about a parked task by its token; no account is involved."""

    @_resolution(CompleteSerializer)
    def complete(self, request: Request) -> Response:
        """Complete the parked attempt with ``output``; the run moves on."""
        return self._resolve(CompleteSerializer, services.complete_callback, "output")

    @_resolution(FailSerializer)
    def fail(self, request: Request) -> Response:
        """Fail the parked attempt; it is retried per the task's policy."""
        return self._resolve(FailSerializer, services.fail_callback, "error")

    @extend_schema(
        request=TokenSerializer,
        responses={200: HeartbeatSerializer, **error_responses(400, 403, 410, 413, 429)},
    )
    @action(detail=False, methods=["post"])
    def heartbeat(self, request: Request) -> Response:
        """Ask whether the run still waits for this work; changes nothing."""
        _body, claims = self._token(TokenSerializer)
        return Response(HeartbeatSerializer(callback_state(claims)).data)

    def _resolve(
        self, body_class: type[TokenSerializer], resolve: Callable[[str, Any], None], field: str
    ) -> Response:
        """Resolve the attempt the body's token names with the body's ``field``; answer
        where its run and step stand then."""
        body, claims = self._token(body_class)
        resolve(body["token"], body[field])
        return Response(CallbackStateSerializer(callback_state(claims)).data)

    def _token(
        self, serializer_class: type[TokenSerializer]
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """The validated body and its token's claims (run, step, attempt); a bad or
        expired token raises here, before any service is called."""
        body = serializer_class(data=self.request.data)
        body.is_valid(raise_exception=True)
        return body.validated_data, read_token(body.validated_data["token"])
