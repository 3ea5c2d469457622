"""Where handler code runs: in-process (tests, development) or in django-q2 workers.

An executor receives the ids of steps that a transition made ``ready``. It is called
inside that transition, so it must not do work that outlives a rollback: queue inside
the same database transaction, or defer with ``transaction.on_commit``.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Protocol

from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string

from workflows.conf import workflow_settings


class Executor(Protocol):
    def enqueue(self, step_ids: Sequence[int]) -> None:
        """Arrange for the given ready steps to be executed."""


class InlineExecutor:
    """Sends nothing: ready rows wait until ``workflows.testing.run_pending`` runs them.

    Deterministic for tests: work happens exactly when the test asks for it.
    """

    def enqueue(self, step_ids: Sequence[int]) -> None:
        return None


EXECUTOR_ALIASES = {"inline": "workflows.executors.InlineExecutor"}


@functools.cache
def _load(path: str) -> Executor:
    try:
        return import_string(EXECUTOR_ALIASES.get(path, path))()
    except ImportError as exc:
        raise ImproperlyConfigured(f"WORKFLOWS['EXECUTOR'] = {path!r}: {exc}") from exc


def get_executor() -> Executor:
    """Return the executor named by ``WORKFLOWS['EXECUTOR']``."""
    return _load(workflow_settings.EXECUTOR)
