"""Flowsite: durable workflows inside your Django database.

Definitions and errors import without Django being set up; the verbs that touch the
database (``start_run``, ...) are loaded on first access, after apps are ready.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied

from workflows.definitions import (
    FanOut,
    Gate,
    Option,
    Retry,
    Sleep,
    SubWorkflow,
    Task,
    WaitForSignal,
    Workflow,
)
from workflows.errors import (
    CallbackAlreadyUsed,
    CallbackExpired,
    DatabaseBusy,
    DefinitionError,
    DefinitionMissing,
    GateAlreadyDecided,
    GateClaimed,
    IdempotencyConflict,
    InvalidCallbackToken,
    InvalidDecision,
    InvalidInput,
    InvalidTransition,
    LeaseLost,
    PermanentError,
    RunNotFound,
    StaleState,
    StaleVersion,
    StepNotFound,
    UnknownSignal,
    WorkflowError,
)

_SERVICES = {
    "approve_gate",
    "cancel_run",
    "claim_gate",
    "complete_callback",
    "fail_callback",
    "pause_run",
    "reject_gate",
    "rerun_from",
    "resume_run",
    "retry_run",
    "retry_step",
    "send_signal",
    "skip_step",
    "start_run",
    "terminate_run",
    "unclaim_gate",
}

__all__ = [
    "CallbackAlreadyUsed",
    "CallbackExpired",
    "DatabaseBusy",
    "DefinitionError",
    "DefinitionMissing",
    "FanOut",
    "Gate",
    "GateAlreadyDecided",
    "GateClaimed",
    "IdempotencyConflict",
    "InvalidCallbackToken",
    "InvalidDecision",
    "InvalidInput",
    "InvalidTransition",
    "LeaseLost",
    "Option",
    "PermanentError",
    "PermissionDenied",
    "Retry",
    "RunNotFound",
    "Sleep",
    "StaleState",
    "StaleVersion",
    "StepNotFound",
    "SubWorkflow",
    "Task",
    "UnknownSignal",
    "WaitForSignal",
    "Workflow",
    "WorkflowError",
    "approval_link",
    "approve_gate",
    "bulk",
    "cancel_run",
    "claim_gate",
    "complete_callback",
    "explain",
    "fail_callback",
    "gates_for",
    "pause_run",
    "reject_gate",
    "rerun_from",
    "resume_run",
    "retry_run",
    "retry_step",
    "send_signal",
    "skip_step",
    "start_run",
    "terminate_run",
    "unclaim_gate",
]


def __getattr__(name: str) -> Any:
    if name in _SERVICES:
        from workflows import services

        return getattr(services, name)
    if name == "bulk":
        # From workflows.services.bulk: a submodule named bulk.py would shadow this name.
        from workflows.services.bulk import bulk

        return bulk
    if name == "approval_link":
        from workflows.approvals.links import approval_link

        return approval_link
    if name == "gates_for":
        from workflows.approvals import gates_for

        return gates_for
    if name == "explain":
        # From workflows.queries.explanation: a submodule named explain.py would shadow this name.
        from workflows.queries.explanation import explain

        return explain
    raise AttributeError(f"module 'workflows' has no attribute {name!r}")
