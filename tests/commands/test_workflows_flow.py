"""``workflows_flow`` (list, show, seal, cancel a flow) and the flows line of
``workflows_status``: what they print, what they change, and refusals that name the
problem, exit non-zero and write nothing."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from typing import Any
from uuid import UUID

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection

import workflows
from tests.acceptance.harness import MANAGE, database_url
from tests.support import commands
from tests.support.workflows import Broken, Waits, Work
from workflows.models import Event, Flow, Run
from workflows.queries.flows import flow_graph
from workflows.testing import run_pending

pytestmark = pytest.mark.django_db


def run_command(*args: str) -> str:
    return commands.run_command("workflows_flow", *args)


def run_json(*args: str) -> Any:
    return commands.run_json("workflows_flow", *args)


def refused(*args: str, message: str) -> None:
    """``workflows_flow *args`` must fail with ``message`` (a literal) and write nothing."""
    flows = list(Flow.objects.values_list("status", "revision"))
    commands.refused("workflows_flow", *args, message=message)
    assert list(Flow.objects.values_list("status", "revision")) == flows


def waiting_flow(key: str | None = None) -> Flow:
    """``extract`` waits for a signal; ``load`` is blocked behind it."""
    flow = workflows.create_flow("nightly", key=key)
    workflows.add_to_flow(flow, Waits, {}, member="extract")
    workflows.add_to_flow(flow, Work, {}, member="load", after=["extract"])
    run_pending()
    flow.refresh_from_db()
    return flow


def status_of(flow: Flow, member: str) -> str:
    return Run.objects.get(flow_member__flow=flow, flow_member__name=member).status


# -- show ------------------------------------------------------------------------------------


def test_show_prints_the_flow_and_each_member_with_its_join_and_upstreams():
    flow = waiting_flow(key="nightly-7")
    extract, load = (flow_graph(flow).member(name).run_id for name in ("extract", "load"))
    lines = run_command("show", str(flow.pk)).splitlines()
    assert lines[:3] == [
        f"flow {flow.pk} 'nightly' (key 'nightly-7'): open, revision {flow.revision}",
        "2 members, 1 edge: 1 blocked, 1 waiting",
        "",
    ]
    assert lines[3].split() == ["MEMBER", "STATUS", "WORKFLOW", "JOIN", "UPSTREAM", "RUN", "ERROR"]
    assert lines[4].split() == [
        "extract",
        "waiting",
        Waits.name,
        "all",
        "-",
        str(extract),
        "-",
    ]
    assert lines[5].split() == ["load", "blocked", Work.name, "all", "extract", str(load), "-"]


def test_show_names_the_members_that_did_not_complete_and_why():
    flow = workflows.create_flow("breaks")
    workflows.add_to_flow(flow, Broken, {}, member="extract")
    workflows.add_to_flow(flow, Work, {}, member="load", after=["extract"])
    workflows.seal_flow(flow)
    run_pending()
    output = run_command("show", str(flow.pk))
    assert f"flow {flow.pk} 'breaks': failed" in output
    assert "not completed: extract (failed), load (cancelled)" in output
    load_row = next(line for line in output.splitlines() if line.startswith("load "))
    assert "dependency_failed: " in load_row and "extract" in load_row


def test_show_json_is_the_graph_every_surface_reads():
    flow = waiting_flow()
    shown = run_json("show", str(flow.pk))
    assert shown == json.loads(json.dumps(flow_graph(flow).as_dict()))
    assert shown["edges"] == [{"upstream": "extract", "downstream": "load"}]
    assert [(m["name"], m["status"], m["join"], m["upstream"]) for m in shown["members"]] == [
        ("extract", "waiting", "all", []),
        ("load", "blocked", "all", ["extract"]),
    ]
    assert (shown["status"], shown["revision"]) == ("open", flow.revision)


def test_an_empty_flow_says_it_has_no_members():
    flow = workflows.create_flow("empty")
    assert run_command("show", str(flow.pk)).splitlines()[1:] == [
        "0 members, 0 edges",
        "no members yet",
    ]


# -- naming the flow -------------------------------------------------------------------------


def test_a_flow_is_named_by_its_id_a_unique_prefix_or_its_key():
    flow = waiting_flow(key="by-key")
    for args in (
        (str(flow.pk),),
        (str(flow.pk)[:6],),
        (str(flow.pk)[:13].upper(),),
        ("--key", "by-key"),
    ):
        assert run_json("show", *args)["id"] == str(flow.pk)


def test_a_flow_that_is_not_there_or_not_one_is_refused():
    flow = waiting_flow(key="only")
    # Two flows sharing a prefix: rows of chosen ids, read by nothing but the selector;
    # listed newest first.
    for last in "12":
        Flow.objects.create(id=UUID(f"abcd0000-0000-4000-8000-00000000000{last}"), name="twin")
    refusals = [
        ((), "name the flow by FLOW (its id or a prefix) or by --key: exactly one of them"),
        ((str(flow.pk), "--key", "only"), "exactly one of them"),
        (("--key", "nobody"), "no flow has key 'nobody'"),
        (
            ("ffffffff-ffff-4fff-8fff-ffffffffffff",),
            "no flow has id ffffffff-ffff-4fff-8fff-ffffffffffff",
        ),
        (("fffffff",), "no flow has id prefix 'fffffff'"),
        (("ab",), "at least 4 hexadecimal characters"),
        (("not-a-flow",), "'not-a-flow' is neither a flow id nor a prefix of one"),
        (
            ("abcd",),
            "more than one flow has id prefix 'abcd' (abcd0000-0000-4000-8000-000000000002, "
            "abcd0000-0000-4000-8000-000000000001); name one by its id",
        ),
    ]
    for verb in ("show", "seal", "cancel"):
        for args, message in refusals:
            refused(verb, *args, message=message)


# -- seal ------------------------------------------------------------------------------------


def test_seal_closes_the_flow_and_it_ends_once_its_members_have():
    flow = waiting_flow()
    assert run_command("seal", str(flow.pk)) == (
        f"flow {flow.pk} 'nightly': sealed, revision {flow.revision}\n"
    )
    workflows.send_signal(flow_graph(flow).member("extract").run_id, "go")
    run_pending()
    assert run_json("show", str(flow.pk))["status"] == "completed"
    # Sealing again changes nothing; an ended flow is refused.
    refused("seal", str(flow.pk), message="flow 'nightly' is completed; only an open flow")


def test_seal_of_a_finished_graph_ends_the_flow_at_once_and_prints_json():
    flow = workflows.create_flow("done")
    workflows.add_to_flow(flow, Work, {}, member="only")
    run_pending()
    sealed = run_json("seal", "--user", User.objects.create_user("ops").username, str(flow.pk))
    assert (sealed["id"], sealed["status"], sealed["revision"]) == (str(flow.pk), "completed", 1)
    assert sealed["summary"] == {"members": 1, "not_completed": {}}
    assert Event.objects.get(flow=flow, type="flow.sealed").payload["by"] == "ops"


# -- cancel ----------------------------------------------------------------------------------


def test_cancel_all_cancels_every_unfinished_member():
    flow = workflows.create_flow("pair")
    for member in ("left", "right"):
        workflows.add_to_flow(flow, Waits, {}, member=member)
    run_pending()
    user = User.objects.create_user("ops")
    output = run_command("cancel", str(flow.pk), "--reason", "bad data", "--user", user.username)
    expected = f"flow {flow.pk} 'pair': cancelled, revision 2; 2 members cancelled (cancel_all)"
    assert output == expected + "\n"
    run_pending()
    assert (status_of(flow, "left"), status_of(flow, "right")) == ("cancelled", "cancelled")
    event = Event.objects.get(flow=flow, type="flow.cancelled")
    assert (event.run_id, event.payload) == (
        None,
        {"flow": "pair", "policy": "cancel_all", "reason": "bad data", "by": "ops"},
    )


def test_cancel_pending_cancels_only_the_blocked_members():
    flow = waiting_flow()
    cancelled = run_json("cancel", str(flow.pk), "--policy", "cancel_pending")
    assert (cancelled["status"], cancelled["cancelled"]) == ("cancelled", 1)
    assert (status_of(flow, "extract"), status_of(flow, "load")) == ("waiting", "cancelled")


def test_flow_only_closes_the_flow_and_leaves_the_members_alone():
    flow = waiting_flow()
    output = run_command("cancel", str(flow.pk), "--policy", "flow_only")
    assert output.endswith(": cancelled, revision 2; 0 members cancelled (flow_only)\n")
    assert (status_of(flow, "extract"), status_of(flow, "load")) == ("waiting", "blocked")
    # Idempotent: cancelling a cancelled flow again returns the stored cancellation.
    again = run_json("cancel", str(flow.pk), "--policy", "flow_only")
    assert (again["cancelled"], again["cancellation"]["policy"]) == (0, "flow_only")
    assert Event.objects.filter(flow=flow, type="flow.cancelled").count() == 1


def test_cancel_refuses_a_bad_policy_an_ended_flow_and_an_unknown_user():
    flow = waiting_flow()
    refused(
        "cancel",
        str(flow.pk),
        "--policy",
        "everything",
        message="policy must be one of cancel_all, cancel_pending, flow_only, not 'everything'",
    )
    refused("cancel", str(flow.pk), "--user", "ghost", message="no user named 'ghost'")
    done = workflows.create_flow("done")
    workflows.seal_flow(done)
    refused(
        "cancel",
        str(done.pk),
        message="flow 'done' has ended completed; there is nothing to cancel",
    )


# -- list and help ---------------------------------------------------------------------------


def test_list_shows_flows_newest_first_with_their_members():
    older = waiting_flow(key="older")
    newer = workflows.create_flow("newer")
    workflows.seal_flow(newer)
    header, first, second = run_command("list").splitlines()
    assert header.split() == [
        "ID",
        "NAME",
        "KEY",
        "STATUS",
        "REVISION",
        "MEMBERS",
        "UNFINISHED",
        "CREATED",
    ]
    assert first.split()[:7] == [str(newer.pk), "newer", "-", "completed", "0", "0", "0"]
    assert second.split()[:7] == [str(older.pk), "nightly", "older", "open", "2", "2", "2"]
    [listed] = run_json("list", "--status", "open")
    assert (listed["id"], listed["members"], listed["unfinished"]) == (str(older.pk), 2, 2)
    assert run_command("list", "--status", "failed") == "no flows match\n"
    assert [row["id"] for row in run_json("list", "--limit", "1")] == [str(newer.pk)]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "the following arguments are required: {list,show,seal,cancel}"),
        (("drop",), "invalid choice: 'drop'"),
        (("list", "--status", "done"), "argument --status: invalid choice: 'done'"),
        (("list", "--limit", "0"), "must be a positive integer, got '0'"),
    ],
)
def test_bad_arguments_are_refused(args, message):
    with pytest.raises(CommandError, match=re.escape(message)):
        run_command(*args)


def test_the_help_explains_each_subcommand(capsys):
    with pytest.raises(SystemExit):
        call_command("workflows_flow", "--help")
    shown = " ".join(capsys.readouterr().out.split())
    for text in (
        "'list [--status S]'",
        "'show FLOW'",
        "'seal FLOW'",
        "'cancel FLOW [--policy P]'",
        "--key KEY",
    ):
        assert text in shown
    with pytest.raises(SystemExit):
        call_command("workflows_flow", "cancel", "--help")
    shown = " ".join(capsys.readouterr().out.split())
    for text in ("cancel_all:", "cancel_pending:", "flow_only:", "--reason TEXT", "--user U"):
        assert text in shown


@pytest.mark.processes
@pytest.mark.django_db(transaction=True)
def test_from_the_shell_a_refusal_exits_1_and_says_why():
    flow = workflows.create_flow("shell", key="shell-1")
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "DATABASE_URL": database_url(connection.settings_dict),
    }

    def manage(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, str(MANAGE), "workflows_flow", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )

    shown = manage("show", "--key", "shell-1")
    assert (shown.returncode, shown.stdout.splitlines()[0]) == (
        0,
        f"flow {flow.pk} 'shell' (key 'shell-1'): open, revision 0",
    )
    for args, message in (
        (("cancel", str(flow.pk), "--policy", "nope"), "policy must be one of cancel_all"),
        (("seal", "--key", "nobody"), "no flow has key 'nobody'"),
        (("show", "fffff"), "no flow has id prefix 'fffff'"),
    ):
        refused = manage(*args)
        assert (refused.returncode, refused.stdout) == (1, ""), refused.stderr
        assert f"CommandError: {message}" in refused.stderr
    flow.refresh_from_db()
    assert flow.status == "open"


# -- workflows_status ------------------------------------------------------------------------


def status_command(*args: str) -> str:
    return commands.run_command("workflows_status", *args)


def test_status_ends_with_the_flows_by_status_and_the_members_blocked():
    waiting_flow()
    cancelled = workflows.create_flow("cancelled")
    workflows.cancel_flow(cancelled)
    lines = status_command().splitlines()
    assert lines[-2:] == ["", "flows: 1 open, 1 cancelled; 1 member blocked"]
    assert json.loads(status_command("--flows", "--json")) == {
        "flows": {"open": 1, "sealed": 0, "completed": 0, "failed": 0, "cancelled": 1},
        "blocked_members": 1,
    }
    assert status_command("--flows") == "flows: 1 open, 1 cancelled; 1 member blocked\n"


def test_status_without_flows_says_so_only_when_asked():
    assert status_command() == "no runs match\n"
    assert status_command("--flows") == "no flows\n"
    assert json.loads(status_command("--flows", "--json"))["blocked_members"] == 0


def test_status_refuses_run_filters_with_flows():
    with pytest.raises(CommandError, match=re.escape("--status, --limit do not apply")):
        status_command("--flows", "--status", "running", "--limit", "3")
