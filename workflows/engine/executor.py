"""The executor port: where a transition sends the ready work it made.

An executor receives units of ready work inside the transition that made them, so it
must not do work that outlives a rollback: queue inside the same database transaction,
or defer with ``transaction.on_commit``. The engine knows only this port; the
implementations (in-process, django-q2) live in :mod:`workflows.workers.executors` and
are loaded by name from ``WORKFLOWS["EXECUTOR"]``, so no import points up.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple, Protocol

from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string

from workflows.conf import workflow_settings
from workflows.definitions.limits import Route

if TYPE_CHECKING:
    from workflows.engine.work_kinds import WorkKind


class Work(NamedTuple):
    """A unit of ready work: its kind (which names the django-q2 task that runs it), the
    id of its row (a step, a fan-out item or a compensation record) and its route (which
    names the django-q2 cluster whose workers may run it)."""

    kind: WorkKind
    unit_id: int
    route: Route = Route()


class Executor(Protocol):
    def enqueue(self, work: Sequence[Work]) -> None:
        """Arrange for the given ready work to be executed."""


EXECUTOR_ALIASES = {
    "inline": "workflows.workers.executors.InlineExecutor",
    "django_q": "workflows.workers.executors.DjangoQExecutor",
    # Where they lived before workers/ was a package: settings written then still work.
    "workflows.executors.InlineExecutor": "workflows.workers.executors.InlineExecutor",
    "workflows.executors.DjangoQExecutor": "workflows.workers.executors.DjangoQExecutor",
}


@functools.cache
def _load(path: str) -> Executor:
    try:
        return import_string(EXECUTOR_ALIASES.get(path, path))()
    except ImportError as exc:
        raise ImproperlyConfigured(f"WORKFLOWS['EXECUTOR'] = {path!r}: {exc}") from exc


def get_executor() -> Executor:
    """Return the executor named by ``WORKFLOWS['EXECUTOR']``."""
    return _load(workflow_settings.EXECUTOR)


def uses_django_q() -> bool:
    """Tell whether the configured executor sends steps to django-q2."""
    configured = EXECUTOR_ALIASES.get(workflow_settings.EXECUTOR, workflow_settings.EXECUTOR)
    return configured == EXECUTOR_ALIASES["django_q"]
