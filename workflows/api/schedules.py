"""``/schedules/``: schedules that start runs on a calendar, and the verbs on them.

Every write goes through :mod:`workflows.services.schedules` with the caller as the
actor; who may call each is the verb table (:data:`workflows.services.access.VERBS`):
Django's model permissions on schedules, and for triggering and backfilling, which
start runs now, ``workflows.start_run`` besides. Reading needs viewing runs or
Django's view permission on schedules.

Creating is idempotent on ``key``: 201 for the request whose insert made the schedule,
200 with the same schedule for the same specification again, 409
``idempotency_conflict`` for another (change it with ``PATCH``). A specification the
service refuses (a bad cron expression, an unknown zone, a non-positive interval, both
or neither of ``cron`` and ``every``, an input the workflow does not take) is a 400
``invalid_input`` naming the field; an unknown key is a 404 ``schedule_not_found``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, cast

from django.db.models import QuerySet
from django_filters import rest_framework as filters
from django_filters.rest_framework import DjangoFilterBackend
from drf_spectacular.utils import extend_schema
from rest_framework.decorators import action
from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.response import Response

from workflows.api.base import FlowsiteViewSet
from workflows.api.errors import error_responses
from workflows.api.examples import request_examples
from workflows.api.pagination import InSequence
from workflows.api.permissions import (
    CanAddSchedules,
    CanChangeSchedules,
    CanDeleteSchedules,
    CanStartScheduledRuns,
    CanViewSchedules,
)
from workflows.api.runs import run_detail, validated
from workflows.api.schema import created_or_repeated
from workflows.api.serializers_runs import EmptySerializer, RunDetailSerializer
from workflows.api.serializers_schedules import (
    BackfillResultSerializer,
    BackfillSerializer,
    CreateScheduleSerializer,
    PauseScheduleSerializer,
    ScheduleSerializer,
    UpdateScheduleSerializer,
)
from workflows.engine.sql.clock import database_now
from workflows.models import Schedule
from workflows.queries.schedules import list_schedules, schedule_facts
from workflows.services import schedules as schedule_verbs
from workflows.services.access import VERBS, Access

if TYPE_CHECKING:
    from rest_framework.permissions import _SupportsHasPermission

# Request bodies for the schema, runnable in this order against the demo project.
CREATE_NIGHTLY = {
    "key": "nightly-import",
    "workflow": "flaky_import",
    "cron": "0 2 * * *",
    "tz": "Europe/Berlin",
    "input": {"rows": 25},
    "overlap": "skip",
}
CREATE_EVERY = {
    "key": "dispatch-sweep",
    "workflow": "flaky_import",
    "every": "PT15M",
    "input": {"rows": 5},
    "catchup_window": 600,
}
CHANGE_SCHEDULE = {"cron": "30 3 * * 1-5", "overlap": "buffer_one"}
PAUSE = {"note": "the import source is down for maintenance"}
BACKFILL = {"start": "2026-01-05T00:00:00Z", "end": "2026-01-08T00:00:00Z", "dry_run": True}

_PERMISSION_OF: dict[Access, type[BasePermission]] = {
    permission.access: permission
    for permission in (
        CanViewSchedules,
        CanAddSchedules,
        CanChangeSchedules,
        CanDeleteSchedules,
        CanStartScheduledRuns,
    )
}
# The verb table's row of each action that writes.
_VERB_OF = {
    "create": "create_schedule",
    "partial_update": "update_schedule",
    "destroy": "delete_schedule",
    "pause": "pause_schedule",
    "unpause": "unpause_schedule",
    "trigger": "trigger_schedule",
    "backfill": "backfill_schedule",
}
_READ_ERRORS = error_responses(401, 403, 404)
_CHANGE_ERRORS = error_responses(400, 401, 403, 404, 409, 413)


def answer(schedule: Schedule, *, status: int = 200) -> Response:
    """The schedule, read again: what the schedule endpoints answer."""
    fresh = list_schedules().get(pk=schedule.pk)
    return Response(ScheduleSerializer(schedule_facts(fresh)).data, status=status)


class ScheduleFilter(filters.FilterSet):
    workflow = filters.CharFilter(field_name="workflow_name", help_text="the workflow's name")
    paused = filters.BooleanFilter(help_text="true: paused schedules only; false: running")

    class Meta:
        model = Schedule
        fields = ["workflow", "paused"]


class ScheduleViewSet(FlowsiteViewSet):
    """Schedules: list, create, read, change, delete, pause, unpause, trigger, backfill."""

    permission_classes = [CanViewSchedules]
    serializer_class = ScheduleSerializer
    pagination_class = InSequence
    filter_backends = [DjangoFilterBackend]
    filterset_class = ScheduleFilter
    lookup_field = "key"
    # Anything up to the next slash (a key holds none), so an unknown key is a 404.
    lookup_value_regex = r"[^/]+"

    def get_queryset(self) -> QuerySet[Schedule]:
        return list_schedules()

    def get_permissions(self) -> Sequence[_SupportsHasPermission]:
        verb = _VERB_OF.get(self.action or "")
        if verb is None:
            return super().get_permissions()
        return [_PERMISSION_OF[VERBS[verb]]()]

    @extend_schema(responses={200: ScheduleSerializer(many=True), **error_responses(400, 401, 403)})
    def list(self, request: Request) -> Response:
        """Schedules in the order they were made, with their next three slots."""
        page = self.paginate_queryset(self.filter_queryset(self.get_queryset()))
        # Never None: pagination_class is set.
        schedules = cast(list[Schedule], page)
        now = database_now()
        bodies = [schedule_facts(schedule, now) for schedule in schedules]
        return self.get_paginated_response(ScheduleSerializer(bodies, many=True).data)

    @extend_schema(
        request=CreateScheduleSerializer,
        examples=request_examples(
            ("Every night at 02:00 Berlin time", CREATE_NIGHTLY),
            ("Every 15 minutes", CREATE_EVERY),
        ),
        responses=created_or_repeated(ScheduleSerializer, _CHANGE_ERRORS),
    )
    def create(self, request: Request) -> Response:
        """Create a schedule; the same key and specification again answer it (200)."""
        body = validated(request.data, CreateScheduleSerializer)
        made = schedule_verbs.create_schedule_once(
            body.pop("workflow"), key=body.pop("key"), user=request.user, **body
        )
        # 201 only for the request whose insert created the schedule, even under a race.
        return answer(made.value, status=201 if made.created else 200)

    @extend_schema(responses={200: ScheduleSerializer, **_READ_ERRORS})
    def retrieve(self, request: Request, key: str) -> Response:
        """The schedule, its calendar in words and its next three slots."""
        return answer(schedule_verbs.get_schedule(key))

    @extend_schema(
        request=UpdateScheduleSerializer,
        examples=request_examples(("Weekdays at 03:30, one run waiting", CHANGE_SCHEDULE)),
        responses={200: ScheduleSerializer, **_CHANGE_ERRORS},
    )
    def partial_update(self, request: Request, key: str) -> Response:
        """Change the schedule; a changed calendar starts from its first slot after now."""
        schedule = schedule_verbs.get_schedule(key)
        changes = validated(request.data, UpdateScheduleSerializer)
        return answer(schedule_verbs.update_schedule(schedule, user=request.user, **changes))

    @extend_schema(responses={200: ScheduleSerializer, **_READ_ERRORS})
    def destroy(self, request: Request, key: str) -> Response:
        """Delete the schedule (its runs and history stay): the schedule as it was."""
        schedule = schedule_verbs.get_schedule(key)
        body = schedule_facts(schedule)
        schedule_verbs.delete_schedule(schedule, user=request.user)
        return Response(ScheduleSerializer(body).data)

    @extend_schema(
        request=PauseScheduleSerializer,
        examples=request_examples(("Pause with a note", PAUSE)),
        responses={200: ScheduleSerializer, **_CHANGE_ERRORS},
    )
    @action(detail=True, methods=["post"])
    def pause(self, request: Request, key: str) -> Response:
        """No slot starts until unpaused; the note says why."""
        schedule = schedule_verbs.get_schedule(key)
        body = validated(request.data, PauseScheduleSerializer)
        return answer(schedule_verbs.pause_schedule(schedule, body["note"], user=request.user))

    @extend_schema(request=EmptySerializer, responses={200: ScheduleSerializer, **_CHANGE_ERRORS})
    @action(detail=True, methods=["post"])
    def unpause(self, request: Request, key: str) -> Response:
        """Resume from the next slot after now; slots passed while paused are not caught up."""
        schedule = schedule_verbs.get_schedule(key)
        validated(request.data, EmptySerializer)
        return answer(schedule_verbs.unpause_schedule(schedule, user=request.user))

    @extend_schema(request=EmptySerializer, responses={201: RunDetailSerializer, **_CHANGE_ERRORS})
    @action(detail=True, methods=["post"])
    def trigger(self, request: Request, key: str) -> Response:
        """Start one run now, outside the slot sequence, paused or not: the run (201)."""
        schedule = schedule_verbs.get_schedule(key)
        validated(request.data, EmptySerializer)
        run = schedule_verbs.trigger_schedule(schedule, user=request.user)
        return run_detail(run.pk, status=201)

    @extend_schema(
        request=BackfillSerializer,
        examples=request_examples(("Count the slots of three days", BACKFILL)),
        responses={200: BackfillResultSerializer, **_CHANGE_ERRORS},
    )
    @action(detail=True, methods=["post"])
    def backfill(self, request: Request, key: str) -> Response:
        """One run per slot in [start, end) that has none; the same range again starts
        nothing new. With dry_run, the counts alone."""
        schedule = schedule_verbs.get_schedule(key)
        body = validated(request.data, BackfillSerializer)
        done = schedule_verbs.backfill_schedule(
            schedule, body["start"], body["end"], dry_run=body["dry_run"], user=request.user
        )
        result = {
            "slots": done.slots,
            "started": [run.pk for run in done.started],
            "existing": done.existing,
            "would_start": done.would_start,
        }
        return Response(BackfillResultSerializer(result).data)
