"""The machinery's own commands as an operator runs them: ``workflows_recover`` (every
scanner once, on real due timers and expired leases) and the django-q2 schedules that
``workflows_schedules`` and ``migrate`` install, once each however often they run."""

from __future__ import annotations

import json
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone
from django_q.models import Schedule

import workflows
from tests.support.commands import run_command
from tests.support.handlers import WORK
from workflows import Retry, Sleep, Task, Workflow
from workflows.engine import claim_step
from workflows.models import Run, Step, Timer
from workflows.status import StepStatus, TimerStatus
from workflows.testing import run_pending
from workflows.workers import scanners
from workflows.workers.scanners import RECOVERY_SCANNERS
from workflows.workers.schedules import SCHEDULES, install_schedules

pytestmark = pytest.mark.django_db


class Napping(Workflow):
    name = "recover_cmd_napping"
    nap = Sleep(timedelta(hours=2))
    after = Task(WORK)


class Leased(Workflow):
    name = "recover_cmd_leased"
    only = Task(WORK, retry=Retry(max_attempts=3))


@pytest.fixture
def stranded() -> tuple[Run, Run]:
    """A run whose sleep is overdue (no sweeper fired it) and one whose step's worker
    died holding it (its lease ran out)."""
    napping = workflows.start_run(Napping)
    run_pending()
    Timer.objects.filter(run=napping).update(due_at=timezone.now() - timedelta(minutes=1))
    leased = workflows.start_run(Leased)
    step = Step.objects.get(run=leased)
    claim_step(step.pk, "worker-that-died")
    Step.objects.filter(pk=step.pk).update(lease_expires_at=timezone.now() - timedelta(minutes=1))
    return napping, leased


def state(napping: Run, leased: Run) -> tuple[list[str], list[tuple[str, int, str]]]:
    timers = list(Timer.objects.filter(run=napping).values_list("status", flat=True))
    steps = list(Step.objects.filter(run=leased).values_list("status", "attempt", "lease_owner"))
    return timers, steps


def test_recover_dry_run_counts_what_is_stranded_and_changes_nothing(stranded):
    before = state(*stranded)
    counts = json.loads(run_command("workflows_recover", "--dry-run", "--json"))
    assert state(*stranded) == before
    assert set(counts) == set(RECOVERY_SCANNERS)
    assert counts["fire_due_timers"] == {"found": 1, "done": 0, "errors": 0, "skipped": 0}
    assert counts["reclaim_expired_leases"] == {"found": 1, "done": 0, "errors": 0, "skipped": 0}
    lines = run_command("workflows_recover", "--dry-run").splitlines()
    assert len(lines) == len(RECOVERY_SCANNERS)
    assert " ".join(lines[0].split()) == (
        "fire_due_timers found 1 would act on 0 skipped 0 errors 0"
    )


def test_recover_fires_the_overdue_timer_and_reclaims_the_lease(stranded):
    napping, leased = stranded
    lines = run_command("workflows_recover").splitlines()
    assert lines[0].split()[:7] == ["fire_due_timers", "found", "1", "acted", "on", "1", "skipped"]
    assert lines[1].split()[:6] == ["reclaim_expired_leases", "found", "1", "acted", "on", "1"]
    assert list(Timer.objects.filter(run=napping).values_list("status", flat=True)) == [
        TimerStatus.FIRED
    ]
    step = Step.objects.get(run=leased)
    assert (step.attempt, step.lease_owner) == (1, "")  # the dead worker's attempt counts
    assert step.status in {StepStatus.READY, StepStatus.RETRY_SCHEDULED}
    # Nothing is left for a second pass.
    again = json.loads(run_command("workflows_recover", "--json"))
    assert again["fire_due_timers"]["found"] == again["reclaim_expired_leases"]["found"] == 0
    run_pending()  # the sleep is over: the step after it runs
    assert Run.objects.get(pk=napping.pk).status == "completed"


def test_recover_exits_non_zero_when_an_item_fails_and_goes_on(stranded, monkeypatch):
    def broken(timer_id: int, *, wait: bool = True) -> bool:
        raise RuntimeError("the timer table is on fire")

    monkeypatch.setattr(scanners, "fire_timer", broken)
    out = StringIO()
    with pytest.raises(CommandError, match="some items failed; see the log for each error"):
        call_command("workflows_recover", stdout=out)
    lines = out.getvalue().splitlines()
    assert lines[0].split()[-2:] == ["errors", "1"]
    assert lines[1].split()[:6] == ["reclaim_expired_leases", "found", "1", "acted", "on", "1"]


# Schedules


def installed() -> dict[str, list[tuple[int, str, str, int, int]]]:
    rows: dict[str, list[tuple[int, str, str, int, int]]] = {}
    for row in Schedule.objects.order_by("id").values_list(
        "id", "name", "func", "schedule_type", "minutes", "repeats"
    ):
        rows.setdefault(row[1], []).append((row[0], row[2], row[3], row[4], row[5]))
    return rows


def expected() -> dict[str, tuple[str, str, int, int]]:
    return {spec.name: (spec.func, Schedule.MINUTES, spec.minutes, -1) for spec in SCHEDULES}


def test_schedules_command_installs_each_schedule_once_however_often_it_runs():
    assert not Schedule.objects.exists()  # the test settings run steps inline
    first = run_command("workflows_schedules").splitlines()
    assert first == [f"created: {spec.name}" for spec in SCHEDULES]
    rows = installed()
    assert {name: [row[1:] for row in found] for name, found in rows.items()} == {
        name: [spec] for name, spec in expected().items()
    }
    next_runs = dict(Schedule.objects.values_list("id", "next_run"))
    second = run_command("workflows_schedules").splitlines()
    assert second == [f"updated: {spec.name}" for spec in SCHEDULES]
    assert installed() == rows  # the same rows, not new ones
    assert dict(Schedule.objects.values_list("id", "next_run")) == next_runs  # not postponed


def test_schedules_command_puts_back_a_schedule_that_was_changed():
    run_command("workflows_schedules")
    rows = installed()
    recover_row = Schedule.objects.get(name="workflows: recover")
    # As an older version left it, or someone edited it in django-q2's admin.
    Schedule.objects.filter(pk=recover_row.pk).update(
        func="workflows.tasks.old_recover", minutes=30, repeats=0
    )
    assert run_command("workflows_schedules").splitlines() == [
        f"updated: {spec.name}" for spec in SCHEDULES
    ]
    assert installed() == rows


def test_schedules_command_keeps_one_of_a_duplicated_schedule():
    """Two installs racing (two hosts migrating at once) or a copy made in the admin
    leave two rows with one name: the next install keeps the oldest and deletes the
    copy, instead of failing with MultipleObjectsReturned."""
    run_command("workflows_schedules")
    rows = installed()
    spec = SCHEDULES[0]
    Schedule.objects.create(
        name=spec.name, func=spec.func, schedule_type=Schedule.MINUTES, minutes=1, repeats=-1
    )
    assert len(installed()[spec.name]) == 2
    assert run_command("workflows_schedules").splitlines() == [
        f"updated: {s.name}" for s in SCHEDULES
    ]
    assert installed() == rows


@pytest.mark.django_db(transaction=True)
def test_migrate_installs_the_schedules_once_when_workers_run_the_steps(settings):
    call_command("migrate", verbosity=0)
    assert not Schedule.objects.exists()  # steps run inline: no workers to schedule on
    settings.WORKFLOWS = {**settings.WORKFLOWS, "EXECUTOR": "django_q"}
    call_command("migrate", verbosity=0)
    call_command("migrate", verbosity=0)
    assert {name: [row[1:] for row in found] for name, found in installed().items()} == {
        name: [spec] for name, spec in expected().items()
    }


@pytest.mark.django_db(transaction=True)
def test_installs_racing_on_an_empty_table_create_one_row_each(concurrently):
    """Four hosts migrating at once: on PostgreSQL each would find no row and create
    one, but for the table lock; SQLite's writers take turns by themselves."""
    results = concurrently(*[install_schedules] * 4)
    assert not [result for result in results if isinstance(result, Exception)], results
    assert (
        sorted(created for result in results for _, created in result) == [False] * 6 + [True] * 2
    )
    assert {name: len(rows) for name, rows in installed().items()} == dict.fromkeys(expected(), 1)
