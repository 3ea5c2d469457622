"""Run the django-q2 worker cluster that recovers by itself from a killed worker."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from workflows.cluster import RenewingCluster


class Command(BaseCommand):
    help = (
        "Run a django-q2 cluster for Flowsite: Q_CLUSTER['workers'] worker processes, "
        "the pusher, the monitor and the scheduler, as `manage.py qcluster` does. Use it "
        "instead of qcluster. When a worker, the pusher or the monitor is killed (an "
        "out-of-memory kill, say), the cluster moves onto new internal queues within "
        "about a second, because the dead process may hold their locks: with plain "
        "qcluster, killing an idle worker stops every worker until a restart. Tasks "
        "running at that moment finish first. Stops on SIGINT or SIGTERM after the "
        "running tasks; exits non-zero if the cluster's sentinel dies, so that a process "
        "manager restarts it."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        settings.SECRET_KEY  # noqa: B018  (django-q2 signs its messages with it)
        cluster = RenewingCluster()
        cluster.start()
        # SIGINT and SIGTERM run cluster.stop(), which joins the sentinel, in this thread.
        cluster.sentinel.join()
        if cluster.sentinel.exitcode != 0:
            raise CommandError(f"the cluster's sentinel exited with {cluster.sentinel.exitcode}")
