"""``workflows_revoke RUN STEP [--item KEY | --compensation]``, and ``workflows_cancel`` on
a run cancelled already (it says so and exits 0)."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import CommandError

import workflows
from tests.support import commands, revoke
from tests.support.commands import run_command
from tests.support.revoke import Parcels, Wedged
from workflows.engine import claim_step
from workflows.models import CompensationRecord, Event, FanOutItem, Run, Step
from workflows.testing import run_pending

pytestmark = pytest.mark.django_db


def refused(*args: str, message: str) -> None:
    """The command fails with ``message`` (a literal) and writes no history."""
    commands.refused("workflows_revoke", *args, message=message)


def running_load(business_key: str | None = None) -> tuple[Run, Step]:
    return revoke.running_load("host-1:7:7", business_key=business_key)


def test_revoke_a_step_by_run_and_name_and_say_what_happened():
    run, _ = running_load()
    User.objects.create_user("operator")
    output = run_command(
        "workflows_revoke",
        str(run.pk)[:8],
        "load",
        "--attempt",
        "1",
        "--reason",
        "hung",
        "--user",
        "operator",
    )
    assert output == (
        f"revoked attempt 1 of step 'load' of run {run.pk} (held by 'host-1:7:7'): now ready; "
        "it runs again, 1 attempt(s) left\n"
    )
    payload = Event.objects.get(run=run, type="lease.revoked").payload
    assert (payload["by"], payload["reason"]) == ("operator", "hung")
    run_pending()
    assert Run.objects.get(pk=run.pk).status == "completed"


def test_revoke_by_business_key_and_step_id_as_json():
    _, step = running_load("order-42")
    summary = json.loads(
        run_command(
            "workflows_revoke",
            "--business-key",
            "order-42",
            str(step.pk),
            "--attempt",
            "1",
            "--json",
        )
    )
    assert {key: summary[key] for key in ("kind", "id", "status", "revoked_owner")} == {
        "kind": "step",
        "id": step.pk,
        "status": "ready",
        "revoked_owner": "host-1:7:7",
    }
    assert summary["failure_class"] == "revoked"
    assert (summary["revoked"], summary["reason"]) == (True, None)


def test_revoke_an_item_and_a_compensation():
    run, item = revoke.running_item("p1", "host-2:1:1")
    output = run_command("workflows_revoke", str(run.pk), "ship", "--item", "p1", "--attempt", "1")
    assert output.startswith("revoked attempt 1 of item 'p1' of step 'ship' of run ")
    assert FanOutItem.objects.get(pk=item.pk).status == "ready"

    undoing, record = revoke.running_compensation("host-3:1:1")
    output = run_command(
        "workflows_revoke", str(undoing.pk), "reserve", "--compensation", "--attempt", "1"
    )
    assert output.startswith("revoked attempt 1 of compensation of step 'reserve' of run ")
    assert CompensationRecord.objects.get(pk=record.pk).status == "ready"


def test_refusals_exit_non_zero_with_the_reason():
    run, _ = running_load()
    one = ("--attempt", "1")
    refused(str(run.pk), "nope", *one, message=f"run {run.pk} has no step 'nope' (its steps: load)")
    refused("load", *one, message="name the run by RUN (its id or a prefix) or by --business-key")
    refused(str(run.pk), "load", "--user", "ghost", *one, message="no user named 'ghost'")
    refused(str(run.pk), "load", message="the following arguments are required: --attempt")
    refused(str(run.pk), "load", "--attempt", "0", message="expected_attempt must be 1 or more")
    parcels = workflows.start_run(Parcels)
    refused(str(parcels.pk), "ship", "--item", "zz", *one, message="step 'ship' has no item 'zz'")
    refused(str(parcels.pk), "ship", *one, message="revoke one of its running items")
    with pytest.raises(CommandError, match="not allowed with argument"):
        run_command(
            "workflows_revoke", str(parcels.pk), "ship", "--item", "p1", "--compensation", *one
        )


def test_a_repeat_or_a_replaced_attempt_revokes_nothing_and_exits_3():
    run, step = running_load()
    run_command("workflows_revoke", str(run.pk), "load", "--attempt", "1")
    with pytest.raises(CommandError) as again:
        run_command("workflows_revoke", str(run.pk), "load", "--attempt", "1")
    assert again.value.returncode == 3
    assert str(again.value) == (
        f"not revoked (already_revoked): attempt 1 of step 'load' of run {run.pk} was revoked "
        "already (a repeated request); it is ready in attempt 1"
    )
    claim_step(step.pk, "host-2:2:2")
    with pytest.raises(
        CommandError,
        match=r"\(replaced\): .* newer attempt, which was left alone; it is running in attempt 2",
    ):
        run_command("workflows_revoke", str(run.pk), "load", "--attempt", "1")
    assert Event.objects.filter(run=run, type="lease.revoked").count() == 1
    assert Step.objects.get(pk=step.pk).status == "running"


def test_the_help_says_what_a_revoke_does(capsys):
    with pytest.raises(SystemExit):
        call_command("workflows_revoke", "--help")
    shown = " ".join(capsys.readouterr().out.split())
    assert "without using up an attempt" in shown
    assert "--attempt N" in shown
    assert "--item KEY" in shown and "--compensation" in shown and "--business-key KEY" in shown


# -- workflows_cancel, twice -------------------------------------------------------------


def test_a_second_cancel_says_so_and_exits_zero():
    run = workflows.start_run(Wedged)
    first = run_command("workflows_cancel", str(run.pk))
    assert first == f"run {run.pk} of {Wedged.name} v1: cancelled\n"
    version = Run.objects.get(pk=run.pk).version
    again = run_command("workflows_cancel", str(run.pk), "--reason", "again")
    assert again == (
        f"run {run.pk} of {Wedged.name} v1: cancelled (cancelled already; nothing changed)\n"
    )
    assert Run.objects.get(pk=run.pk).version == version
    assert json.loads(run_command("workflows_cancel", str(run.pk), "--json"))["already"] is True


def test_cancelling_a_terminated_run_says_it_was_terminated_and_a_completed_one_is_refused():
    run = workflows.start_run(Wedged)
    workflows.terminate_run(run)
    output = run_command("workflows_cancel", str(run.pk))
    assert output.endswith(": terminated (terminated already; nothing changed)\n")
    done = workflows.start_run(Wedged)
    run_pending()
    with pytest.raises(CommandError, match="run is completed; cancel needs"):
        run_command("workflows_cancel", str(done.pk))
