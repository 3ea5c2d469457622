"""Who may do what over HTTP: viewing, starting and operating runs are separate.

Starting and operating ask the verb table (:mod:`workflows.services.access`). Deciding
a gate needs no model permission: the gate's own rule (its permission or assignees,
:mod:`workflows.approvals`) is checked by the service, per gate.
"""

from __future__ import annotations

from typing import Any

from rest_framework.permissions import BasePermission

from workflows.services.access import (
    MANAGE_EVENT_CONSUMERS,
    OPERATE_RUNS,
    START_RUNS,
    VIEW_RUNS,
)


class _HasPermission(BasePermission):
    access = VIEW_RUNS

    def has_permission(self, request: Any, view: Any) -> bool:
        return self.access.allows(request.user)


class CanViewRuns(_HasPermission):
    """Read runs, steps, items and events (Django's ``workflows.view_run``)."""

    access = VIEW_RUNS
    permission = access.permission
    message = access.refusal


class CanStartRuns(_HasPermission):
    """Start runs of registered workflows (``workflows.start_run``)."""

    access = START_RUNS
    permission = access.permission
    message = access.refusal


class CanOperateRuns(_HasPermission):
    """Cancel, terminate, pause, resume, retry, rerun, skip, signal (``workflows.operate_run``)."""

    access = OPERATE_RUNS
    permission = access.permission
    message = access.refusal


class CanManageConsumers(_HasPermission):
    """Create and delete event consumers (``workflows.manage_consumers``)."""

    access = MANAGE_EVENT_CONSUMERS
    permission = access.permission
    message = access.refusal
