"""The django-q2 executor: queue messages commit with the transition; unsafe settings refused."""

from __future__ import annotations

import pytest
from django.db import transaction
from django_q.models import OrmQ

import workflows
from tests.support.handlers import NOOP
from workflows import Task, Workflow
from workflows.checks import django_q_problems
from workflows.engine.executor import _load
from workflows.models import Run
from workflows.workers.executors import DjangoQExecutor

SAFE = {
    "orm": "default",
    "timeout": 600,
    "retry": 660,
    "ack_failures": True,
    "max_attempts": 1,
    "catch_up": False,
}


class Queued(Workflow):
    name = "queued_single"
    only = Task(NOOP)


@pytest.fixture
def django_q_executor(settings):
    settings.WORKFLOWS = {"EXECUTOR": "django_q"}
    settings.Q_CLUSTER = {**SAFE, "name": "flowsite"}
    yield
    _load.cache_clear()


@pytest.mark.django_db(transaction=True)
def test_a_ready_step_is_queued_in_the_same_transaction(django_q_executor):
    run = workflows.start_run(Queued)
    (message,) = OrmQ.objects.all()
    assert message.task["func"] == "workflows.tasks.run_step"
    assert message.task["args"] == (run.steps.get().pk,)


@pytest.mark.django_db(transaction=True)
def test_a_rolled_back_transition_queues_nothing(django_q_executor):
    with pytest.raises(RuntimeError), transaction.atomic():
        workflows.start_run(Queued)
        assert OrmQ.objects.count() == 1
        raise RuntimeError("the caller's transaction fails after the start")
    assert not Run.objects.exists()
    assert not OrmQ.objects.exists()


def test_executor_is_picked_from_settings(django_q_executor):
    from workflows.engine.executor import get_executor

    assert isinstance(get_executor(), DjangoQExecutor)


def test_safe_cluster_settings_pass():
    assert django_q_problems(SAFE, step_timeout=300) == []


@pytest.mark.parametrize(
    ("change", "code"),
    [
        ({"orm": None}, "workflows.E004"),
        ({"timeout": 200}, "workflows.E005"),
        ({"retry": 600}, "workflows.E006"),
        ({"ack_failures": False}, "workflows.E007"),
        ({"max_attempts": 0}, "workflows.E008"),
        ({"catch_up": True}, "workflows.W004"),
    ],
)
def test_unsafe_cluster_settings_are_refused(change, code):
    problems = django_q_problems({**SAFE, **change}, step_timeout=300)
    assert [problem.id for problem in problems] == [code]
