"""Retention (``workflows.services.retention``): the history of ended runs deleted in
batches of whole runs, everything of a purged run gone, nothing of another touched."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta
from typing import Any

import pytest
from django.apps import apps
from django.db import models
from django.utils import timezone

import workflows
from tests.support import flows as flow_support
from tests.support.database import is_sqlite
from tests.support.handlers import BOOM, NOOP, UNDO, WORK
from tests.support.runs import run_inline
from tests.support.threads import run_concurrently
from tests.support.workflows import Broken
from workflows import FanOut, Sleep, SubWorkflow, Task, WaitForSignal, Workflow
from workflows.definitions import Retry
from workflows.engine.retention import batches
from workflows.engine.retention.pacing import LARGEST_BATCH, BatchSizer
from workflows.engine.sql.retention import COVERED_ELSEWHERE, NULLED, OWNED
from workflows.errors import InvalidInput
from workflows.models import (
    CompensationRecord,
    Event,
    FanOutItem,
    Flow,
    FlowMember,
    Run,
    Signal,
    Step,
    Timer,
)
from workflows.services.retention import MAX_RUNS, TIME_LIMIT, purge_history
from workflows.testing import run_pending
from workflows.workers.scanners import purge_finished_runs

pytestmark = pytest.mark.django_db

ONCE = Retry(max_attempts=1)


class Kid(Workflow):
    name = "retention_kid"
    work = Task(WORK, retry=ONCE)


class Rich(Workflow):
    """A run that leaves a row in every table a run can own: a compensated step, fan-out
    items, a child run, a signal, a timer, and the compensations its failure ran."""

    name = "retention_rich"
    charge = Task(WORK, compensate=UNDO, retry=ONCE)
    fan = FanOut(NOOP, items=lambda ctx: [1, 2, 3], compensate=UNDO)
    kid = SubWorkflow("retention_kid")
    go = WaitForSignal("go")
    nap = Sleep(timedelta(seconds=1))
    boom = Task(BOOM, retry=ONCE)


def rich_run() -> Run:
    run = workflows.start_run(Rich)
    run_pending()
    workflows.send_signal(run, "go", {"ok": True})
    run_pending(until=timezone.now() + timedelta(minutes=1))
    run.refresh_from_db()
    assert run.status == "compensated", run.status
    return run


def ended_days_ago(run: Run, days: float) -> Run:
    Run.objects.filter(pk=run.pk).update(finished_at=timezone.now() - timedelta(days=days))
    return run


def simple_ended(days: float = 10) -> Run:
    return ended_days_ago(run_inline(Kid), days)


def cutoff(days: float = 7) -> Any:
    return timezone.now() - timedelta(days=days)


def tree_ids(run: Run) -> list[Any]:
    ids, level = [run.pk], [run.pk]
    while level:
        level = list(Run.objects.filter(parent_run__in=level).values_list("pk", flat=True))
        ids += level
    return ids


def rows_of(run_ids: list[Any]) -> Counter[str]:
    """How many rows of each table belong to the runs ``run_ids``."""
    steps = Step.objects.filter(run__in=run_ids)
    return Counter(
        {
            "runs": Run.objects.filter(pk__in=run_ids).count(),
            "steps": steps.count(),
            "items": FanOutItem.objects.filter(step__in=steps).count(),
            "events": Event.objects.filter(run__in=run_ids).count(),
            "timers": Timer.objects.filter(run__in=run_ids).count(),
            "compensations": CompensationRecord.objects.filter(run__in=run_ids).count(),
            "signals": Signal.objects.filter(run__in=run_ids).count(),
            "members": FlowMember.objects.filter(run__in=run_ids).count(),
        }
    )


# The plan covers every relation


def _relations(model: type[models.Model]) -> set[tuple[type[models.Model], str, Any]]:
    return {
        (rel.related_model, rel.field.name, rel.on_delete)
        for rel in model._meta.related_objects
        if rel.related_model._meta.app_label == "workflows"
    }


def test_every_relation_to_a_run_or_its_rows_is_deleted_or_emptied_with_it():
    planned = {(entry.model, entry.field) for entry in (*OWNED, *NULLED)} | COVERED_ELSEWHERE
    missing = [
        f"{related.__name__}.{name} -> {model.__name__}"
        for model in (Run, Step, FanOutItem, CompensationRecord, FlowMember, Flow)
        for related, name, on_delete in _relations(model)
        if on_delete is not models.DO_NOTHING and (related, name) not in planned
    ]
    assert not missing
    # No other app's model points at them (the project's own would need a plan too).
    foreign = [
        rel
        for model in (Run, Step, FanOutItem, CompensationRecord)
        for rel in model._meta.related_objects
        if rel.related_model._meta.app_label != "workflows"
        and rel.related_model in apps.get_models()
    ]
    assert not foreign


# What a purge deletes and keeps


def test_a_purged_run_leaves_no_row_and_other_runs_keep_every_row():
    old = ended_days_ago(rich_run(), 10)
    young = ended_days_ago(rich_run(), 2)
    live = workflows.start_run(Rich)
    run_pending()
    old_tree, young_tree, live_tree = tree_ids(old), tree_ids(young), tree_ids(live)
    assert len(old_tree) == 2  # the child run
    before = rows_of(old_tree)
    # Every table a run outside flows can own holds rows of the old run.
    assert all(count for table, count in before.items() if table != "members"), before
    kept = rows_of(young_tree) + rows_of(live_tree)

    report = purge_history(before=cutoff())

    assert (report.runs, report.child_runs, report.kept) == (1, 1, 0)
    assert not any(rows_of(old_tree).values())
    assert rows_of(young_tree) + rows_of(live_tree) == kept
    # Every row counted: the runs, their steps, items, events, timers, ...
    assert report.rows == sum(before.values())


def test_batches_hold_at_most_the_batch_size_and_together_delete_every_old_run():
    old = [simple_ended(10) for _ in range(9)]
    young = simple_ended(1)
    seen: list[tuple[int, int]] = []
    report = purge_history(
        before=cutoff(),
        batch_size=4,
        on_batch=lambda totals, batch: seen.append((batch.runs, batch.rows_deleted)),
    )
    assert [runs for runs, _ in seen] == [4, 4, 1]
    assert report.runs == 9 and report.batches == 3
    # Each batch deleted its runs' rows, not more: a run of Kid is a run, a step, events.
    per_run = sum(rows_of([young.pk]).values())
    assert [rows for _, rows in seen] == [4 * per_run, 4 * per_run, per_run]
    assert not any(rows_of([run.pk for run in old]).values())
    assert Run.objects.filter(pk=young.pk).exists()


def test_max_runs_stops_the_purge_and_the_next_purge_goes_on():
    for _ in range(5):
        simple_ended(10)
    first = purge_history(before=cutoff(), max_runs=3, batch_size=2)
    assert (first.runs, first.stopped) == (3, MAX_RUNS)
    assert Run.objects.count() == 2
    second = purge_history(before=cutoff())
    assert (second.runs, second.stopped) == (2, "done")
    assert not Run.objects.exists()


def test_a_run_retried_between_the_read_and_the_delete_is_kept_whole(monkeypatch):
    failed = ended_days_ago(run_inline(Broken), 10)
    other = simple_ended(10)
    rows = rows_of([failed.pk])
    read_trees = batches.run_trees

    def retried_meanwhile(roots: Any) -> Any:
        workflows.retry_run(failed)  # after the candidates were read, before the delete
        return read_trees(roots)

    monkeypatch.setattr(batches, "run_trees", retried_meanwhile)
    report = purge_history(before=cutoff())

    assert (report.runs, report.kept) == (1, 1)
    assert not Run.objects.filter(pk=other.pk).exists()
    failed.refresh_from_db()
    assert failed.status not in ("failed",)
    after = rows_of([failed.pk])
    assert after["runs"] == 1 and after["steps"] == rows["steps"]
    assert after["events"] > rows["events"]  # the retry's own events, the old ones kept


@pytest.mark.django_db(transaction=True)
def test_a_run_retried_by_another_connection_after_the_read_is_kept_whole(monkeypatch):
    """The race for real on PostgreSQL: another connection retries the run and commits
    after the batch read it and before its delete. (On SQLite a batch holds the write
    lock from its read to its commit: no other writer can come between.)"""
    if is_sqlite():
        pytest.skip("SQLite: a batch's read and delete are under one write lock")
    failed = ended_days_ago(run_inline(Broken), 10)
    steps = rows_of([failed.pk])["steps"]
    read_trees = batches.run_trees

    def retried_meanwhile(roots: Any) -> Any:
        [outcome] = run_concurrently(lambda: workflows.retry_run(failed.pk))
        assert not isinstance(outcome, Exception), outcome
        return read_trees(roots)

    monkeypatch.setattr(batches, "run_trees", retried_meanwhile)
    report = purge_history(before=cutoff())

    assert (report.runs, report.kept) == (0, 1)
    after = rows_of([failed.pk])
    assert after["runs"] == 1 and after["steps"] == steps
    assert Run.objects.get(pk=failed.pk).status != "failed"


def test_a_run_whose_child_run_is_still_going_is_kept_until_the_child_ends():
    parent = ended_days_ago(rich_run(), 10)
    [child] = Run.objects.filter(parent_run=parent)
    Run.objects.filter(pk=child.pk).update(status="running")
    report = purge_history(before=cutoff())
    assert (report.runs, report.kept) == (0, 1)
    assert Run.objects.filter(pk__in=[parent.pk, child.pk]).count() == 2
    Run.objects.filter(pk=child.pk).update(status="cancelled")
    assert purge_history(before=cutoff()).runs == 1
    assert not Run.objects.filter(pk__in=[parent.pk, child.pk]).exists()


def test_members_of_a_flow_still_going_are_kept_and_an_ended_flow_goes_with_its_last_member():
    flow = workflows.create_flow("retention")
    first = flow_support.add(flow, "first")
    second = flow_support.add(flow, "second", after=("first",))
    flow_support.finish(first)
    ended_days_ago(first, 10)
    assert purge_history(before=cutoff()).runs == 0  # the flow is open: first stays
    workflows.seal_flow(flow)
    run_pending()  # second runs, completes, and the flow with it
    assert flow_support.flow_status(flow) == "completed"
    ended_days_ago(second, 9)
    flow_events = Event.objects.filter(flow=flow, run__isnull=True).count()
    assert flow_events
    report = purge_history(before=cutoff())
    assert (report.runs, report.flows) == (2, 1)
    assert not Flow.objects.filter(pk=flow.pk).exists()
    assert not Event.objects.filter(flow_id=flow.pk).exists()


def test_bad_bounds_are_refused_before_anything_is_deleted():
    simple_ended(10)
    for bounds in ({"batch_ms": 0}, {"max_runs": -1}, {"batch_size": 0}):
        with pytest.raises(InvalidInput, match="must be more than zero"):
            purge_history(before=cutoff(), **bounds)
    with pytest.raises(InvalidInput, match="time_limit"):
        purge_history(before=cutoff(), time_limit=timedelta(0))
    assert Run.objects.count() == 1


# The batch size adapts


def test_the_next_batch_grows_by_half_at_most_and_shrinks_to_the_target_at_once():
    sizer = BatchSizer(target=0.1)
    assert sizer.measured(10, 0.001) == 15  # far under the target: grows by half, no more
    assert sizer.measured(15, 0.0015) == 22
    assert sizer.measured(22, 0.22) == 10  # 10 ms a run: 10 runs make the 100 ms
    # Cheap again: it grows by half again, no faster.
    assert sizer.measured(10, 0.001) == 15
    assert sizer.measured(0, 5.0) == 15  # nothing deleted: nothing learnt
    assert sizer.measured(10, 10.0) == 1  # never under one run
    big = BatchSizer(target=100.0, size=LARGEST_BATCH)
    assert big.measured(LARGEST_BATCH, 0.001) == LARGEST_BATCH


# The sweeper's pass is bounded


def test_a_sweeper_pass_purges_for_its_time_budget_and_the_next_pass_goes_on(settings):
    for _ in range(25):
        simple_ended(10)
    settings.WORKFLOWS = {
        **settings.WORKFLOWS,
        "RETENTION": timedelta(days=7),
        # Shorter than any batch: a pass deletes its first batch and stops there.
        "RETENTION_PASS_TIME": timedelta(microseconds=1),
    }
    first = purge_finished_runs()
    assert first.done == 10  # the first batch's size, before anything was measured
    assert Run.objects.count() == 15
    assert purge_finished_runs(dry_run=True).found == 15
    while purge_finished_runs().done:
        pass
    assert not Run.objects.exists()


def test_a_pass_with_time_to_spare_purges_every_old_run(settings):
    for _ in range(12):
        simple_ended(10)
    settings.WORKFLOWS = {**settings.WORKFLOWS, "RETENTION": timedelta(days=7)}
    result = purge_finished_runs()
    assert (result.found, result.done) == (12, 12)


def test_retention_settings_are_checked(settings):
    from django.core.exceptions import ImproperlyConfigured

    from workflows.conf import workflow_settings

    for name, value in (
        ("RETENTION", timedelta(days=-1)),
        ("RETENTION_BATCH_MS", 0),
        ("RETENTION_PASS_TIME", timedelta(0)),
    ):
        settings.WORKFLOWS = {**settings.WORKFLOWS, name: value}
        with pytest.raises(ImproperlyConfigured, match=name):
            getattr(workflow_settings, name)


def test_time_limit_stops_between_batches():
    for _ in range(6):
        simple_ended(10)
    report = purge_history(before=cutoff(), batch_size=2, time_limit=timedelta(microseconds=1))
    assert (report.runs, report.batches, report.stopped) == (2, 1, TIME_LIMIT)
