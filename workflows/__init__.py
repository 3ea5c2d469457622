"""Flowsite: durable workflows inside your Django database.

Definitions and errors import without Django being set up; the verbs that touch the
database (``start_run``, ...) are loaded on first access, after apps are ready.
"""

from __future__ import annotations

from typing import Any

from workflows.definitions import Retry, Sleep, Task, Workflow
from workflows.errors import (
    DefinitionError,
    DefinitionMissing,
    IdempotencyConflict,
    InvalidInput,
    LeaseLost,
    PermanentError,
    RunNotFound,
    StaleState,
    WorkflowError,
)

_SERVICES = {"start_run"}

__all__ = [
    "DefinitionError",
    "DefinitionMissing",
    "IdempotencyConflict",
    "InvalidInput",
    "LeaseLost",
    "PermanentError",
    "Retry",
    "RunNotFound",
    "Sleep",
    "StaleState",
    "Task",
    "Workflow",
    "WorkflowError",
    "start_run",
]


def __getattr__(name: str) -> Any:
    if name in _SERVICES:
        from workflows import services

        return getattr(services, name)
    raise AttributeError(f"module 'workflows' has no attribute {name!r}")
