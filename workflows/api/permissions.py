"""Who may do what over HTTP: viewing, starting and operating runs are separate.

Starting and operating ask the verb table (:mod:`workflows.services.access`). Deciding
a gate needs no model permission: the gate's own rule (its permission or assignees,
:mod:`workflows.approvals`) is checked by the service, per gate.
"""

from __future__ import annotations

from typing import Any, ClassVar

from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.views import APIView

from workflows.services.access import (
    ADD_SCHEDULES,
    BUILD_FLOWS,
    CHANGE_SCHEDULES,
    DELETE_SCHEDULES,
    EXTERNAL_WORK,
    MANAGE_EVENT_CONSUMERS,
    OPERATE_RUNS,
    START_RUNS,
    START_SCHEDULED_RUNS,
    VIEW_RUNS,
    VIEW_SCHEDULES,
    Access,
)


class _HasPermission(BasePermission):
    """Allows who the verb table's row :attr:`access` allows; a subclass names the row,
    and its ``permission`` and refusal ``message`` are the row's."""

    access: ClassVar[Access] = VIEW_RUNS
    permission: ClassVar[str | None]
    message: ClassVar[str]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.permission = cls.access.permission
        cls.message = cls.access.refusal

    def has_permission(self, request: Request, view: APIView) -> bool:
        return self.access.allows(request.user)


class CanViewRuns(_HasPermission):
    """Read runs, steps, items and events (Django's ``workflows.view_run``)."""

    access = VIEW_RUNS


class CanStartRuns(_HasPermission):
    """Start runs of registered workflows (``workflows.start_run``)."""

    access = START_RUNS


class CanBuildFlows(_HasPermission):
    """Create a flow, add members and edges, change joins, seal it (``workflows.start_run``:
    a flow starts its members as runs)."""

    access = BUILD_FLOWS


class CanOperateRuns(_HasPermission):
    """Cancel, terminate, pause, resume, retry, rerun, skip, signal (``workflows.operate_run``)."""

    access = OPERATE_RUNS


class CanManageConsumers(_HasPermission):
    """Create and delete event consumers (``workflows.manage_consumers``)."""

    access = MANAGE_EVENT_CONSUMERS


class CanViewSchedules(_HasPermission):
    """Read schedules (``workflows.view_run``, or Django's ``workflows.view_schedule``)."""

    access = VIEW_SCHEDULES


class CanAddSchedules(_HasPermission):
    """Create schedules (Django's ``workflows.add_schedule``)."""

    access = ADD_SCHEDULES


class CanChangeSchedules(_HasPermission):
    """Change, pause and unpause schedules (Django's ``workflows.change_schedule``)."""

    access = CHANGE_SCHEDULES


class CanDeleteSchedules(_HasPermission):
    """Delete schedules (Django's ``workflows.delete_schedule``)."""

    access = DELETE_SCHEDULES


class CanStartScheduledRuns(_HasPermission):
    """Trigger and backfill schedules: they change the schedule and start runs now
    (``workflows.change_schedule`` and ``workflows.start_run``)."""

    access = START_SCHEDULED_RUNS


class CanDoExternalWork(_HasPermission):
    """Claim, heartbeat, complete, fail and log external work
    (``workflows.do_external_work``), and nothing else."""

    access = EXTERNAL_WORK
