"""``/runs/``: start runs, list and inspect them, read their history, send them signals,
and operate them one by one or in bulk.

Every write goes through :mod:`workflows.services` (or :func:`workflows.bulk`) with the
caller as the actor; this module validates bodies, maps results to statuses and never
writes engine state itself.

Idempotent requests (starting a run, sending a signal) answer 201 when this request
created the row and 200 when it named an earlier request with the same body. A run's
start learns it from the engine's insert (``start_run_once``): of requests racing with
one new key exactly one says 201, and so does a signal's (``send_signal_once``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, TypedDict, TypeVar, cast
from uuid import UUID

from django_filters.rest_framework import DjangoFilterBackend
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import mixins, serializers
from rest_framework.decorators import action
from rest_framework.pagination import BasePagination
from rest_framework.request import Request
from rest_framework.response import Response

from workflows import services
from workflows.api import examples
from workflows.api.base import FlowsiteViewSet
from workflows.api.errors import APIError, error_responses
from workflows.api.events import RUN_EVENT_PARAMETERS, EventPageSerializer, run_events_page
from workflows.api.filters import RunFilter
from workflows.api.frames import FRAME_PARAMETERS, FramePageSerializer, step_frames_page
from workflows.api.ids import run_pk
from workflows.api.iterations import IterationSerializer, step_iterations_page
from workflows.api.long_poll import WAIT_PARAMETER, LongPollViews, timed_out, waiting
from workflows.api.pagination import InSequence, NewestFirst
from workflows.api.permissions import CanOperateRuns, CanStartRuns, CanViewRuns
from workflows.api.rounds import RoundSerializer, step_rounds_page
from workflows.api.schema import View, created_or_repeated, documented_action
from workflows.api.serializers_runs import (
    ActionSerializer,
    BulkResultSerializer,
    BulkSerializer,
    BusinessKeySerializer,
    CancelledRunSerializer,
    CancelSerializer,
    EmptySerializer,
    PolledRunSerializer,
    PrioritySerializer,
    ReasonSerializer,
    RerunSerializer,
    RetrySerializer,
    RunDetailSerializer,
    RunSerializer,
    SendSignalSerializer,
    SignalSerializer,
    StartRunSerializer,
)
from workflows.definitions import registry
from workflows.engine.guards import RUN_VERBS
from workflows.errors import DefinitionMissing, InvalidTransition
from workflows.models import Run
from workflows.queries import get_run, signal_summary
from workflows.queries.explain import explain
from workflows.queries.results import wait_for_run
from workflows.services import bulk as bulk_verbs
from workflows.status import RUN_FINAL, RunTrigger

if TYPE_CHECKING:
    from django_stubs_ext import WithAnnotations
    from rest_framework.decorators import ViewSetAction
    from rest_framework.permissions import _SupportsHasPermission

    from workflows.permissions import AnyUser
    from workflows.queries.explain import Explanation

    class _Explained(TypedDict):
        """What :func:`run_detail` sets on the run for :class:`RunDetailSerializer`."""

        explained: Explanation


T = TypeVar("T")

RUN_LIST_FIELDS = (
    "id",
    "workflow_name",
    "workflow_version",
    "status",
    "title",
    "trigger",
    "business_key",
    "dismissed_at",
    "tags",
    "subject_type",
    "subject_id",
    "parent_run",
    "created_at",
    "updated_at",
    "started_at",
    "finished_at",
    "deadline",
    "scheduled_for",
    "schedule__key",
)

IDEMPOTENCY_HEADER = OpenApiParameter(
    "Idempotency-Key",
    str,
    OpenApiParameter.HEADER,
    description="the same key with the same body returns the first result (200); "
    "with another body, 409 idempotency_conflict",
)


def validated(data: Any, serializer_class: type[serializers.Serializer]) -> dict[str, Any]:
    """The body checked by ``serializer_class``; a 400 ``validation_error`` otherwise."""
    serializer = serializer_class(data=data)
    serializer.is_valid(raise_exception=True)
    return dict(serializer.validated_data)


def with_idempotency_key(request: Request) -> Any:
    """The body, with the ``Idempotency-Key`` header as its ``idempotency_key`` field.

    The serializer then checks the key wherever it came from (a string, not blank, no
    NUL, at most the column's length). A body and a header naming different keys are
    a 400: neither can be assumed to be the one meant.
    """
    data = request.data
    header = request.headers.get("Idempotency-Key")
    if header is None or not isinstance(data, Mapping):
        return data
    if "idempotency_key" in data and data["idempotency_key"] != header:
        raise serializers.ValidationError(
            {
                "idempotency_key": [
                    "differs from the Idempotency-Key header; send one, or both equal"
                ]
            }
        )
    return {**data, "idempotency_key": header}


def refused_as_invalid_state(run_id: UUID, verb: Callable[[], T]) -> T:
    """Call ``verb``; if the run's (or step's) state refuses it, answer 409
    ``invalid_state`` with the run's ``allowed_actions`` now, so that the client learns
    what it may do instead of guessing. A refusal with a code of its own (a subclass of
    :class:`InvalidTransition`: ``dependency_unmet``) answers with that code."""
    try:
        return verb()
    except InvalidTransition as exc:
        actions = ActionSerializer(explain(run_id).allowed_actions, many=True).data
        code = "invalid_state" if exc.code == InvalidTransition.code else exc.code
        raise APIError(409, code, exc.message, {**exc.details, "allowed_actions": actions}) from exc


def run_detail(
    run_id: UUID, *, status: int = 200, already: bool | None = None, waited: float | None = None
) -> Response:
    """The run with ``explain``'s reading of it: what every run endpoint answers; after
    a cancel (``already`` given), also whether it had been cancelled already; after a
    long poll (``waited``: its ``wait`` in seconds, 0 for none), also whether the wait
    ran out before the run ended."""
    # Typed with the attribute the serializer reads, which the next line sets.
    run = cast(
        "WithAnnotations[Run, _Explained]",
        get_run(run_id, runs=Run.objects.select_related("created_by", "dismissed_by")),
    )
    run.explained = explain(run)
    if waited is not None:
        run.timed_out = timed_out(waited, run.status in RUN_FINAL)  # type: ignore[attr-defined]
        return Response(PolledRunSerializer(run).data, status=status)
    if already is None:
        return Response(RunDetailSerializer(run).data, status=status)
    run.already = already  # type: ignore[attr-defined]  # read by CancelledRunSerializer
    return Response(CancelledRunSerializer(run).data, status=status)


def _set_business_key(run_id: UUID, *, business_key: str, user: AnyUser) -> Run:
    """``services.set_business_key`` with the body's field as its key."""
    return services.set_business_key(run_id, business_key, user=user)


def _rerun(
    run_id: UUID,
    *,
    from_step: str,
    reason: str,
    user: AnyUser,
    deadline: timedelta | datetime | None = None,
) -> Run:
    return services.rerun_from(run_id, from_step, reason=reason, user=user, deadline=deadline)


def run_verb(
    name: str,
    body: type[serializers.Serializer],
    service: Callable[..., Run],
    example: dict[str, Any] | None = None,
) -> Callable[..., Response]:
    """The action ``POST /runs/{id}/<name>/``: ``service`` called with the body's options
    and the caller as the actor; the answer is the run after the verb (``example``: a
    request body for the schema)."""

    def verb(self: RunViewSet, request: Request, pk: str) -> Response:
        run = get_run(run_pk(pk))
        options = validated(request.data, body)
        refused_as_invalid_state(run.pk, lambda: service(run.pk, user=request.user, **options))
        return run_detail(run.pk)

    verb.__name__ = name  # the router and the schema name the action after the function
    verb.__doc__ = RUN_VERBS[name].summary.capitalize() + "."
    verb = action(detail=True, methods=["post"], permission_classes=[CanOperateRuns])(verb)
    return extend_schema(
        request=body,
        responses={200: RunDetailSerializer, **error_responses(400, 401, 403, 404, 409, 413)},
        examples=examples.request_examples((f"{name} a run", example)) if example else None,
    )(verb)


def _of_a_step(
    name: str, schema: dict[str, Any], *, pagination_class: type[BasePagination] | None
) -> Callable[[View], ViewSetAction[View]]:
    """The route of a read of one step's ``name`` (``GET /runs/<id>/steps/<step>/<name>/``),
    paged by ``pagination_class``, unfiltered, with its ``schema``."""
    return documented_action(
        schema,
        detail=True,
        methods=["get"],
        url_path=rf"steps/(?P<step>[^/]+)/{name}",
        filter_backends=[],
        pagination_class=pagination_class,
    )


@extend_schema_view(
    list=extend_schema(
        responses={200: RunSerializer(many=True), **error_responses(400, 401, 403, 404)}
    )
)
class RunViewSet(LongPollViews, mixins.ListModelMixin, FlowsiteViewSet):
    """Runs: start, list, inspect, history, signals and operator verbs."""

    long_poll_actions = frozenset({"retrieve", "events", "frames"})
    permission_classes = [CanViewRuns]
    serializer_class = RunSerializer
    pagination_class = NewestFirst
    filter_backends = [DjangoFilterBackend]
    filterset_class = RunFilter
    # The list reads only these columns: inputs, outputs and snapshots can be large.
    queryset = Run.objects.select_related("schedule").only(*RUN_LIST_FIELDS)
    # Anything up to the next slash, so that a malformed id is a 404 run_not_found.
    lookup_value_regex = r"[^/]+"

    def get_permissions(self) -> Sequence[_SupportsHasPermission]:
        if self.action == "create":
            return [CanStartRuns()]
        return super().get_permissions()

    @extend_schema(
        parameters=[IDEMPOTENCY_HEADER],
        request=StartRunSerializer,
        examples=examples.request_examples(
            ("Start an order (demo: order_fulfilment)", examples.START_ORDER),
            ("Start a dispatch (demo: warehouse_dispatch)", examples.START_DISPATCH),
        ),
        responses=created_or_repeated(
            RunDetailSerializer, error_responses(400, 401, 403, 404, 409, 413)
        ),
    )
    def create(self, request: Request) -> Response:
        """Start a run of the latest version of a registered workflow."""
        start = validated(with_idempotency_key(request), StartRunSerializer)
        try:
            definition = registry.latest(start["workflow"])
        except DefinitionMissing as exc:
            raise APIError(404, "workflow_not_found", exc.message, exc.details) from exc
        started = services.start_run_once(
            definition,
            start["input"],
            idempotency_key=start.get("idempotency_key"),
            business_key=start.get("business_key"),
            user=request.user,
            priority=start.get("priority"),
            deadline=start.get("deadline"),
            variables=start.get("variables"),
            title=start.get("title", ""),
            trigger=RunTrigger.API,
            tags=start.get("tags"),
        )
        # 201 only for the request whose insert created the run, even under a race.
        return run_detail(started.value.pk, status=201 if started.created else 200)

    @extend_schema(
        parameters=[WAIT_PARAMETER],
        responses={200: PolledRunSerializer, **error_responses(400, 401, 403, 404, 429)},
    )
    def retrieve(self, request: Request, pk: str) -> Response:
        """A run with its steps, what it waits on and what may be done about it.

        With ``wait=S``, a long poll: answers as soon as the run is in a final status, or
        after ``S`` seconds with its current state and ``timed_out: true``."""
        run_id = run_pk(pk)
        with waiting(request) as seconds:
            if seconds:
                wait_for_run(run_id, seconds)
        return run_detail(run_id, waited=seconds)

    @extend_schema(
        parameters=RUN_EVENT_PARAMETERS,
        responses={200: EventPageSerializer, **error_responses(400, 401, 403, 404, 429)},
    )
    @action(detail=True, methods=["get"], filter_backends=[], pagination_class=None)
    def events(self, request: Request, pk: str) -> Response:
        """The run's history in commit order; ``after_seq`` starts after the last event
        received, ``wait`` long-polls for the next (:mod:`workflows.api.events`)."""
        return run_events_page(request, get_run(run_pk(pk)).pk)

    @_of_a_step(
        "frames",
        {
            "parameters": FRAME_PARAMETERS,
            "responses": {200: FramePageSerializer, **error_responses(400, 401, 403, 404, 429)},
        },
        pagination_class=None,
    )
    def frames(self, request: Request, pk: str, step: str) -> Response:
        """A step's log frames after the ``after`` cursor; ``wait`` long-polls for the
        next (:mod:`workflows.api.frames`)."""
        return step_frames_page(request, get_run(run_pk(pk)), step)

    @_of_a_step(
        "iterations",
        {"responses": {200: IterationSerializer(many=True), **error_responses(400, 401, 403, 404)}},
        pagination_class=InSequence,
    )
    def iterations(self, request: Request, pk: str, step: str) -> Response:
        """Every iteration of a step a loop ran again, oldest first, its current one last
        (:mod:`workflows.api.iterations`)."""
        return step_iterations_page(request, self, get_run(run_pk(pk)), step)

    @_of_a_step(
        "rounds",
        {"responses": {200: RoundSerializer(many=True), **error_responses(400, 401, 403, 404)}},
        pagination_class=InSequence,
    )
    def rounds(self, request: Request, pk: str, step: str) -> Response:
        """Every round of a step (a rerun, a retry or a loop's next iteration starts
        one), oldest first, its current one last, with the telemetry each reported
        (:mod:`workflows.api.rounds`)."""
        return step_rounds_page(request, self, get_run(run_pk(pk)), step)

    @extend_schema(
        parameters=[IDEMPOTENCY_HEADER],
        request=SendSignalSerializer,
        responses=created_or_repeated(
            SignalSerializer, error_responses(400, 401, 403, 404, 409, 413)
        ),
    )
    @action(detail=True, methods=["post"], permission_classes=[CanOperateRuns])
    def signals(self, request: Request, pk: str) -> Response:
        """Send a signal, kept until a WaitForSignal step of the run consumes it."""
        run = get_run(run_pk(pk))
        sent = validated(with_idempotency_key(request), SendSignalSerializer)
        key = sent.get("idempotency_key")
        signal = refused_as_invalid_state(
            run.pk,
            lambda: services.send_signal_once(
                run, sent["name"], sent["payload"], idempotency_key=key, user=request.user
            ),
        )
        # 201 only for the request whose insert created the signal, even under a race.
        return Response(
            SignalSerializer(signal_summary(signal.value)).data,
            status=201 if signal.created else 200,
        )

    @extend_schema(
        request=CancelSerializer,
        responses={200: CancelledRunSerializer, **error_responses(400, 401, 403, 404, 409, 413)},
        examples=examples.request_examples(("cancel a run", examples.CANCEL)),
    )
    @action(detail=True, methods=["post"], permission_classes=[CanOperateRuns])
    def cancel(self, request: Request, pk: str) -> Response:
        """Stop the run and compensate what it completed.

        Idempotent: a run already cancelling, cancelled or terminated is answered as it
        is, 200 with ``"already": true``, and nothing is recorded; ``"already": false``
        when this request cancelled it. A run that ended otherwise is a 409.
        """
        run = get_run(run_pk(pk))
        options = validated(request.data, CancelSerializer)
        outcome = refused_as_invalid_state(
            run.pk, lambda: services.request_cancel(run.pk, user=request.user, **options)
        )
        return run_detail(run.pk, already=outcome.already)

    terminate = run_verb("terminate", ReasonSerializer, services.terminate_run, examples.REASON)
    pause = run_verb("pause", ReasonSerializer, services.pause_run, examples.REASON)
    resume = run_verb("resume", EmptySerializer, services.resume_run)
    retry = run_verb("retry", RetrySerializer, services.retry_run)
    rerun = run_verb("rerun", RerunSerializer, _rerun, examples.RERUN)
    priority = run_verb("priority", PrioritySerializer, services.change_priority, examples.PRIORITY)
    business_key = run_verb(
        "business_key", BusinessKeySerializer, _set_business_key, examples.BUSINESS_KEY
    )
    dismiss = run_verb("dismiss", EmptySerializer, services.dismiss_run)
    undismiss = run_verb("undismiss", EmptySerializer, services.undismiss_run)

    @extend_schema(
        request=BulkSerializer,
        responses={200: BulkResultSerializer, **error_responses(400, 401, 403, 413)},
    )
    @action(
        detail=False,
        methods=["post"],
        url_path=r"bulk/(?P<verb>[^/]+)",
        permission_classes=[CanOperateRuns],
    )
    def bulk(self, request: Request, verb: str) -> Response:
        """Apply a run verb to listed or filtered runs, each in its own transaction; by
        default a dry run that only says which runs the verb would act on."""
        order = validated(request.data, BulkSerializer)
        options = {name: order[name] for name in bulk_verbs.VERB_OPTIONS if name in order}
        if "ids" in order:
            runs: Any = order["ids"]
        else:
            selection = order["filter"]
            runs = bulk_verbs.select_runs(
                statuses=selection.get("status", ()),
                workflow=selection.get("workflow"),
                older_than=selection.get("older_than"),
                business_key=selection.get("business_key"),
            )
        result = bulk_verbs.bulk(verb, runs, dry_run=order["dry_run"], user=request.user, **options)
        body = {
            "verb": result.verb,
            "dry_run": result.dry_run,
            "totals": result.totals(),
            "runs": [item._asdict() for item in result.items],
        }
        return Response(BulkResultSerializer(body).data)
