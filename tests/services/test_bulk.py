"""Bulk operator verbs: a dry run that reads and advises, an applied bulk that acts run by
run and goes on past a refused or failing run, in bounded memory over any selection."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from io import StringIO
from typing import Any

import pytest
from django.core.exceptions import PermissionDenied
from django.core.management import call_command, load_command_class
from django.core.management.base import CommandError
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

import workflows
from tests.support import commands
from tests.support.handlers import BROKEN, WORK
from workflows import InvalidInput, Retry, Task, WaitForSignal, Workflow, services
from workflows.engine.guards import RUN_VERBS
from workflows.models import Event, Run, Step
from workflows.services.bulk import (
    _SERVICES,
    CHUNK_SIZE,
    MAX_IDS,
    BulkItem,
    bulk,
    iter_bulk,
    select_runs,
)
from workflows.status import RunStatus
from workflows.testing import run_pending

pytestmark = pytest.mark.django_db

ONCE = Retry(max_attempts=1)


class Held(Workflow):
    """Waits for a signal after its first step: a run that stays ``waiting``."""

    name = "bulk_held"
    first = Task(WORK, retry=ONCE)
    go = WaitForSignal("go")


class Quick(Workflow):
    name = "bulk_quick"
    first = Task(WORK, retry=ONCE)
    second = Task(WORK, retry=ONCE)


class Other(Workflow):
    name = "bulk_other"
    only = Task(WORK, retry=ONCE)


def started(workflow: type[Workflow], count: int = 1, *, broken: str = "", **kwargs: Any):
    """Start ``count`` runs and run them as far as they go (failing step ``broken``)."""
    if broken:
        BROKEN.add(broken)
    runs = [workflows.start_run(workflow, {"n": n}, **kwargs) for n in range(count)]
    run_pending()
    BROKEN.clear()
    return [Run.objects.get(pk=run.pk) for run in runs]


@pytest.fixture
def mixed() -> dict[str, list[Run]]:
    """Two waiting, two failed and one completed run, all with business key "mix"."""
    runs = {
        "waiting": started(Held, 2, business_key="mix"),
        "failed": started(Quick, 2, broken="second", business_key="mix"),
        "completed": started(Quick, 1, business_key="mix"),
    }
    for status, group in runs.items():
        assert [run.status for run in group] == [status] * len(group)
    return runs


def snapshot() -> tuple[int, int, list[tuple[Any, ...]]]:
    """Everything a bulk could write: events, steps, and every run's mutable columns."""
    return (
        Event.objects.count(),
        Step.objects.count(),
        list(Run.objects.order_by("pk").values_list("pk", "status", "version", "updated_at")),
    )


def by_run(items: list[BulkItem]) -> dict[str, BulkItem]:
    return {item.run: item for item in items}


# The verb table


def test_every_run_verb_has_a_service_that_exists():
    # A business key names one run: no bulk offers it, and a bulk of it says so.
    assert set(_SERVICES) | {"business_key"} == set(RUN_VERBS)
    with pytest.raises(InvalidInput, match="business_key is no bulk verb: a business key names"):
        bulk("business_key", Run.objects.all())
    for verb, spec in _SERVICES.items():
        assert callable(getattr(services, spec.function)), verb


def test_a_verb_whose_service_is_missing_is_refused_clearly(monkeypatch, mixed):
    monkeypatch.delattr(services, "retry_run")
    with pytest.raises(InvalidInput, match=r"bulk retry is not available: .*retry_run\(\)"):
        bulk("retry", Run.objects.all())


@pytest.mark.parametrize(
    ("verb", "options", "message"),
    [
        ("explode", {}, "unknown run verb 'explode'; choose from cancel, terminate"),
        ("retry", {"reason": "x"}, "retry takes no options; not reason"),
        ("cancel", {"from_step": "first"}, "cancel takes compensate, reason; not from_step"),
        ("rerun", {}, "rerun needs from_step"),
        ("cancel", {"compensate": "no"}, "compensate must be True or False"),
        ("cancel", {"reason": "a\x00b"}, "reason contains a NUL character"),
    ],
)
def test_bad_verbs_and_options_are_refused_before_anything_is_read(verb, options, message):
    with CaptureQueriesContext(connection) as queries, pytest.raises(InvalidInput) as refused:
        iter_bulk(verb, Run.objects.all(), dry_run=False, **options)
    assert message in refused.value.message
    assert queries.captured_queries == []


# Dry run


def test_dry_run_counts_and_gives_each_runs_reason_and_writes_nothing(mixed):
    before = snapshot()
    result = bulk("cancel", Run.objects.filter(business_key="mix"))
    assert snapshot() == before
    assert (result.verb, result.dry_run) == ("cancel", True)
    assert result.totals() == {"matched": 5, "eligible": 2, "skipped": 3}
    items = by_run(result.items)
    for run in mixed["waiting"]:
        assert items[str(run.pk)] == BulkItem(str(run.pk), "waiting", "eligible")
    for run in mixed["failed"] + mixed["completed"]:
        item = items[str(run.pk)]
        assert (item.status, item.outcome) == (run.status, "skipped")
        assert item.reason == (
            f"run is {run.status}; cancel needs blocked, paused, pending, queued, running, waiting"
        )


def test_dry_run_is_the_default_and_reads_the_verbs_own_guard(mixed):
    before = snapshot()
    result = workflows.bulk("retry", Run.objects.filter(business_key="mix"))
    assert snapshot() == before
    assert result.totals() == {"matched": 5, "eligible": 2, "skipped": 3}
    eligible = {item.run for item in result.items if item.outcome == "eligible"}
    assert eligible == {str(run.pk) for run in mixed["failed"]}


def test_dry_rerun_checks_the_step_name_in_each_run(mixed):
    selection = Run.objects.filter(business_key="mix")
    result = bulk("rerun", selection, from_step="second")
    assert result.totals() == {"matched": 5, "eligible": 3, "skipped": 2}
    held = bulk("rerun", selection.filter(workflow_name="bulk_quick"), from_step="go")
    assert held.totals() == {"matched": 3, "eligible": 0, "skipped": 3}
    assert {item.reason for item in held.items} == {"run has no step 'go'"}


def test_a_list_of_ids_keeps_its_order_and_reports_ids_of_no_run(mixed):
    failed, waiting = mixed["failed"][0], mixed["waiting"][0]
    missing = uuid.uuid4()
    result = bulk("retry", [str(failed.pk), missing, waiting.pk, str(failed.pk)])
    assert result.items == [
        BulkItem(str(failed.pk), "failed", "eligible"),
        BulkItem(str(missing), "", "skipped", "no run has this id"),
        BulkItem(
            str(waiting.pk),
            "waiting",
            "skipped",
            "run is waiting; retry needs cancelled, compensated, compensation_failed, failed, "
            "terminated",
        ),
    ]


def test_more_than_a_thousand_ids_are_refused_and_a_thousand_are_not():
    with pytest.raises(InvalidInput, match="more than 1,000 run ids; select that many runs with"):
        bulk("cancel", [uuid.uuid4() for _ in range(MAX_IDS + 1)])

    def endless() -> Iterator[uuid.UUID]:
        while True:
            yield uuid.uuid4()

    with pytest.raises(InvalidInput, match="more than 1,000 run ids"):
        bulk("cancel", endless())
    result = bulk("cancel", [uuid.uuid4() for _ in range(MAX_IDS)])
    assert result.totals() == {"matched": MAX_IDS, "eligible": 0, "skipped": MAX_IDS}


@pytest.mark.parametrize("runs", ["not-a-uuid", ["not-a-uuid"], Step.objects.all()])
def test_runs_that_are_not_runs_are_refused(runs):
    with pytest.raises(InvalidInput):
        bulk("cancel", runs)


def test_a_sliced_queryset_selects_its_slice(mixed):
    result = bulk("cancel", Run.objects.filter(business_key="mix").order_by("created_at")[:2])
    assert result.matched == 2


# Applied


def test_apply_acts_on_eligible_runs_and_skips_the_rest(mixed, django_user_model):
    operator = django_user_model.objects.create_user("operator")
    result = bulk(
        "cancel",
        Run.objects.filter(business_key="mix"),
        dry_run=False,
        user=operator,
        reason="bulk stop",
        compensate=False,
    )
    assert result.totals() == {"matched": 5, "done": 2, "skipped": 3, "failed": 0}
    items = by_run(result.items)
    for run in mixed["waiting"]:
        assert items[str(run.pk)] == BulkItem(str(run.pk), "cancelled", "done")
        run.refresh_from_db()
        assert run.status == "cancelled"
        assert run.error["message"] == "bulk stop"
        assert run.error["by"] == "operator"
    for run in mixed["failed"] + mixed["completed"]:
        assert items[str(run.pk)].outcome == "skipped"
        assert Run.objects.get(pk=run.pk).status == run.status


def test_one_failing_run_does_not_stop_the_batch(unregistered):
    failing = started(Other, 1, broken="only")[0]
    first, last = started(Quick, 2, broken="second")
    assert {failing.status, first.status, last.status} == {"failed"}
    unregistered(Other)  # its definition is gone: retrying it fails, the others go on
    result = bulk("retry", [first.pk, failing.pk, last.pk], dry_run=False)
    assert result.totals() == {"matched": 3, "done": 2, "skipped": 0, "failed": 1}
    assert [item.outcome for item in result.items] == ["done", "failed", "done"]
    broken = result.items[1]
    assert (broken.run, broken.status, broken.code) == (
        str(failing.pk),
        "failed",
        "definition_missing",
    )
    assert "bulk_other" in broken.reason
    run_pending()
    assert Run.objects.get(pk=first.pk).status == "completed"
    assert Run.objects.get(pk=last.pk).status == "completed"


def test_a_run_the_verb_refuses_after_the_read_is_skipped_with_the_verbs_reason(mixed):
    runs = iter_bulk("cancel", [run.pk for run in mixed["waiting"]], dry_run=False)
    first = next(runs)
    assert first.outcome == "done"
    # Cancelled by someone else between the bulk's read and its turn:
    services.cancel_run(mixed["waiting"][1].pk)
    second = next(runs)
    # A cancel leaves a cancelled run as it is: skipped, not counted as done.
    assert (second.outcome, second.status) == ("skipped", "cancelled")
    assert second.reason == "run is cancelled already; nothing to do"


def test_permission_denied_is_recorded_per_run(monkeypatch, mixed):
    refused_run = mixed["waiting"][0]
    cancel = services.request_cancel  # what a bulk cancel calls

    def guarded(run: Any, **options: Any) -> services.CancelRequest:
        if run == refused_run.pk:
            raise PermissionDenied("operators may not cancel this run")
        return cancel(run, **options)

    monkeypatch.setattr(services, "request_cancel", guarded)
    result = bulk("cancel", [run.pk for run in mixed["waiting"]], dry_run=False)
    assert [(item.outcome, item.code) for item in result.items] == [
        ("failed", "permission_denied"),
        ("done", ""),
    ]
    assert result.items[0].reason == "operators may not cancel this run"


def test_apply_rerun_from_a_step_named_in_every_run(mixed):
    quick = Run.objects.filter(business_key="mix", workflow_name="bulk_quick")
    result = bulk("rerun", quick, dry_run=False, from_step="second", reason="fixed")
    assert result.totals() == {"matched": 3, "done": 3, "skipped": 0, "failed": 0}
    run_pending()
    assert set(quick.values_list("status", flat=True)) == {"completed"}


# Filters


def test_select_runs_combines_its_filters(mixed):
    old = mixed["failed"][0]
    Run.objects.filter(pk=old.pk).update(created_at=timezone.now() - timezone.timedelta(days=3))
    assert select_runs(statuses=["failed", "waiting"]).count() == 4
    assert select_runs(workflow="bulk_held").count() == 2
    assert list(select_runs(older_than=timezone.timedelta(days=2))) == [old]
    assert select_runs(business_key="mix", statuses=["completed"]).count() == 1
    with pytest.raises(InvalidInput, match="unknown run status 'stuck'"):
        select_runs(statuses=["stuck"])


# The command


def run_command(*args: str) -> str:
    return commands.run_command("workflows_bulk", *args)


@pytest.mark.parametrize(
    ("verb", "needs"),
    [
        (["cancel"], "blocked, paused, pending, queued, running, waiting"),
        # The verb that takes a value, which its dry run checks too.
        (
            ["priority", "--priority", "50"],
            "blocked, cancelling, compensating, paused, pending, queued, running, waiting",
        ),
    ],
)
def test_command_dry_run_prints_a_line_per_run_and_totals(mixed, verb, needs):
    before = snapshot()
    output = run_command(*verb, "--business-key", "mix", "--dry-run")
    assert snapshot() == before
    lines = output.splitlines()
    assert lines[-1] == (
        f"dry run of {verb[0]}: 5 matched, 2 eligible, 3 skipped; nothing was changed"
    )
    for run in mixed["waiting"]:
        assert f"run {run.pk}: waiting: eligible" in lines
    completed = mixed["completed"][0]
    assert (
        f"run {completed.pk}: completed: skipped (run is completed; {verb[0]} needs {needs})"
    ) in lines


def test_command_json_reports_totals_and_runs(mixed):
    data = json.loads(
        run_command("retry", "--status", "failed", "waiting", "--workflow", "bulk_quick", "--json")
    )
    assert data["verb"] == "retry"
    assert data["dry_run"] is False
    assert data["totals"] == {"matched": 2, "done": 2, "skipped": 0, "failed": 0}
    assert {item["run"] for item in data["runs"]} == {str(run.pk) for run in mixed["failed"]}
    assert data["runs"][0].keys() == {"run", "status", "outcome", "reason", "code"}


def test_command_applies_with_verb_options(mixed):
    output = run_command(
        "cancel", "--status", "waiting", "--no-compensate", "--reason", "sunset"
    ).splitlines()
    assert output[-1] == "cancel: 2 matched, 2 done, 0 skipped, 0 failed"
    assert all(Run.objects.get(pk=run.pk).status == "cancelled" for run in mixed["waiting"])
    assert all(Run.objects.get(pk=run.pk).skip_compensation for run in mixed["waiting"])


def test_command_refuses_a_bulk_without_filters_unless_all_is_given(mixed):
    before = snapshot()
    for args in (["cancel"], ["cancel", "--dry-run"]):
        with pytest.raises(CommandError, match=r"no filter given.*pass --all to mean every run"):
            run_command(*args)
    assert snapshot() == before
    assert run_command("cancel", "--all", "--dry-run").splitlines()[-1] == (
        "dry run of cancel: 5 matched, 2 eligible, 3 skipped; nothing was changed"
    )


def test_command_exits_non_zero_when_a_run_failed(monkeypatch, mixed):
    def broken(run: Any, **options: Any) -> Run:
        raise workflows.StaleState()

    monkeypatch.setattr(services, "request_cancel", broken)
    out = StringIO()
    with pytest.raises(CommandError, match=r"^2 of 2 run\(s\) failed$"):
        call_command("workflows_bulk", "cancel", "--status", "waiting", stdout=out)
    assert "failed [stale_state] (Someone else changed this row first" in out.getvalue()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["cancel", "--older-than", "2"], "an age is a positive whole number followed by s, m"),
        (["cancel", "--older-than", "1.5h"], "got '1.5h'"),
        (["cancel", "--older-than", "0d"], "got '0d'"),
        (["cancel", "--older-than", "99999999999d"], "got '99999999999d'"),
        (["halt", "--all"], "unknown run verb 'halt'"),
        (["cancel", "--status", "stuck"], "unknown run status 'stuck'"),
        (["retry", "--all", "--reason", "x"], "retry takes no options; not reason"),
        (["rerun", "--all"], "rerun needs from_step"),
        (["cancel", "--all", "--user", "nobody"], "no user named 'nobody'"),
    ],
)
def test_command_refuses_bad_input_with_one_line(args, message, mixed):
    before = snapshot()
    with pytest.raises(CommandError, match=re.escape(message)) as refused:
        run_command(*args)
    assert "\n" not in str(refused.value)
    assert snapshot() == before


def test_command_older_than_selects_by_age(mixed):
    old = mixed["waiting"][0]
    Run.objects.filter(pk=old.pk).update(created_at=timezone.now() - timezone.timedelta(hours=3))
    output = run_command("cancel", "--older-than", "2h", "--dry-run").splitlines()
    assert output == [
        f"run {old.pk}: waiting: eligible",
        "dry run of cancel: 1 matched, 1 eligible, 0 skipped; nothing was changed",
    ]


# Priority: the one verb that takes a value


def changed_event(run: Run) -> dict[str, Any]:
    return Event.objects.filter(run=run, type="run.priority_changed").latest("id").payload


def test_command_help_says_how_to_pass_a_priority():
    parser = load_command_class("workflows", "workflows_bulk").create_parser(
        "manage.py", "workflows_bulk"
    )
    text = " ".join(parser.format_help().split())
    assert "--priority PRIORITY" in text
    assert "workflows_bulk priority --priority" in text


def test_command_priority_changes_each_eligible_run_as_the_user(mixed, django_user_model):
    django_user_model.objects.create_user("operator")
    output = run_command(
        "priority", "--priority", "-40", "--business-key", "mix", "--user", "operator"
    ).splitlines()
    assert output[-1] == "priority: 5 matched, 2 done, 3 skipped, 0 failed"
    for run in mixed["waiting"]:
        changed = Run.objects.get(pk=run.pk)
        assert (changed.status, changed.priority) == ("waiting", -40)
        assert changed_event(run) | {"by": "operator", "from": 0, "to": -40} == changed_event(run)
    for run in mixed["failed"] + mixed["completed"]:
        assert Run.objects.get(pk=run.pk).priority == 0
        assert not Event.objects.filter(run=run, type="run.priority_changed").exists()


def test_bulk_priority_calls_the_single_verbs_service(monkeypatch, mixed):
    calls: list[tuple[Any, int, Any]] = []
    change = services.change_priority

    def recorded(run: Any, priority: int, *, user: Any = None) -> Run:
        calls.append((run, priority, user))
        return change(run, priority, user=user)

    monkeypatch.setattr(services, "change_priority", recorded)
    waiting = [run.pk for run in mixed["waiting"]]
    result = bulk("priority", waiting, dry_run=False, priority=7, user=None)
    assert result.totals() == {"matched": 2, "done": 2, "skipped": 0, "failed": 0}
    assert calls == [(run_id, 7, None) for run_id in waiting]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["priority", "--all"], "priority needs priority: the new priority, -1000 to 1000"),
        (["priority", "--all", "--priority", "1001"], "priority must be an integer from -1000"),
        (["priority", "--all", "--priority", "high"], "PRIORITY must be a whole number, got"),
        (["cancel", "--all", "--priority", "5"], "cancel takes compensate, reason; not priority"),
    ],
)
def test_command_priority_refuses_a_missing_or_bad_value_as_the_single_verb_does(
    args, message, mixed
):
    before = snapshot()
    with pytest.raises(CommandError, match=re.escape(message)):
        run_command(*args)
    assert snapshot() == before


# Size: bounded memory and chunked reads


class ChunkReads:
    """Counts the selection's chunk reads (and every statement) without logging them all:
    an applied bulk runs more statements than Django's query log keeps."""

    def __init__(self) -> None:
        self.chunks = 0
        self.statements = 0

    def __call__(self, execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        self.statements += 1
        if 'FROM "workflows_run"' in sql and f"LIMIT {CHUNK_SIZE}" in sql:
            self.chunks += 1
        return execute(sql, params, many, context)


@pytest.mark.slow
def test_ten_thousand_runs_are_read_in_chunks_and_a_thousand_applied():
    Run.objects.bulk_create(
        Run(
            workflow_name="bulk_big",
            workflow_version=1,
            snapshot={},
            status=RunStatus.WAITING,
            business_key="apply" if n < 1_000 else "",
        )
        for n in range(10_000)
    )
    selection = Run.objects.filter(workflow_name="bulk_big")
    dry_reads = ChunkReads()
    with connection.execute_wrapper(dry_reads):
        dry = bulk("cancel", selection, compensate=False)
    assert dry.totals() == {"matched": 10_000, "eligible": 10_000, "skipped": 0}
    assert len({item.run for item in dry.items}) == 10_000
    # One read per chunk and one more that finds the end: nothing per run.
    assert dry_reads.statements == dry_reads.chunks == 10_000 // CHUNK_SIZE + 1

    applied_reads = ChunkReads()
    with connection.execute_wrapper(applied_reads):
        applied = bulk(
            "cancel", selection.filter(business_key="apply"), dry_run=False, compensate=False
        )
    assert applied.totals() == {"matched": 1_000, "done": 1_000, "skipped": 0, "failed": 0}
    # The selection is still read by chunks; the other statements are each verb's own.
    assert applied_reads.chunks == 1_000 // CHUNK_SIZE + 1
    assert selection.filter(status="cancelled").count() == 1_000
    assert selection.filter(status="waiting").count() == 9_000
