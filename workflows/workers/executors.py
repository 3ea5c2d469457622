"""Where handler code runs: in-process (tests, development) or in django-q2 workers.

The implementations of the engine's executor port (:mod:`workflows.engine.executor`),
named in ``WORKFLOWS["EXECUTOR"]`` (``"inline"``, ``"django_q"`` or a dotted path).
"""

from __future__ import annotations

from collections.abc import Sequence

from django.db import router, transaction

from workflows.engine.executor import Work


class InlineExecutor:
    """Sends nothing: ready rows wait until ``workflows.testing.run_pending`` runs them.

    Deterministic for tests: work happens exactly when the test asks for it.
    """

    def enqueue(self, work: Sequence[Work]) -> None:
        return None


class DjangoQExecutor:
    """Sends one django-q2 task ("run step N", "run item N", ...) per unit of ready work.

    The message is only a nudge: the worker claims the step with a compare-and-set, so
    a duplicate or redelivered message finds the step taken and does nothing, and a lost
    one is re-sent by the redispatch scanner. With django-q2's ORM broker on the
    workflows database the message is written in the transition's own transaction (a
    transactional outbox); with any other broker (Redis) it is sent on commit.
    """

    def enqueue(self, work: Sequence[Work]) -> None:
        queue_tasks(
            [
                (kind.task, unit_id, f"workflows {kind.name} {unit_id}", route.key)
                for kind, unit_id, route in work
            ]
        )


# A django-q2 task: function path, its one argument, task name, cluster (None: the
# project's own Q_CLUSTER).
QueuedTask = tuple[str, int, str, str | None]


def queue_tasks(tasks: Sequence[QueuedTask]) -> None:
    """Send django-q2 tasks with the caller's transaction: inside it when the ORM
    broker uses the workflows database (the message commits or rolls back with the
    state it is about), on commit otherwise. Each goes to its named cluster (django-q2's
    ``cluster=``: the broker's list key), which only workers of that route read."""
    from django_q.conf import Conf

    from workflows.models import Step

    calls = list(tasks)
    if Conf.ORM and router.db_for_write(Step) == Conf.ORM:
        _send(calls)
    else:
        transaction.on_commit(lambda: _send(calls), using=router.db_for_write(Step))


def _send(calls: list[QueuedTask]) -> None:
    from django_q.tasks import async_task

    for function, argument, name, cluster in calls:
        if cluster is None:
            async_task(function, argument, task_name=name)
        else:
            async_task(function, argument, task_name=name, cluster=cluster)
