"""Which workers are alive, read from their presence rows: for ``explain`` and the
admin's Workers page. A worker not seen for :data:`MISSED_INTERVALS` presence
intervals is gone (killed, or its host is down): a few missed writes are not enough."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db.models import QuerySet

from workflows.conf import workflow_settings
from workflows.models import WorkerPresence

MISSED_INTERVALS = 3


def presence_interval() -> timedelta:
    return workflow_settings.WORKER_PRESENCE_INTERVAL


def live_workers(now: datetime) -> QuerySet[WorkerPresence]:
    """Workers seen within :data:`MISSED_INTERVALS` presence intervals before ``now``."""
    return WorkerPresence.objects.filter(seen_at__gte=now - MISSED_INTERVALS * presence_interval())


def is_live(worker: WorkerPresence, now: datetime) -> bool:
    """The same judgement as :func:`live_workers`, for a row already read."""
    return worker.seen_at >= now - MISSED_INTERVALS * presence_interval()
