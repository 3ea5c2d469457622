"""Schedules declared in workflow classes: installed idempotently, updated when the class
changes them, paused (not deleted) when the class drops them, resumed when declared
again, and an operator's schedule under the same key left alone."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import timedelta

import pytest

from tests.support.handlers import WORK
from workflows import Schedule, Task, Workflow, create_schedule
from workflows.definitions import registry
from workflows.models import Event, Schedule as ScheduleRow, ScheduleOrigin
from workflows.services.schedules import install_declared_schedules, update_schedule
from workflows.services.schedules.declared import REMOVED_NOTE

pytestmark = pytest.mark.django_db


def nightly(*schedules: object, version: int = 1) -> type[Workflow]:
    """The workflow ``declared_nightly`` with ``schedules``, not registered yet."""
    return type(
        "Nightly",
        (Workflow,),
        {
            "name": "declared_nightly",
            "version": version,
            "schedules": list(schedules),
            "report": Task(WORK),
            "__module__": __name__,
        },
        register=False,
    )


@pytest.fixture
def deploy() -> Iterator[Callable[[type[Workflow]], None]]:
    """Register a version of the workflow as a deploy would; all taken out afterwards."""
    deployed: list[type[Workflow]] = []

    def register(workflow: type[Workflow]) -> None:
        for earlier in deployed:
            registry.unregister(earlier.name, earlier.version)
        deployed.clear()
        registry.register(workflow)
        deployed.append(workflow)

    yield register
    for workflow in deployed:
        registry.unregister(workflow.name, workflow.version)


def test_a_declared_schedule_is_installed_once(deploy: Callable[[type[Workflow]], None]) -> None:
    deploy(nightly(Schedule.cron("0 2 * * *", tz="Europe/Berlin", input={"full": True})))
    assert install_declared_schedules().created == ["declared_nightly:0 2 * * *"]
    row = ScheduleRow.objects.get()
    assert (row.workflow_name, row.tz, row.input, row.origin) == (
        "declared_nightly",
        "Europe/Berlin",
        {"full": True},
        ScheduleOrigin.CODE,
    )
    again = install_declared_schedules()
    assert (again.created, again.updated, again.paused) == ([], [], [])
    assert ScheduleRow.objects.get().version == row.version


def test_a_changed_declaration_updates_its_schedule(
    deploy: Callable[[type[Workflow]], None],
) -> None:
    deploy(nightly(Schedule.every(timedelta(minutes=5), key="report")))
    install_declared_schedules()
    deploy(nightly(Schedule.every(timedelta(minutes=10), key="report"), version=2))
    assert install_declared_schedules().updated == ["report"]
    assert ScheduleRow.objects.get(key="report").every == timedelta(minutes=10)


def test_a_dropped_declaration_is_paused_with_a_note_and_resumes_when_declared_again(
    deploy: Callable[[type[Workflow]], None],
) -> None:
    declared = Schedule.every(timedelta(minutes=5), key="report")
    deploy(nightly(declared))
    install_declared_schedules()
    deploy(nightly(version=2))
    assert install_declared_schedules().paused == ["report"]
    row = ScheduleRow.objects.get(key="report")
    assert row.paused and row.note.startswith(REMOVED_NOTE)
    assert Event.objects.filter(schedule=row, type="schedule.paused").exists()
    deploy(nightly(declared, version=3))
    assert install_declared_schedules().resumed == ["report"]
    assert not ScheduleRow.objects.get(key="report").paused


def test_an_operators_schedule_under_the_key_is_left_alone(
    deploy: Callable[[type[Workflow]], None],
) -> None:
    deploy(nightly(Schedule.every(timedelta(minutes=5), key="report")))
    create_schedule("declared_nightly", key="report", every=timedelta(hours=1))
    assert install_declared_schedules().conflicts == ["report"]
    assert ScheduleRow.objects.get(key="report").every == timedelta(hours=1)


def test_an_operators_change_makes_a_declared_schedule_the_operators(
    deploy: Callable[[type[Workflow]], None],
) -> None:
    deploy(nightly(Schedule.every(timedelta(minutes=5), key="report")))
    install_declared_schedules()
    update_schedule("report", every=timedelta(minutes=15))
    assert ScheduleRow.objects.get(key="report").origin == ScheduleOrigin.OPERATOR
    assert install_declared_schedules().conflicts == ["report"]


def test_a_bad_declaration_fails_the_class_naming_the_problem() -> None:
    from workflows import DefinitionError

    with pytest.raises(DefinitionError, match="declared twice"):
        nightly(Schedule.cron("0 2 * * *"), Schedule.cron("0 2 * * *"))
    with pytest.raises(DefinitionError, match="schedules must hold"):
        nightly("0 2 * * *")
