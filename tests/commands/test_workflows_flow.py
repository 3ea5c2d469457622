"""``workflows_flow`` (list, show, create, add, edge, seal, cancel a flow) and the flows line of
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
from tests.support.workflows import Broken, Echo, Waits, Work
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


# -- create, add, edge -----------------------------------------------------------------------


def test_create_makes_an_open_flow_once_per_key():
    user = User.objects.create_user("ops")
    output = run_command("create", "nightly", "--key", "nightly-8", "--user", "ops")
    flow = Flow.objects.get(key="nightly-8")
    assert output == f"created flow {flow.pk} 'nightly' (key 'nightly-8'): open, revision 0\n"
    assert flow.created_by == user
    assert run_command("create", "nightly", "--key", "nightly-8") == (
        f"flow {flow.pk} 'nightly' (key 'nightly-8'): open, revision 0; made before with "
        "this key, nothing changed\n"
    )
    again = run_json("create", "nightly", "--key", "nightly-8")
    assert (again["id"], again["status"], again["created"]) == (str(flow.pk), "open", False)
    assert Flow.objects.count() == 1
    # Without a key every create makes a flow of its own.
    made = run_json("create", "nightly")
    assert (made["key"], made["created"]) == (None, True)
    assert Flow.objects.count() == 2


def test_create_and_add_take_tags_the_members_start_with():
    made = run_json("create", "orders", "--tag", "customer=acme", "--tag", "region=eu")
    assert made["tags"] == {"customer": "acme", "region": "eu"}
    flow = Flow.objects.get(pk=made["id"])
    inherited = run_json("add", str(flow.pk), Work.name, "--member", "a")
    own = run_json("add", str(flow.pk), Work.name, "--member", "b", "--tag", "team=ops")
    assert Run.objects.get(pk=inherited["run"]["id"]).tags == {"customer": "acme", "region": "eu"}
    assert Run.objects.get(pk=own["run"]["id"]).tags == {"team": "ops"}
    assert run_json("show", str(flow.pk))["tags"] == {"customer": "acme", "region": "eu"}


@pytest.mark.parametrize(
    ("tag", "message"),
    [
        ("Customer=acme", "tag key 'Customer' must match"),
        ("customer", "must be key=value, e.g. customer=acme"),
    ],
)
def test_a_bad_tag_of_a_flow_is_refused_naming_it_and_makes_nothing(tag, message):
    with pytest.raises(CommandError, match=re.escape(message)):
        call_command("workflows_flow", "create", "orders", "--tag", tag)
    assert not Flow.objects.exists()


def test_add_starts_a_free_member_and_blocks_one_behind_another():
    flow = workflows.create_flow("build", key="build-1")
    first = run_command("add", "--key", "build-1", Waits.name, "--member", "extract")
    extract = flow_graph(flow).member("extract").run_id
    assert first == (
        f"member 'extract' of flow {flow.pk} 'build': run {extract} of {Waits.name} v1: waiting\n"
    )
    added = run_json(
        "add",
        str(flow.pk),
        Echo.name,
        "--member",
        "load",
        "--input",
        '{"value": 7}',
        "--after",
        "extract",
        "--join",
        "any",
    )
    load = Run.objects.get(flow_member__flow=flow, flow_member__name="load")
    assert (added["member"], added["created"], added["run"]["id"]) == ("load", True, str(load.pk))
    assert (added["run"]["status"], load.input) == ("blocked", {"value": 7})
    shown = flow_graph(flow).member("load")
    assert (shown.join, shown.upstream) == ("any", ("extract",))
    # The same member again changes nothing and says so.
    again = run_command(
        "add", str(flow.pk), Echo.name, "--member", "load", "--input", '{"value": 7}'
    )
    assert again.endswith(": blocked; already a member, nothing changed\n")
    assert Run.objects.filter(flow_member__flow=flow).count() == 2


def test_add_takes_several_upstreams_and_an_at_least_join():
    flow = workflows.create_flow("build")
    for name in ("a", "b", "c"):
        workflows.add_to_flow(flow, Waits, {}, member=name)
    run_command(
        "add",
        str(flow.pk),
        Work.name,
        "--member",
        "d",
        "--after",
        "a",
        "b",
        "--after",
        "c",
        "--join",
        "2",
    )
    shown = flow_graph(flow).member("d")
    assert (shown.join, shown.upstream) == (2, ("a", "b", "c"))


def test_edge_stages_a_dependency_and_prints_the_new_revision():
    flow = workflows.create_flow("build", key="edges")
    workflows.add_to_flow(flow, Broken, {}, member="feed")
    workflows.add_to_flow(flow, Work, {}, member="backup")
    workflows.add_to_flow(flow, Work, {}, member="catalogue", after=["feed"], join="any")
    run_pending()
    assert status_of(flow, "catalogue") == "blocked"  # its only upstream failed; flow open
    output = run_command("edge", "--key", "edges", "backup", "catalogue")
    assert output == (
        f"edge 'backup' → 'catalogue' of flow {flow.pk} 'build': revision 4; "
        "'catalogue' is running\n"
    )
    again = run_json("edge", str(flow.pk), "backup", "catalogue")
    assert again == {
        "flow": str(flow.pk),
        "upstream": "backup",
        "downstream": "catalogue",
        "revision": 4,
        "created": False,
        "downstream_status": "running",
    }


def test_edge_refuses_a_cycle_and_a_stale_revision():
    flow = waiting_flow(key="cycle")
    refused(
        "edge",
        "--key",
        "cycle",
        "load",
        "extract",
        message="an edge 'load' → 'extract' would close a cycle: 'load' already waits for "
        "'extract'",
    )
    workflows.add_to_flow(flow, Waits, {}, member="other")
    refused(
        "edge",
        str(flow.pk),
        "other",
        "load",
        "--expected-revision",
        "1",
        message="flow 'nightly' is at revision 3, not 1: its graph changed since it was read",
    )


BUILD_REFUSALS = [
    (("create", ""), "flow name must not be empty"),
    (("create", "other", "--key", "taken"), "flow key 'taken' was used for flow"),
    (("add", "--key", "taken", "no_such_workflow", "--member", "new"), "no workflow named"),
    (("add", "--key", "taken", Work.name, "--member", "new", "--input", "[1]"), "JSON object"),
    (
        ("add", "--key", "taken", Work.name, "--member", "new", "--after", "ghost"),
        "has no member 'ghost'",
    ),
    (
        ("add", "--key", "taken", Work.name, "--member", "new", "--join", "sometimes"),
        'join must be "all", "any" or a positive int, not \'sometimes\'',
    ),
    (("add", "--key", "taken", Work.name, "--member", "new", "--join", "0"), "join must be"),
    (("add", "--key", "nobody", Work.name, "--member", "new"), "no flow has key 'nobody'"),
    (("add", Work.name, "--member", "new"), "name the flow by FLOW"),
    (
        ("add", "--key", "taken", Work.name, "--member", "new", "--user", "ghost"),
        "no user named 'ghost'",
    ),
    (("add", "--key", "taken", Work.name, "--member", ""), "member must not be empty"),
    (("edge", "--key", "taken", "ghost", "m"), "flow 'taken' has no member 'ghost'"),
    (("edge", "--key", "taken", "m", "m"), "member 'm' cannot depend on itself"),
]


@pytest.mark.parametrize(("args", "message"), BUILD_REFUSALS)
def test_building_refuses_bad_input_naming_the_problem(args, message):
    flow = workflows.create_flow("taken", key="taken")
    workflows.add_to_flow(flow, Work, {}, member="m")
    members = Run.objects.count()
    refused(*args, message=message)
    assert Run.objects.count() == members


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("create",), "the following arguments are required: NAME"),
        (("add", "--key", "k", Work.name), "the following arguments are required: --member"),
        (("add", "--key", "k", Work.name, "--member", "m", "--input", "{bad"), "not valid JSON"),
        (("edge", "--key", "k", "a"), "the following arguments are required: DOWNSTREAM"),
        (("edge", "--key", "k", "a", "b", "--expected-revision", "x"), "invalid int value"),
    ],
)
def test_building_refuses_malformed_arguments(args, message):
    with pytest.raises(CommandError, match=re.escape(message)):
        run_command(*args)


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
        ((), "the following arguments are required: {list,show,create,add,edge,seal,cancel}"),
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
        "'create NAME [--key KEY]'",
        "'add FLOW WORKFLOW --member NAME [--input JSON] [--after MEMBER ...] [--join all|any|K]'",
        "'edge FLOW UPSTREAM DOWNSTREAM'",
        "--key KEY",
    ):
        assert text in shown
    with pytest.raises(SystemExit):
        call_command("workflows_flow", "cancel", "--help")
    shown = " ".join(capsys.readouterr().out.split())
    for text in ("cancel_all:", "cancel_pending:", "flow_only:", "--reason TEXT", "--user U"):
        assert text in shown


@pytest.mark.parametrize(
    ("action", "says", "example"),
    [
        ("create", "Make an open flow", 'workflows_flow create "build 1.0" --key build-1.0'),
        ("add", "Add a run of a workflow to the flow", "--after codegen proto --join any"),
        ("edge", "wait for UPSTREAM too", "workflows_flow edge --key build-1.0 proto lib"),
    ],
)
def test_the_help_of_each_building_action_says_what_it_does_with_an_example(
    capsys, action, says, example
):
    with pytest.raises(SystemExit):
        call_command("workflows_flow", action, "--help")
    shown = capsys.readouterr().out
    assert says in " ".join(shown.split())
    assert "example" in shown and example in shown  # examples are kept on one line


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
        (
            ("add", "--key", "shell-1", "no_such", "--member", "m"),
            "no workflow named 'no_such' is registered",
        ),
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
