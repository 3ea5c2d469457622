"""Which work this process may run: the queues it serves and the capabilities it has.

A worker command (``workflows_worker --queue gpu --capability cuda``) says so for its
processes through the environment, which the django-q2 processes it forks inherit;
otherwise ``WORKFLOWS["WORKER_QUEUES"]`` and ``["WORKER_CAPABILITIES"]`` say. The
engine asks :func:`serves` before it claims or chains a unit: a worker never starts
work of a queue it does not serve, or work that requires a capability it lacks.
``run_pending`` (tests, development) stands in for every worker and serves everything.

Each route a worker serves is one django-q2 cluster of the worker (:func:`routes_served`,
named by :attr:`Route.key <workflows.definitions.limits.Route.key>`).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterable
from dataclasses import dataclass

from workflows.conf import workflow_settings
from workflows.definitions import registry
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


def this_worker() -> WorkerRoutes:
    """The routes of this process: the environment's, else the ``WORKFLOWS`` settings'.

    Asked before every chained step: the answer is built once per distinct value of
    the environment and settings it comes from.
    """
    return _routes_of(
        os.environ.get(QUEUES_ENV),
        os.environ.get(CAPABILITIES_ENV),
        tuple(workflow_settings.WORKER_QUEUES),
        tuple(workflow_settings.WORKER_CAPABILITIES),
    )


@functools.lru_cache(maxsize=16)
def _routes_of(
    queues_env: str | None,
    capabilities_env: str | None,
    queues_setting: tuple[str, ...],
    capabilities_setting: tuple[str, ...],
) -> WorkerRoutes:
    return WorkerRoutes(
        queues=_names(queues_env, queues_setting),
        capabilities=_names(capabilities_env, capabilities_setting),
    )


def _names(from_env: str | None, setting: tuple[str, ...]) -> frozenset[str]:
    """The comma-separated names of an environment variable, else the setting's."""
    return frozenset(setting if from_env is None else filter(None, from_env.split(",")))


def set_this_worker(queues: Iterable[str], capabilities: Iterable[str]) -> None:
    """Declare this process's routes (the worker command, before it forks its clusters)."""
    os.environ[QUEUES_ENV] = ",".join(sorted(queues))
    os.environ[CAPABILITIES_ENV] = ",".join(sorted(capabilities))


def serves(owner: str, route: Route) -> bool:
    """Tell whether the worker ``owner`` (this process) may run work of ``route``: never
    an external route, which only workers outside the process do."""
    return not route.external and (owner == INLINE_OWNER or this_worker().serves(route))


def routes_served(queues: Iterable[str], capabilities: Iterable[str]) -> list[Route]:
    """The routes a worker serving ``queues`` with ``capabilities`` listens on.

    The plain route of each queue, plus every route of a registered workflow (all
    versions) that the worker may run: work requiring ``cuda`` on queue ``gpu`` travels
    on cluster ``gpu+cuda``, which only workers with ``cuda`` read. Each route is one
    django-q2 cluster of the worker. The default queue's plain route (the project's own
    ``Q_CLUSTER``) comes first when served, then the others by cluster name.
    """
    queues, capabilities = frozenset(queues), frozenset(capabilities)
    found = {Route(queue) for queue in queues}
    found.update(
        route
        for workflow in registry.all()
        for route in workflow.routes()
        if route.served_by(queues, capabilities)
    )
    return sorted(found, key=lambda route: (route.key is not None, route.key or ""))
