"""Run Flowsite's django-q2 worker clusters, one per route this worker serves."""

from __future__ import annotations

import signal
import threading
import time
from types import FrameType
from typing import Any

from django.conf import settings
from django.core.management.base import CommandError
from django.db import connections

from workflows.conf import workflow_settings
from workflows.definitions.limits import Route, name_problems
from workflows.engine.routing import WorkerRoutes, routes_served, set_this_worker, this_worker
from workflows.management.base import DeclaredCommand
from workflows.management.options import argument
from workflows.workers.cluster import RouteClusters, cluster_name
from workflows.workers.presence import (
    forget_gone_workers,
    report_presence,
    withdraw_presence,
    worker_name,
)

# How often the main process checks its sentinels and whether it was asked to stop.
WATCH_SECONDS = 0.2


class Command(DeclaredCommand):
    help = (
        "Run Flowsite's workers: for each route this worker serves, a django-q2 cluster of "
        "Q_CLUSTER['workers'] worker processes with its pusher and monitor (the first "
        "also runs the scheduler), as `manage.py qcluster` does for one. Use it instead of "
        "qcluster. A route is a queue (--queue, default WORKFLOWS['WORKER_QUEUES']), or a "
        "queue's work that requires capabilities this worker has (--capability, default "
        "WORKFLOWS['WORKER_CAPABILITIES']); work of other queues, or requiring other "
        "capabilities, never reaches it. It prints the queues, capabilities and clusters "
        "it serves, and records itself (Workers in the admin) every "
        "WORKFLOWS['WORKER_PRESENCE_INTERVAL']. When a worker, pusher or monitor is "
        "killed (an out-of-memory kill, say), its cluster moves onto new internal queues "
        "within about a second, because the dead process may hold their locks: with plain "
        "qcluster, killing an idle worker stops every worker until a restart. Tasks "
        "running at that moment finish first. A worker whose run has nothing more for it "
        "takes the next ready work of its route from the database, for up to "
        "WORKFLOWS['CHAIN_BUDGET'], rather than waiting for the queue. Stops on SIGINT or "
        "SIGTERM once each worker has finished the step in hand (the rest stays ready); "
        "exits non-zero if a cluster's sentinel dies, so that a process manager restarts it."
    )

    arguments = (
        argument(
            "--queue",
            action="append",
            dest="queues",
            metavar="NAME",
            help="a queue to serve; repeat for several (default: WORKFLOWS['WORKER_QUEUES'])",
        ),
        argument(
            "--capability",
            action="append",
            dest="capabilities",
            metavar="NAME",
            help=(
                "a capability this worker has (cuda, say); repeat for several (default: "
                "WORKFLOWS['WORKER_CAPABILITIES'])"
            ),
        ),
    )

    def handle(self, *args: Any, **options: Any) -> None:
        settings.SECRET_KEY  # noqa: B018  (django-q2 signs its messages with it)
        worker = _worker_routes(options["queues"], options["capabilities"])
        # Before any cluster forks: its processes inherit what this worker serves.
        set_this_worker(worker.queues, worker.capabilities)
        routes = routes_served(worker.queues, worker.capabilities)
        self.stdout.write(f"queues: {', '.join(sorted(worker.queues))}")
        self.stdout.write(f"capabilities: {', '.join(sorted(worker.capabilities)) or '(none)'}")
        self.stdout.write(
            "routes (django-q2 clusters): "
            + ", ".join(f"{cluster_name(route)} ({route})" for route in routes)
        )
        self.stdout.flush()

        clusters = RouteClusters(routes)
        stop_requested = threading.Event()

        def request_stop(signum: int, frame: FrameType | None) -> None:
            stop_requested.set()

        # Each cluster installed its own handler, which would stop only itself.
        signal.signal(signal.SIGTERM, request_stop)
        signal.signal(signal.SIGINT, request_stop)

        name = worker_name()
        dead = []
        forget_gone_workers()
        try:
            clusters.start(stop_requested)
            dead = self.watch(clusters, name, worker, stop_requested)
        finally:
            clusters.stop()
            if not dead:
                withdraw_presence(name)
            connections.close_all()
        if dead:
            raise CommandError(
                "a cluster's sentinel died: "
                + ", ".join(f"{cluster_name(route)} (exit {code})" for route, code in dead)
            )

    def watch(
        self,
        clusters: RouteClusters,
        name: str,
        worker: WorkerRoutes,
        stop_requested: threading.Event,
    ) -> list[tuple[Route, int | None]]:
        """Record this worker's presence until asked to stop or a sentinel dies; return
        the dead sentinels' routes and exit codes (empty on a requested stop)."""
        interval = workflow_settings.WORKER_PRESENCE_INTERVAL.total_seconds()
        next_report = 0.0
        while not stop_requested.is_set():
            dead = clusters.dead()
            if dead:
                return dead
            if time.monotonic() >= next_report:
                report_presence(name, worker)
                next_report = time.monotonic() + interval
            stop_requested.wait(WATCH_SECONDS)
        return []


def _worker_routes(queues: list[str] | None, capabilities: list[str] | None) -> WorkerRoutes:
    """The options' queues and capabilities (else the settings'), validated."""
    default = this_worker()
    chosen = WorkerRoutes(
        queues=frozenset(queues) if queues is not None else default.queues,
        capabilities=frozenset(capabilities) if capabilities is not None else default.capabilities,
    )
    problems = [
        *(
            problem
            for queue in sorted(chosen.queues)
            for problem in name_problems("--queue", queue)
        ),
        *(
            problem
            for capability in sorted(chosen.capabilities)
            for problem in name_problems("--capability", capability)
        ),
    ]
    if problems:
        raise CommandError("; ".join(problems))
    if not chosen.queues:
        raise CommandError("the worker serves no queue: give --queue NAME")
    return chosen
