"""A django-q2 cluster that keeps working when one of its processes is killed.

django-q2's sentinel connects its children through two ``multiprocessing`` queues: the
task queue (pusher → workers) and the result queue (workers → monitor). Each queue
guards its pipe with process-shared semaphores: ``get()`` holds the read lock for as
long as it blocks reading, and a sender's feeder thread holds the write lock while it
writes. A process killed by a signal (the out-of-memory killer's SIGKILL, say) releases
neither, and may leave half a message in the pipe. The idle worker that waits for the
next task is always the one holding the task queue's read lock, so killing it stops the
whole cluster: django-q2 (1.11) spawns a replacement onto the same queue, and it waits
on the dead lock with every other worker, forever, while all processes look healthy.

:class:`RenewingSentinel` therefore treats any child that did not exit cleanly as having
poisoned the queues it shared, and moves the cluster onto new ones: new queues, a new
pusher and monitor, new workers. Workers of the old queues are retired, not killed in the
middle of a task: an idle one at once (all it can do is wait on the old lock), a busy one
as soon as its task is done, so recovery never takes a step from a worker that is still
running it. The cluster never runs more than ``Q_CLUSTER["workers"]`` workers in all.

Messages that were in the old task queue are lost with it. They are nudges only: the ORM
broker redelivers an unacknowledged message after ``Q_CLUSTER["retry"]``, and
``redispatch_unclaimed`` re-sends work that stays ``ready`` for ``REDISPATCH_AFTER``.

A worker serving several routes (queues, or a queue's work that requires capabilities)
runs one such cluster per route (:class:`RouteClusters`): each reads its own broker list
(django-q2's ``cluster=`` names it), so a message of route ``gpu+cuda`` only ever
reaches the workers of a cluster started for that route. Only the first cluster runs
django-q2's scheduler: every sentinel would otherwise send due schedules to its own list.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from multiprocessing import Event
from multiprocessing.process import BaseProcess
from typing import TYPE_CHECKING, Any

from django import db
from django_q.brokers import Broker, get_broker
from django_q.cluster import Cluster, Sentinel, get_mp_context
from django_q.conf import Conf, logger as q_logger
from django_q.humanhash import humanize
from django_q.queues import Queue
from django_q.scheduler import scheduler
from django_q.status import Stat

from workflows.definitions.limits import Route
from workflows.workers.runner import StopFlag, stop_when

if TYPE_CHECKING:
    from multiprocessing import synchronize
    from multiprocessing.sharedctypes import Synchronized

    class WorkerProcess(BaseProcess):
        """A django-q2 worker: upstream's ``spawn_process`` hangs the worker's timer (a
        shared float, see ``_IDLE``) on the process object."""

        timer: Synchronized[float]


logger = logging.getLogger("workflows.cluster")

# How long the old pusher gets to finish its current poll before it is terminated: the
# ORM broker sleeps Q_CLUSTER["poll"] when empty, the Redis broker blocks for 1 s.
PUSHER_STOP_SECONDS = 2.0
# How long an idle old worker may wait for its last result to reach the old monitor.
RESULT_FLUSH_SECONDS = 5.0
# How long a terminated process gets to exit before SIGKILL.
END_SECONDS = 5.0
# Worker timer values (django_q.worker): -1 idle, 0 timed out, -2 recycled, >0 busy
# (seconds left, counted down by the sentinel).
_IDLE = -1


@dataclass
class Retired:
    """The queues of a replaced generation, kept until its last busy worker is done."""

    task_queue: Queue
    result_queue: Queue
    monitor: BaseProcess
    workers: list[WorkerProcess]
    idle_since: dict[WorkerProcess, float] = field(default_factory=dict)  # when first seen
    last_gone: float = field(default_factory=time.monotonic)  # when its last worker ended


def killed(process: BaseProcess | None) -> bool:
    """Tell whether ``process`` ended other than cleanly (by a signal or an error exit).

    A clean exit (0) means a recycled worker or a pusher that gave up on its broker:
    Python released its locks on the way out. Anything else may have left a queue lock
    held or a message half written.
    """
    return process is not None and process.exitcode not in (None, 0)


def _tick(worker: WorkerProcess, seconds: float = 0.0) -> float | None:
    """Count ``seconds`` off a busy worker's timer and return the timer's value.

    ``None`` while the worker holds the timer's lock (it is sending a result): upstream
    waits for that lock, and so would freeze if the worker had been killed holding it.
    """
    lock = worker.timer.get_lock()
    if not lock.acquire(timeout=0.05):
        return None
    try:
        if worker.timer.value > 0:
            worker.timer.value = max(0.0, worker.timer.value - seconds)
        return worker.timer.value
    finally:
        lock.release()


def _end(process: BaseProcess) -> None:
    """Terminate ``process`` and reap it; SIGKILL if it outlives ``END_SECONDS``."""
    if process.is_alive():
        process.terminate()
        process.join(END_SECONDS)
    if process.is_alive():
        process.kill()
    process.join()


class RenewingSentinel(Sentinel):
    """django-q2's sentinel, plus: move to new queues when a child was killed."""

    # Upstream's, set by its __init__ and spawn methods; declared as django-q2 has no types.
    pool: list[WorkerProcess]
    monitor: BaseProcess
    pusher: BaseProcess
    task_queue: Queue
    result_queue: Queue
    event_out: synchronize.Event

    def __init__(
        self, stop_event: Any, *args: Any, run_scheduler: bool = True, **kwargs: Any
    ) -> None:
        # Set before the base class starts guarding, which never returns.
        self.retired: list[Retired] = []
        self.run_scheduler = run_scheduler
        # Inherited by the workers forked from here: once the cluster is stopping, they
        # finish the attempt in hand and take no more work from the database.
        stop_when(stop_event)
        super().__init__(stop_event, *args, **kwargs)

    def guard(self) -> None:
        """django-q2's guard loop (1.11.1), checking for killed children first.

        Upstream reads each worker's timer under its lock before asking whether the
        worker is alive: a worker killed holding that lock would freeze the sentinel.
        Here a dead worker is handled without its lock, and a live one whose lock is
        taken is skipped until the next cycle.
        """
        # Upstream's log lines, which operators and tests watch for.
        name = f"{humanize(self.cluster_id.hex)} [{self.queue_name()}]"
        q_logger.info("%s guarding cluster %s", self.name, name)
        self.start_event.set()
        Stat(self).save()
        q_logger.info("Q Cluster %s running.", name)
        counter = 0.0
        cycle = Conf.GUARD_CYCLE
        while True:
            if any(killed(p) for p in (*self.pool, self.monitor, self.pusher)):
                self.renew()
            for process in list(self.pool):
                # Dead (exit 0: recycled, or ended its own timeout) or timed out just now.
                if not process.is_alive() or _tick(process, cycle) == 0:
                    self.reincarnate(process)
            for old in self.retired:
                for process in old.workers:
                    _tick(process, cycle)  # retire() ends it at 0, as at -1
            if not self.monitor.is_alive():
                self.reincarnate(self.monitor)
            if not self.pusher.is_alive():
                self.reincarnate(self.pusher)
            self.retire(replace=True)
            counter += cycle
            if counter >= 30 and Conf.SCHEDULER and self.run_scheduler:
                counter = 0
                scheduler(broker=self.broker)
            Stat(self).save()
            if self.stop_event.wait(cycle):
                break
        self.stop()

    def renew(self) -> None:
        """Move the cluster onto new queues, leaving the old ones to their busy workers."""
        dead = [p.pid for p in (*self.pool, self.monitor, self.pusher) if killed(p)]
        old = Retired(
            task_queue=self.task_queue,
            result_queue=self.result_queue,
            monitor=self.monitor,
            workers=[p for p in self.pool if p.is_alive()],
        )
        # The pusher is the old task queue's only writer: stop it before it feeds more.
        self.event_out.set()
        self.pusher.join(PUSHER_STOP_SECONDS)
        _end(self.pusher)
        if not Conf.SYNC:
            db.connections.close_all()  # as upstream, before forking
        self.task_queue = Queue(maxsize=Conf.QUEUE_LIMIT) if Conf.QUEUE_LIMIT else Queue()
        self.result_queue = Queue()
        self.event_out = Event()
        self.pool = []
        self.retired.append(old)
        self.monitor = self.spawn_monitor()
        self.pusher = self.spawn_pusher()
        for _ in range(self.pool_size - len(old.workers)):
            self.spawn_worker()
        self.retire(replace=True)  # the idle old workers, now
        self.reincarnations += 1
        logger.critical(
            "process %s was killed and may hold a lock of the cluster's queues: moved to new "
            "queues with a new pusher, monitor and %d workers; old workers finishing their "
            "task first: %d",
            ", ".join(map(str, dead)),
            len(self.pool),
            len(old.workers),
        )

    def retire(self, *, replace: bool) -> None:
        """End old workers once idle (spawning new ones if ``replace``), then old monitors.

        An old worker is idle when its timer says so, read under its lock: it is then
        outside the block that sends its result and can only wait on the old task queue.
        It is ended once the old monitor has read every result of that generation (so no
        feeder thread is cut off mid-write), or after ``RESULT_FLUSH_SECONDS``; the old
        monitor, once the last of them is gone, on the same terms.
        """
        now = time.monotonic()
        for old in list(self.retired):
            flushed = old.result_queue.empty() or not old.monitor.is_alive()
            for process in list(old.workers):
                if process.is_alive():
                    timer = _tick(process)
                    if timer == _IDLE:
                        idle_for = now - old.idle_since.setdefault(process, now)
                        if not flushed and idle_for < RESULT_FLUSH_SECONDS:
                            continue
                    elif timer != 0:  # busy; 0: its task timed out, ended as upstream does
                        continue
                    _end(process)
                old.workers.remove(process)
                old.last_gone = now
                if replace:
                    if not Conf.SYNC:
                        db.connections.close_all()  # as upstream, before forking
                    self.spawn_worker()
            if not old.workers and (flushed or now - old.last_gone >= RESULT_FLUSH_SECONDS):
                _end(old.monitor)
                self.retired.remove(old)

    def stop(self) -> None:
        """Stop as upstream, then wait for old workers' tasks (up to the queue timeout)."""
        super().stop()
        deadline = time.monotonic() + (self.timeout or 30)
        while self.retired and time.monotonic() < deadline:
            self.retire(replace=False)
            time.sleep(0.1)
        for old in self.retired:
            for process in (*old.workers, old.monitor):
                _end(process)
        self.retired.clear()


class RenewingCluster(Cluster):
    """django-q2's cluster with :class:`RenewingSentinel` as its sentinel.

    ``broker`` (default: the project's own ``Q_CLUSTER`` list) is the list its pusher
    reads and its monitor acknowledges; ``run_scheduler=False`` leaves django-q2's
    schedules to another cluster of the same command.
    """

    def __init__(self, broker: Broker | None = None, *, run_scheduler: bool = True) -> None:
        super().__init__(broker)
        self.run_scheduler = run_scheduler

    def start(self) -> int:
        """Start the sentinel and wait until it guards (as upstream 1.11.1 ``start``)."""
        self.stop_event = Event()
        self.start_event = Event()
        self.sentinel = get_mp_context().Process(
            target=RenewingSentinel,
            name=f"Process-{uuid.uuid4().hex}",
            args=(self.stop_event, self.start_event, self.cluster_id, self.broker, self.timeout),
            kwargs={"run_scheduler": self.run_scheduler},
        )
        self.sentinel.start()
        q_logger.info("Q Cluster %s starting.", self.name)
        # Poll instead of wait(): a signal handled during wait() would deadlock (upstream).
        while self.start_event and not self.start_event.is_set():
            if not self.sentinel.is_alive():
                if self.sentinel.exitcode == 0:
                    break
                raise RuntimeError(
                    f"Q Cluster {self.name} failed to start: sentinel exited "
                    f"with code {self.sentinel.exitcode}"
                )
            time.sleep(0.1)
        return self.pid


def broker_of(route: Route) -> Broker:
    """The broker list of ``route``: the one ``async_task(..., cluster=route.key)`` fills."""
    return get_broker(list_key=route.key or Conf.CLUSTER_NAME)


def cluster_name(route: Route) -> str:
    """The django-q2 cluster (broker list) name of ``route``."""
    return route.key or Conf.CLUSTER_NAME


class RouteClusters:
    """One :class:`RenewingCluster` per route, started, watched and stopped together.

    Each cluster has its own sentinel, pusher, monitor and ``Q_CLUSTER["workers"]``
    workers, and recovers from a killed child on its own. The first route's sentinel
    runs django-q2's scheduler; the others do not (the scheduler sends a due schedule to
    its sentinel's own list, so several would scatter the project's schedules across
    routes; django-q2 itself tolerates several schedulers, as with several hosts).
    """

    def __init__(self, routes: Sequence[Route]) -> None:
        self.routes = list(routes)
        self.clusters = [
            RenewingCluster(broker_of(route), run_scheduler=index == 0)
            for index, route in enumerate(self.routes)
        ]

    def start(self, stop_requested: StopFlag | None = None) -> None:
        """Start each cluster in turn, unless ``stop_requested`` is set meanwhile."""
        for cluster in self.clusters:
            if stop_requested is not None and stop_requested.is_set():
                return
            if not Conf.SYNC:
                db.connections.close_all()  # no connection of ours may cross the fork
            cluster.start()

    def started(self) -> list[RenewingCluster]:
        return [cluster for cluster in self.clusters if cluster.sentinel is not None]

    def dead(self) -> list[tuple[Route, int | None]]:
        """The routes whose sentinel has exited, with its exit code."""
        return [
            (route, cluster.sentinel.exitcode)
            for route, cluster in zip(self.routes, self.clusters, strict=True)
            if cluster.sentinel is not None and not cluster.sentinel.is_alive()
        ]

    def stop(self) -> None:
        """Ask every live sentinel to stop, then wait for each (its running tasks finish).

        A dead sentinel's stop event is left alone, as upstream's ``Cluster.stop`` does:
        setting a ``multiprocessing.Event`` waits for each process sleeping on it to
        wake, and a sentinel killed in its ``wait()`` never does.
        """
        started = self.started()
        for cluster in started:
            if cluster.stop_event is not None and cluster.sentinel.is_alive():
                cluster.stop_event.set()
        for cluster in started:
            cluster.sentinel.join()
