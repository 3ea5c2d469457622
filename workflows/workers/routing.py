"""Which work this process may run: the queues it serves and the capabilities it has.

A worker command (``workflows_worker --queue gpu --capability cuda``) says so for its
processes through the environment, which the django-q2 processes it forks inherit;
otherwise ``WORKFLOWS["WORKER_QUEUES"]`` and ``["WORKER_CAPABILITIES"]`` say. The
engine asks :func:`serves` before it claims or chains a unit: a worker never starts
work of a queue it does not serve, or work that requires a capability it lacks.
``run_pending`` (tests, development) stands in for every worker and serves everything.

Each route a worker serves is one django-q2 cluster of the worker (:func:`routes_served`,
named by :attr:`Route.key <workflows.definitions.limits.Route.key>`). While it runs,
the worker command writes its :class:`~workflows.models.WorkerPresence` row every
``WORKER_PRESENCE_INTERVAL`` (:func:`report_presence`), so ``explain`` and the admin's
Workers page can tell work that no running worker may take (:func:`live_workers`).
That row is the worker's, not workflow state: the engine never reads it.
"""

from __future__ import annotations

import functools
import logging
import os
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import DatabaseError, IntegrityError
from django.db.models import QuerySet
from django.db.models.functions import Now

from workflows.conf import workflow_settings
from workflows.definitions import registry
from workflows.definitions.limits import Route
from workflows.models import WorkerPresence

logger = logging.getLogger("workflows.routing")

QUEUES_ENV = "WORKFLOWS_WORKER_QUEUES"
CAPABILITIES_ENV = "WORKFLOWS_WORKER_CAPABILITIES"
# The owner name run_pending claims with: it runs every route.
INLINE_OWNER = "inline"
# A worker not seen for this many presence intervals is gone (it was killed, or its
# host is down): a few missed writes are not enough to call it gone.
MISSED_INTERVALS = 3
# A worker gone this long (its row never withdrawn: it was killed) is forgotten.
FORGET_GONE_AFTER = timedelta(days=1)


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
    """Tell whether the worker ``owner`` (this process) may run work of ``route``."""
    return owner == INLINE_OWNER or this_worker().serves(route)


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


def worker_name() -> str:
    """This worker command's name: ``host:pid``, as lease owners begin."""
    return f"{socket.gethostname()}:{os.getpid()}"


def presence_interval() -> timedelta:
    return workflow_settings.WORKER_PRESENCE_INTERVAL


def live_workers(now: datetime) -> QuerySet[WorkerPresence]:
    """Workers seen within :data:`MISSED_INTERVALS` presence intervals before ``now``."""
    return WorkerPresence.objects.filter(seen_at__gte=now - MISSED_INTERVALS * presence_interval())


def is_live(worker: WorkerPresence, now: datetime) -> bool:
    """The same judgement as :func:`live_workers`, for a row already read."""
    return worker.seen_at >= now - MISSED_INTERVALS * presence_interval()


def report_presence(name: str, worker: WorkerRoutes) -> bool:
    """Write that worker ``name`` runs now, serving ``worker``'s queues and capabilities.

    ``seen_at`` (and ``started_at`` of a new row) are the database's clock, like
    leases, so workers on hosts with skewed clocks are judged alike. Returns ``False``
    (and logs) when the database refused the write: a worker keeps working through a
    blip, and its row only looks gone until the next write succeeds.
    """
    values = {"queues": sorted(worker.queues), "capabilities": sorted(worker.capabilities)}
    try:
        if WorkerPresence.objects.filter(name=name).update(seen_at=Now(), **values):
            return True
        try:
            WorkerPresence.objects.create(name=name, started_at=Now(), seen_at=Now(), **values)
        except IntegrityError:  # a row of a former process with the same host and pid
            WorkerPresence.objects.filter(name=name).update(
                started_at=Now(), seen_at=Now(), **values
            )
    except DatabaseError:
        logger.warning("could not record the presence of worker %s", name, exc_info=True)
        return False
    return True


def forget_gone_workers() -> int:
    """Delete the rows of workers not seen for ``FORGET_GONE_AFTER`` (killed, never
    withdrawn); return how many. Called by each worker as it starts, so the Workers
    page shows recent departures but not every process that ever ran."""
    try:
        deleted, _ = WorkerPresence.objects.filter(seen_at__lt=Now() - FORGET_GONE_AFTER).delete()
    except DatabaseError:
        logger.warning("could not forget workers gone long ago", exc_info=True)
        return 0
    return deleted


def withdraw_presence(name: str) -> None:
    """Delete worker ``name``'s row: it stopped cleanly and serves nothing any more."""
    try:
        WorkerPresence.objects.filter(name=name).delete()
    except DatabaseError:
        logger.warning("could not delete the presence of worker %s", name, exc_info=True)
