"""Commands that take ``--user`` ask the verb table (``workflows.services.access``) what the
user must hold, and every run-verb command names its run the same way: an id, a unique
id prefix of at least 4 characters, or ``--business-key``."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

import workflows
from tests.support.commands import run_command
from tests.support.runs import claimed, run_inline
from tests.support.users import staff
from tests.support.verb_access import Leased, Reviewed, Waiting, recording
from workflows import PermanentError, Retry, Task, Workflow
from workflows.models import Run
from workflows.services.access import (
    CHANGE_BUDGETS,
    DECIDE_GATES,
    OPERATE_RUNS,
    VERBS,
    Access,
)
from workflows.testing import run_pending

pytestmark = pytest.mark.django_db

HERE = "tests.commands.test_command_permissions"


def fail(ctx: Any) -> None:
    raise PermanentError("broken")


class Failing(Workflow):
    name = "permcmd_failing"
    load = Task(f"{HERE}.fail", retry=Retry(max_attempts=1))


@pytest.fixture
def asked(monkeypatch: pytest.MonkeyPatch) -> list[Access]:
    """The rows a command asked about the user ``--user`` names."""
    return recording(monkeypatch, "check_named")


def waiting(business_key: str = "") -> Run:
    run = workflows.start_run(Waiting, {}, business_key=business_key or None)
    run_pending()
    return run


def failed(business_key: str = "") -> Run:
    run = run_inline(Failing, {}, business_key=business_key or None)
    assert run.status == "failed"
    return run


# -- the verb table, asked by every command that takes --user -----------------------------


def test_a_run_verb_records_a_named_user_with_or_without_operate_run(asked):
    """Run verbs hold a signed-in user (admin, API) to operate_run; the command line is
    trusted code, and --user names the actor recorded, as the security guide says."""
    staff("operator", "operate_run")
    staff("clerk")
    for username in ("operator", "clerk"):
        run = waiting()
        run_command("workflows_cancel", str(run.pk), "--user", username)
        assert run.events.get(type="run.cancel_requested").payload["by"] == username
    assert asked == [OPERATE_RUNS, OPERATE_RUNS]


def test_revoke_records_a_named_user_as_the_run_verbs_do(asked):
    staff("clerk")
    run = workflows.start_run(Leased, {})
    claimed(run, "work", "wedged-worker")
    run_command("workflows_revoke", str(run.pk), "work", "--attempt", "1", "--user", "clerk")
    assert run.events.get(type="lease.revoked").payload["by"] == "clerk"
    assert asked == [OPERATE_RUNS] and VERBS["revoke"] is OPERATE_RUNS


def test_a_run_verb_follows_the_table_when_it_holds_named_users(monkeypatch):
    monkeypatch.setitem(VERBS, "pause", replace(OPERATE_RUNS, named=True))
    staff("clerk")
    run = waiting()
    with pytest.raises(CommandError, match="operating runs needs the permission"):
        run_command("workflows_pause", str(run.pk), "--user", "clerk")
    assert Run.objects.get(pk=run.pk).status == "waiting"


def test_a_budget_verb_needs_operate_run_of_a_named_user(asked):
    staff("operator", "operate_run")
    staff("clerk")
    reset = ("workflows_budgets", "reset", Waiting.name, "tokens", "--user")
    with pytest.raises(CommandError, match="changing a budget needs the permission"):
        run_command(*reset, "clerk")
    assert "budget 'tokens' of verb_access_waiting: 0 used" in run_command(*reset, "operator")
    assert asked[:2] == [CHANGE_BUDGETS, CHANGE_BUDGETS]


def test_a_gate_verb_asks_the_gates_rule(asked):
    staff("approver", "view_step")
    staff("clerk")
    run = workflows.start_run(Reviewed, {})
    run_pending()
    gate = run.steps.get(name="review")
    with pytest.raises(CommandError, match="may not decide gate 'review'"):
        run_command("workflows_approve", str(gate.pk), "--user", "clerk")
    run_command("workflows_approve", str(gate.pk), "--user", "approver")
    gate.refresh_from_db()
    assert (gate.decision, gate.decided_by.username) == ("approved", "approver")
    assert asked == [DECIDE_GATES, DECIDE_GATES]


# -- one run selector ----------------------------------------------------------------------


def test_cancel_names_a_run_by_id_prefix_or_business_key():
    by_prefix, by_key = waiting(), waiting("order-7")
    output = run_command("workflows_cancel", str(by_prefix.pk)[:8], "--no-compensate")
    assert output == f"run {by_prefix.pk} of verb_access_waiting v1: cancelled\n"
    output = run_command("workflows_cancel", "--business-key", "order-7", "--no-compensate")
    assert output == f"run {by_key.pk} of verb_access_waiting v1: cancelled\n"


def test_retry_names_a_run_by_id_prefix_or_business_key():
    by_prefix, by_key = failed(), failed("order-8")
    output = run_command("workflows_retry", str(by_prefix.pk)[:6])
    assert output == f"run {by_prefix.pk} of permcmd_failing v1: running\n"
    output = run_command("workflows_retry", "--business-key", "order-8")
    assert output == f"run {by_key.pk} of permcmd_failing v1: running\n"


@pytest.mark.parametrize("command", ["workflows_cancel", "workflows_retry", "workflows_pause"])
def test_every_run_verb_command_refuses_the_same_way(command):
    run = failed("twice") if command == "workflows_retry" else waiting("twice")
    (failed if command == "workflows_retry" else waiting)("twice")
    refusals = [
        ((), "name the run by RUN (its id or a prefix) or by --business-key"),
        ((str(run.pk), "--business-key", "twice"), "exactly one of them"),
        (("--business-key", "twice"), "more than one run has business key 'twice'"),
        (("--business-key", "nobody"), "no run has business key 'nobody'"),
        (("ffffffff",), "no run has id prefix 'ffffffff'"),
        (("ab",), "at least 4 hexadecimal characters"),
        (("not-a-run",), "'not-a-run' is neither a run id nor a prefix of one"),
    ]
    if command == "workflows_retry":
        refusals[0] = ((), "one of the arguments RUN --step is required")
    for args, message in refusals:
        with pytest.raises(CommandError, match=re.escape(message)):
            run_command(command, *args)


def test_retry_takes_a_step_or_a_run_not_both():
    run = failed("both")
    step = run.steps.get(name="load")
    for args in ((str(run.pk),), ("--business-key", "both")):
        with pytest.raises(CommandError, match="argument --step: not allowed with argument"):
            run_command("workflows_retry", "--step", str(step.pk), *args)


@pytest.mark.parametrize("command", ["workflows_cancel", "workflows_retry"])
def test_the_help_says_how_to_name_a_run(command, capsys):
    with pytest.raises(SystemExit):
        call_command(command, "--help")
    shown = " ".join(capsys.readouterr().out.split())
    assert "a unique id prefix, or --business-key" in shown
    assert "--business-key KEY" in shown
