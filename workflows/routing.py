"""Which work this process may run: the queues it serves and the capabilities it has.

A worker command (``workflows_worker --queue gpu --capability cuda``) says so for its
processes through the environment, which the django-q2 processes it forks inherit;
otherwise ``WORKFLOWS["WORKER_QUEUES"]`` and ``["WORKER_CAPABILITIES"]`` say. The
engine asks :func:`serves` before it claims or chains a unit: a worker never starts
work of a queue it does not serve, or work that requires a capability it lacks.
``run_pending`` (tests, development) stands in for every worker and serves everything.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass

from workflows.conf import workflow_settings
from workflows.definitions.limits import Route

QUEUES_ENV = "WORKFLOWS_WORKER_QUEUES"
CAPABILITIES_ENV = "WORKFLOWS_WORKER_CAPABILITIES"
# The owner name run_pending claims with: it runs every route.
INLINE_OWNER = "inline"


@dataclass(frozen=True)
class WorkerRoutes:
    """The queues a worker serves and the capabilities it has."""

    queues: frozenset[str]
    capabilities: frozenset[str]

    def serves(self, route: Route) -> bool:
        return route.served_by(self.queues, self.capabilities)


def _from_env(name: str) -> frozenset[str] | None:
    value = os.environ.get(name)
    return None if value is None else frozenset(filter(None, value.split(",")))


def this_worker() -> WorkerRoutes:
    """The routes of this process: the environment's, else the ``WORKFLOWS`` settings'."""
    queues = _from_env(QUEUES_ENV)
    capabilities = _from_env(CAPABILITIES_ENV)
    return WorkerRoutes(
        queues=queues if queues is not None else frozenset(workflow_settings.WORKER_QUEUES),
        capabilities=(
            capabilities
            if capabilities is not None
            else frozenset(workflow_settings.WORKER_CAPABILITIES)
        ),
    )


def set_this_worker(queues: Iterable[str], capabilities: Iterable[str]) -> None:
    """Declare this process's routes (the worker command, before it forks its clusters)."""
    os.environ[QUEUES_ENV] = ",".join(sorted(queues))
    os.environ[CAPABILITIES_ENV] = ",".join(sorted(capabilities))


def serves(owner: str, route: Route) -> bool:
    """Tell whether the worker ``owner`` (this process) may run work of ``route``."""
    return owner == INLINE_OWNER or this_worker().serves(route)
