"""Bulk recovery of stuck units (issue #41, point 6): ``bulk(verb, units=...)`` over the
steps, fan-out items or compensations a filter selects — revoke, fail_step, retry_step —
with a dry run that writes nothing and an apply that fences each unit as if alone."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.core.management import load_command_class
from django.utils import timezone

import workflows
from tests.support import commands
from tests.support.handlers import BOOM
from tests.support.revoke import (
    Parcels,
    Undoing,
    Wedged,
    running_compensation,
    running_item,
    running_load,
)
from tests.support.threads import run_concurrently
from workflows import InvalidInput, Retry, Task, Workflow
from workflows.engine import claim_step
from workflows.models import CompensationRecord, Event, FanOutItem, Run, Step
from workflows.services import bulk_units
from workflows.services.bulk import UnitFilter, bulk
from workflows.services.bulk_units import iter_bulk_units
from workflows.testing import run_pending

pytestmark = pytest.mark.django_db


class Failing(Workflow):
    name = "bulk_units_failing"
    only = Task(BOOM, retry=Retry(max_attempts=1))


def ready_loads(count: int) -> list[Step]:
    """``count`` runs of :class:`Wedged` whose step ``load`` is ready (never started)."""
    runs = [workflows.start_run(Wedged) for _ in range(count)]
    return [Step.objects.get(run=run, name="load") for run in runs]


def written() -> tuple[int, list[tuple[str, int]]]:
    """What a dry run must leave as it is: the events, and each unit's status and version."""
    units = [
        (f"{model.__name__}:{pk}:{status}", version)
        for model in (Step, FanOutItem, CompensationRecord)
        for pk, status, version in model.objects.values_list("pk", "status", "version")
    ]
    return Event.objects.count(), sorted(units)


# -- refusals -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("units", "field", "words"),
    [
        ({"kind": "run"}, "kind", "unknown unit kind 'run'"),
        ({"kind": "compensation", "statuses": ["waiting"]}, "statuses", "does not exist"),
        ({"kind": "step", "statuses": ["asleep"]}, "statuses", "step status 'asleep'"),
        ({"kind": "step", "workflow": "no_such_flow"}, "workflow", "no workflow is called"),
        ({"kind": "step", "older_than": "2h"}, "older_than", "must be a duration"),
        ({"kind": "step", "older_than": timedelta(-1)}, "older_than", "between 0 and 100"),
        ({"kind": "step", "held_on": "gate"}, "held_on", "cannot be selected by hold 'gate'"),
        ({"kind": "step", "queue": "q" * 61}, "queue", "queue"),
        ({"kind": "step", "colour": "red"}, "colour", "not colour"),
    ],
)
def test_a_bad_filter_is_refused_naming_its_field(units: dict[str, Any], field: str, words: str):
    before = written()
    with pytest.raises(InvalidInput) as refused:
        bulk("fail_step", units=units, dry_run=False)
    assert words in refused.value.message
    # Named in the error's details, or (a text check's) in its message.
    assert refused.value.details.get("field", field) == field
    assert field in refused.value.message or refused.value.details["field"] == field
    assert written() == before


@pytest.mark.parametrize("kind", ["item", "compensation"])
def test_retry_step_of_an_item_or_compensation_is_refused_with_the_rule(kind: str):
    for dry_run in (True, False):
        with pytest.raises(InvalidInput) as refused:
            bulk("retry_step", units={"kind": kind}, dry_run=dry_run)
        assert f"retry_step does not apply to {kind}s" in refused.value.message
        assert refused.value.details["field"] == "kind"


def test_an_unknown_verb_an_option_it_does_not_take_and_two_selections_are_refused():
    with pytest.raises(InvalidInput, match="unknown unit verb 'cancel'"):
        bulk("cancel", units={"kind": "step"})
    with pytest.raises(InvalidInput, match="retry_step takes no options; not reason"):
        bulk("retry_step", units={"kind": "step"}, reason="why")
    with pytest.raises(InvalidInput, match="exactly one of runs and units"):
        bulk("revoke", Run.objects.all(), units={"kind": "step"})
    with pytest.raises(InvalidInput, match="exactly one of runs and units"):
        bulk("revoke")
    with pytest.raises(InvalidInput, match="units must be a UnitFilter or a mapping"):
        bulk("revoke", units="step")


# -- dry run --------------------------------------------------------------------------


def test_a_dry_run_advises_per_unit_and_writes_nothing():
    ready = ready_loads(2)
    _, running = running_load("w-1")
    before = written()
    result = bulk("revoke", units=UnitFilter(kind="step", workflow=Wedged.name))
    assert written() == before
    assert (result.units, result.matched, result.eligible, result.skipped) == ("step", 3, 1, 2)
    by_unit = {item.unit: item for item in result.items}
    assert by_unit[running.pk].outcome == "eligible"
    assert by_unit[running.pk].attempt == 1
    assert by_unit[ready[0].pk].reason == "step is ready; revoke needs running"


# -- applied --------------------------------------------------------------------------


def test_revoke_takes_every_running_lease_and_the_work_runs_again():
    loads = [running_load(f"w-{n}")[1] for n in range(3)]
    result = bulk(
        "revoke", units={"kind": "step", "held_on": "lease"}, dry_run=False, reason="wedged"
    )
    assert result.totals() == {"matched": 3, "done": 3, "skipped": 0, "failed": 0}
    assert {item.status for item in result.items} == {"ready"}
    assert Event.objects.filter(type="lease.revoked", step__in=loads).count() == 3


def test_fail_step_ends_ready_steps_and_fails_their_runs():
    loads = ready_loads(2)
    result = bulk(
        "fail_step",
        units={"kind": "step", "statuses": ["ready"], "workflow": Wedged.name, "queue": "default"},
        dry_run=False,
        reason="nobody serves it",
    )
    assert result.totals() == {"matched": 2, "done": 2, "skipped": 0, "failed": 0}
    for step in loads:
        step.refresh_from_db()
        assert step.status == "failed"
        assert step.error["code"] == "failed_by_operator"
        assert step.error["reason"] == "nobody serves it"
        assert Run.objects.get(pk=step.run_id).status == "failed"
        assert Event.objects.filter(type="unit.failed_by_operator", step=step).exists()


def test_fail_step_of_a_running_item_counts_against_its_fanout():
    run, item = running_item("p1", "w-1")
    result = bulk("fail_step", units={"kind": "item", "held_on": "lease"}, dry_run=False)
    assert [(entry.unit, entry.outcome, entry.status) for entry in result.items] == [
        (item.pk, "done", "failed")
    ]
    fanout = Step.objects.get(run=run, name="ship")
    assert (fanout.status, fanout.items_failed) == ("failed", 1)
    assert Run.objects.get(pk=run.pk).status in ("failed", "compensated")


def test_fail_step_of_a_running_compensation_leaves_its_run_compensation_failed():
    run, record = running_compensation("w-1")
    result = bulk("fail_step", units={"kind": "compensation"}, dry_run=False)
    assert result.done == 1
    run_pending()
    assert CompensationRecord.objects.get(pk=record.pk).status == "failed"
    assert Run.objects.get(pk=run.pk).status == "compensation_failed"


def test_retry_step_runs_failed_steps_again():
    runs = [workflows.start_run(Failing) for _ in range(2)]
    run_pending()
    result = bulk(
        "retry_step",
        units={"kind": "step", "statuses": ["failed"], "workflow": Failing.name},
        dry_run=False,
    )
    assert result.done == 2
    assert {Run.objects.get(pk=run.pk).status for run in runs} == {"running"}


def test_a_fanout_step_is_advised_to_act_on_its_items():
    running_item("p1", "w-1")
    result = bulk("fail_step", units={"kind": "step", "workflow": Parcels.name})
    [fanout] = [item for item in result.items if item.step == "ship"]
    assert fanout.reason.startswith("a fan-out step holds no work itself")


def test_older_than_selects_units_unchanged_for_that_long():
    old, _young = ready_loads(2)
    Step.objects.filter(pk=old.pk).update(updated_at=timezone.now() - timedelta(hours=3))
    result = bulk("fail_step", units={"kind": "step", "older_than": timedelta(hours=2)})
    assert [item.unit for item in result.items] == [old.pk]


# -- fencing and the keyset -----------------------------------------------------------


def test_keyset_visits_each_unit_once_while_the_verb_moves_units_out(monkeypatch):
    monkeypatch.setattr(bulk_units, "CHUNK_SIZE", 2)
    loads = [running_load(f"w-{n}")[1] for n in range(5)]
    result = bulk("revoke", units={"kind": "step", "held_on": "lease"}, dry_run=False)
    assert [item.unit for item in result.items] == sorted(step.pk for step in loads)
    assert result.done == 5


def test_a_unit_that_moved_on_after_it_was_read_is_refused_not_overwritten():
    _, second = ready_loads(2)
    results = iter_bulk_units("fail_step", {"kind": "step", "statuses": ["ready"]}, dry_run=False)
    assert next(results).outcome == "done"
    claim_step(second.pk, "w-late")  # the second unit was read ready, in its chunk
    late = next(results)
    assert (late.unit, late.outcome) == (second.pk, "skipped")
    assert "moved on since it was read" in late.reason
    second.refresh_from_db()
    assert (second.status, second.lease_owner) == ("running", "w-late")


@pytest.mark.django_db(transaction=True)
def test_a_unit_claimed_by_another_connection_between_read_and_apply_is_refused():
    """The claim comes from a connection of its own, committed before the bulk reaches
    the unit: on PostgreSQL the fail's compare-and-set sees the committed claim."""
    _, second = ready_loads(2)
    results = iter_bulk_units("fail_step", {"kind": "step", "statuses": ["ready"]}, dry_run=False)
    assert next(results).outcome == "done"
    [claimed] = run_concurrently(lambda: claim_step(second.pk, "w-other"))
    assert claimed.attempt == 1
    late = next(results)
    assert late.outcome == "skipped" and "moved on since it was read" in late.reason
    second.refresh_from_db()
    assert (second.status, second.attempt, second.lease_owner) == ("running", 1, "w-other")


def test_bulk_equals_the_single_verb_per_unit():
    """The bulk's outcome for each unit is the single verb's on that unit alone."""
    ready = ready_loads(2)
    result = bulk("fail_step", units={"kind": "step", "workflow": Wedged.name}, dry_run=False)
    alone = ready_loads(2)
    for step in alone:
        workflows.services.fail_step(step.pk)
    got = sorted(
        Step.objects.filter(pk__in=[s.pk for s in ready]).values_list("status", "error__code")
    )
    expected = sorted(
        Step.objects.filter(pk__in=[s.pk for s in alone]).values_list("status", "error__code")
    )
    assert got == expected and result.done == 2


def test_undoing_run_compensation_can_be_revoked_in_bulk():
    running_compensation("w-1")
    result = bulk("revoke", units={"kind": "compensation", "workflow": Undoing.name}, dry_run=False)
    assert (result.done, result.items[0].status) == (1, "ready")


# -- the command ----------------------------------------------------------------------


def test_command_dry_run_then_apply_over_units():
    loads = [running_load(f"w-{n}")[1] for n in range(2)]
    dry = commands.run_command(
        "workflows_bulk", "revoke", "--units", "step", "--held-on", "lease", "--dry-run"
    )
    assert f"step {loads[0].pk} (run " in dry and "running, attempt 1: eligible" in dry
    assert dry.strip().endswith(
        "dry run of revoke: 2 matched, 2 eligible, 0 skipped; nothing was changed"
    )
    assert {Step.objects.get(pk=step.pk).status for step in loads} == {"running"}
    done = commands.run_json(
        "workflows_bulk", "revoke", "--units", "step", "--held-on", "lease", "--reason", "wedged"
    )
    assert done["kind"] == "step"
    assert done["totals"] == {"matched": 2, "done": 2, "skipped": 0, "failed": 0}
    assert [unit["status"] for unit in done["units"]] == ["ready", "ready"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["fail_step", "--units", "step"], "no filter given"),
        (["fail_step", "--units", "step", "--status", "asleep"], "step status 'asleep'"),
        (["retry_step", "--units", "item", "--all"], "retry_step does not apply to items"),
        (["fail_step", "--units", "step", "--workflow", "nope"], "no workflow is called 'nope'"),
        (["fail_step", "--units", "step", "--held-on", "gate"], "cannot be selected by hold"),
        (["fail_step", "--units", "step", "--older-than", "2 h"], "an age is a positive"),
        (["fail_step", "--units", "step", "--business-key", "b"], "--business-key selects runs"),
        (["fail_step", "--queue", "q"], "--queue and --held-on select units"),
        (["cancel", "--units", "step", "--all"], "unknown unit verb 'cancel'"),
        (["fail_step", "--units", "step", "--all", "--priority", "3"], "not priority"),
    ],
)
def test_command_refusals_name_the_problem(args: list[str], message: str):
    commands.refused("workflows_bulk", *args, message=message)


def test_command_help_says_how_to_recover_units():
    parser = load_command_class("workflows", "workflows_bulk").create_parser(
        "manage.py", "workflows_bulk"
    )
    text = parser.format_help()
    for words in ("--units KIND", "--held-on", "revoke, fail_step, retry_step", "--queue"):
        assert words in " ".join(text.split())


@pytest.mark.django_db(transaction=True)
def test_two_bulks_at_once_act_on_each_unit_once():
    """Two operators apply the same bulk at the same instant, each on a connection of its
    own: every unit is failed by exactly one of them, the other skips it."""
    loads = ready_loads(6)
    units = {"kind": "step", "statuses": ["ready"], "workflow": Wedged.name}
    first, second = run_concurrently(
        lambda: bulk("fail_step", units=units, dry_run=False, reason="a"),
        lambda: bulk("fail_step", units=units, dry_run=False, reason="b"),
    )
    assert first.failed == second.failed == 0
    assert first.done + second.done == len(loads)
    done = [
        item.unit for result in (first, second) for item in result.items if item.outcome == "done"
    ]
    assert sorted(done) == sorted(step.pk for step in loads)
    failed = Event.objects.filter(type="unit.failed_by_operator", step__in=loads)
    assert failed.count() == len(loads)
