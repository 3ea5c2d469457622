"""``explain`` of a flow member: a ``blocked`` member names the upstream members it
waits on (with their statuses), its join in words and its flow; a member cancelled with
``dependency_failed`` names the upstream member that failed; two more queries, for flow
members only.

Members are put in each state by the flow verbs and the engine; one test sets an
upstream run's status as a plain column, to show a member whose join is decided but
that no transition has decided yet (what the ``repair_flows`` scanner is for).
"""

from __future__ import annotations

import json
from datetime import timedelta
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

import workflows
from tests.support.workflows import Broken, Work
from workflows.admin.run_page import hold_text
from workflows.engine import claim_step, complete_work
from workflows.engine.guards import RUN_VERBS
from workflows.models import Flow, Run
from workflows.queries.explain import FLOW_QUERIES, QUERIES, WaitingOn
from workflows.status import RunStatus
from workflows.testing import run_pending
from workflows.workers.scanners import repair_flows

pytestmark = pytest.mark.django_db


def explained(run: Run) -> dict[str, Any]:
    """The explanation as JSON, checked to survive a plain JSON round trip."""
    data = workflows.explain(run).as_dict()
    assert json.loads(json.dumps(data)) == data
    return data


def flow_entry(run: Run) -> dict[str, Any]:
    [entry] = [entry for entry in explained(run)["waiting_on"] if entry["kind"] == "blocked"]
    return entry


def finish(run: Run) -> None:
    """Run the member's one step to completion, as a worker would."""
    complete_work(claim_step(run.steps.get().pk, "w"), None)


def build_flow() -> tuple[Flow, dict[str, Run]]:
    """``link`` after ``compile`` and ``lint``; both upstreams started, nothing ran."""
    flow = workflows.create_flow("build")
    runs = {
        name: workflows.add_to_flow(flow, Work, {"target": name}, member=name)
        for name in ("compile", "lint")
    }
    runs["link"] = workflows.add_to_flow(
        flow, Work, {"target": "link"}, member="link", after=["compile", "lint"]
    )
    return flow, runs


def test_a_blocked_member_names_its_upstream_members_their_statuses_its_join_and_flow():
    flow, runs = build_flow()
    finish(runs["compile"])

    data = explained(runs["link"])

    assert data["status"] == "blocked"
    [entry] = data["waiting_on"]
    assert entry["kind"] == "blocked"
    assert entry["step"] is None
    assert entry["flow"] == str(flow.pk)
    assert (entry["flow_name"], entry["member"], entry["join"]) == ("build", "link", "all")
    assert entry["join_words"] == "all of its upstream members completed"
    assert [(up["member"], up["status"]) for up in entry["upstream"]] == [
        ("compile", "completed"),
        ("lint", "running"),
    ]
    assert entry["upstream"][0]["run"] == str(runs["compile"].pk)
    assert (entry["completed"], entry["waiting_for"]) == (1, ["lint"])
    assert entry["verdict"] == "waiting"
    assert entry["message"] == (
        "member 'link' of flow 'build' waits until all of its upstream members completed: "
        "1 of 2 completed; waiting on lint (running)"
    )
    place = data["flow"]
    assert place["flow"] == str(flow.pk)
    assert (place["flow_status"], place["revision"], place["member"]) == ("open", 3, "link")
    assert place["upstream"] == entry["upstream"]
    assert place["failed_upstream"] is None


def test_an_at_least_join_says_how_many_of_its_upstream_members_completed():
    flow = workflows.create_flow("fan-in")
    ups = {
        name: workflows.add_to_flow(flow, Work, {"target": name}, member=name)
        for name in ("a", "b", "c")
    }
    pack = workflows.add_to_flow(
        flow, Work, {"target": "pack"}, member="pack", after=["a", "b", "c"], join=2
    )
    finish(ups["a"])

    entry = flow_entry(pack)

    assert (entry["join"], entry["completed"], entry["waiting_for"]) == (2, 1, ["b", "c"])
    assert entry["message"] == (
        "member 'pack' of flow 'fan-in' waits until at least 2 of its upstream members "
        "completed: 1 of 3 completed; waiting on b (running), c (running)"
    )
    finish(ups["b"])
    started = workflows.explain(pack)
    assert started.status == RunStatus.RUNNING
    assert [entry.kind for entry in started.waiting_on] == ["dispatch"]


def test_an_any_join_is_worded_as_one_of_its_upstream_members():
    flow = workflows.create_flow("race")
    for name in ("left", "right"):
        workflows.add_to_flow(flow, Work, {"target": name}, member=name)
    first = workflows.add_to_flow(
        flow, Work, {}, member="first", after=["left", "right"], join="any"
    )

    entry = flow_entry(first)

    assert entry["join_words"] == "any one of its upstream members completed"
    assert entry["message"].startswith(
        "member 'first' of flow 'race' waits until any one of its upstream members "
        "completed: 0 of 2 completed"
    )
    assert "every upstream member has ended" not in entry["message"]


def test_a_member_cancelled_with_dependency_failed_names_the_upstream_that_failed():
    flow = workflows.create_flow("release")
    workflows.add_to_flow(flow, Broken, {}, member="compile")
    workflows.add_to_flow(flow, Work, {"target": "docs"}, member="docs")
    package = workflows.add_to_flow(
        flow, Work, {"target": "package"}, member="package", after=["docs", "compile"]
    )
    upload = workflows.add_to_flow(
        flow, Work, {"target": "upload"}, member="upload", after=["package"]
    )

    run_pending()

    data = explained(package)
    assert data["status"] == "cancelled"
    assert data["waiting_on"] == []
    assert data["flow"]["failed_upstream"] == {"member": "compile", "status": "failed"}
    assert {up["member"]: up["status"] for up in data["flow"]["upstream"]} == {
        "compile": "failed",
        "docs": "completed",
    }
    # Transitively: the member after it names it, cancelled.
    assert explained(upload)["flow"]["failed_upstream"] == {
        "member": "package",
        "status": "cancelled",
    }


def test_a_member_cancelled_when_its_flow_closed_names_no_upstream_that_failed():
    flow = workflows.create_flow("short")
    workflows.add_to_flow(flow, Work, {"target": "only"}, member="only")
    pair = workflows.add_to_flow(
        flow, Work, {"target": "pair"}, member="pair", after=["only"], join=2
    )

    workflows.seal_flow(flow)  # two upstream members can never come now

    data = explained(pair)
    assert (data["status"], data["flow"]["join"]) == ("cancelled", 2)
    assert data["flow"]["failed_upstream"] is None
    assert data["flow"]["upstream"][0]["member"] == "only"


def test_a_blocked_member_whose_join_is_decided_says_the_scanner_will_start_it():
    _, runs = build_flow()
    # Both upstreams completed, and no transition settled the member: what a process
    # that died between an upstream's commit and the next batch leaves behind.
    Run.objects.filter(pk__in=[runs["compile"].pk, runs["lint"].pk]).update(
        status=RunStatus.COMPLETED
    )

    entry = flow_entry(runs["link"])

    assert entry["verdict"] == "satisfied"
    assert entry["waiting_for"] == []
    assert entry["message"] == (
        "member 'link' of flow 'build' waits until all of its upstream members completed: "
        "2 of 2 completed; its join is satisfied: the repair_flows scanner starts it on its "
        "next pass"
    )
    assert repair_flows().done == 1
    assert workflows.explain(runs["link"]).status == RunStatus.RUNNING


def test_a_blocked_member_whose_join_can_no_longer_be_satisfied_says_it_will_be_cancelled():
    _, runs = build_flow()
    Run.objects.filter(pk=runs["lint"].pk).update(status=RunStatus.FAILED)

    entry = flow_entry(runs["link"])

    assert entry["verdict"] == "impossible"
    assert entry["message"].endswith(
        "; waiting on compile (running); its join is no longer satisfiable: the "
        "repair_flows scanner cancels it (dependency_failed) on its next pass"
    )


def test_a_blocked_member_may_be_cancelled_terminated_reprioritised_or_keyed_only():
    _, runs = build_flow()

    allowed = {
        action["verb"]: action["reason"]
        for action in explained(runs["link"])["allowed_actions"]
        if action["step"] is None
    }

    assert [verb for verb, reason in allowed.items() if reason is None] == [
        "cancel",
        "terminate",
        "priority",
        "business_key",
    ]
    assert allowed["pause"] == RUN_VERBS["pause"].refusal(RunStatus.BLOCKED)
    assert allowed["pause"].startswith(
        "run is blocked: it is a flow member waiting for its upstream members"
    )


def test_a_run_outside_a_flow_has_no_place_in_one():
    run = workflows.start_run(Work, {})
    data = explained(run)
    assert data["flow"] is None
    assert all(entry["kind"] != "flow" for entry in data["waiting_on"])


def cost(run: Run) -> int:
    """Explain's statements, without transaction control; each must be a read."""
    skipped = ("BEGIN", "COMMIT", "SAVEPOINT", "RELEASE SAVEPOINT", "ROLLBACK")
    with CaptureQueriesContext(connection) as captured:
        workflows.explain(run)
    sql = [q["sql"] for q in captured.captured_queries if not q["sql"].startswith(skipped)]
    assert all(statement.lstrip().upper().startswith("SELECT") for statement in sql)
    return len(sql)


def test_a_flow_member_costs_two_queries_more_whatever_its_number_of_upstreams():
    flow, runs = build_flow()
    many = [
        workflows.add_to_flow(flow, Work, {"target": f"t{n}"}, member=f"t{n}") for n in range(20)
    ]
    wide = workflows.add_to_flow(flow, Work, {}, member="wide", after=[f"t{n}" for n in range(20)])
    outside = workflows.start_run(Work, {"target": "outside"})

    assert FLOW_QUERIES == 2
    assert cost(runs["link"]) == cost(wide) == QUERIES + FLOW_QUERIES
    assert cost(many[0]) == QUERIES + FLOW_QUERIES
    assert cost(outside) == QUERIES


def test_the_admin_and_workflows_show_word_a_blocked_member():
    _, runs = build_flow()
    now = timezone.now()
    [entry] = workflows.explain(runs["link"], now=now).waiting_on
    assert isinstance(entry, WaitingOn)

    assert hold_text(entry, now + timedelta(seconds=1)) == (
        "Member 'link' of flow 'build' waits until all of its upstream members completed: "
        "0 of 2 completed; waiting on compile (running), lint (running)"
    )
    out = StringIO()
    call_command("workflows_show", str(runs["link"].pk), stdout=out)
    waiting = out.getvalue().split("\nwaiting on\n")[1].split("\nallowed actions\n")[0]
    assert waiting.splitlines()[1].split()[0] == "blocked"
    assert "Member 'link' of flow 'build' waits until" in waiting
