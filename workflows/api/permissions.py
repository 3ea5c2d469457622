"""Who may do what over HTTP: viewing, starting and operating runs are separate.

Deciding a gate needs no model permission: the gate's own rule (its permission or
assignees, :mod:`workflows.approvals`) is checked by the service, per gate.
"""

from __future__ import annotations

from typing import Any

from rest_framework.permissions import BasePermission


class _HasPermission(BasePermission):
    permission = ""

    def has_permission(self, request: Any, view: Any) -> bool:
        user = request.user
        return bool(user and user.is_authenticated and user.has_perm(self.permission))


class CanViewRuns(_HasPermission):
    """Read runs, steps, items and events (Django's ``workflows.view_run``)."""

    permission = "workflows.view_run"
    message = "viewing runs needs the permission workflows.view_run"


class CanStartRuns(_HasPermission):
    """Start runs of registered workflows (``workflows.start_run``)."""

    permission = "workflows.start_run"
    message = "starting runs needs the permission workflows.start_run"


class CanOperateRuns(_HasPermission):
    """Cancel, terminate, pause, resume, retry, rerun, skip, signal (``workflows.operate_run``)."""

    permission = "workflows.operate_run"
    message = "operating runs needs the permission workflows.operate_run"
