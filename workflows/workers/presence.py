"""A worker's presence row: written while it runs (every ``WORKER_PRESENCE_INTERVAL``),
deleted when it stops cleanly, forgotten a day after it was killed. The row is the
worker's, not workflow state: the engine never reads it (:mod:`workflows.queries.workers`
does, for ``explain`` and the Workers page)."""

from __future__ import annotations

import logging
import os
import socket
from datetime import timedelta

from django.db import DatabaseError, IntegrityError
from django.db.models.functions import Now

from workflows.engine.routing import WorkerRoutes
from workflows.models import WorkerPresence

logger = logging.getLogger("workflows.routing")

# A worker gone this long (its row never withdrawn: it was killed) is forgotten.
FORGET_GONE_AFTER = timedelta(days=1)


def worker_name() -> str:
    """This worker command's name: ``host:pid``, as lease owners begin."""
    return f"{socket.gethostname()}:{os.getpid()}"


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
