"""change_priority: the run and its unstarted work, the event, and each surface."""

from __future__ import annotations

from io import StringIO
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

import workflows
from tests.admin.admin_console import staff
from tests.support.runs import claimed
from workflows import FanOut, InvalidInput, InvalidTransition, SubWorkflow, Task, Workflow
from workflows.engine.verbs.priority import change_priority
from workflows.models import Event, FanOutItem, Run, Step
from workflows.queries.explain import explain
from workflows.services import change_priority as change_priority_service
from workflows.testing import run_pending

pytestmark = pytest.mark.django_db
HERE = "tests.engine.verbs.test_priority"


def work(ctx: Any) -> str:
    return ctx.step_name


class Mixed(Workflow):
    """``first`` runs; ``urgent`` declares its own priority; the rest follow the run."""

    name = "priority_mixed"
    first = Task(f"{HERE}.work")
    urgent = Task(f"{HERE}.work", priority=900, after=[])
    later = Task(f"{HERE}.work", after=["first"])
    each = FanOut(f"{HERE}.work", items=lambda ctx: [1, 2, 3], after=[])


class Waiting(Workflow):
    name = "priority_parent"
    child = SubWorkflow("priority_child")


class Child(Workflow):
    name = "priority_child"
    hold = workflows.WaitForSignal("go")


def priorities(run: Run) -> dict[str, int]:
    return dict(Step.objects.filter(run=run).values_list("name", "priority"))


def changed_event(run: Run) -> dict[str, Any]:
    return Event.objects.get(run=run, type="run.priority_changed").payload


def test_unstarted_work_follows_the_run_running_work_and_own_priorities_do_not():
    run = workflows.start_run(Mixed)
    for name in ("urgent", "first"):  # claims take the best priority first
        claimed(run, name, "test-worker")
    # "first" is running: it keeps the priority it was claimed with.
    assert Step.objects.get(run=run, name="first").status == "running"
    change = change_priority(run.pk, 40)
    # "each" is a fan-out in progress (running): its unstarted items carry the priority.
    assert (change.previous, change.priority, change.steps, change.items) == (0, 40, 1, 3)
    assert Run.objects.get(pk=run.pk).priority == 40
    assert priorities(run) == {"first": 0, "urgent": 900, "later": 40, "each": 0}
    assert set(FanOutItem.objects.filter(step__run=run).values_list("priority", flat=True)) == {40}
    event = changed_event(run)
    assert (event["from"], event["to"], event["by"], event["steps"]) == (0, 40, None, 1)


def test_a_change_to_the_same_priority_writes_nothing():
    run = workflows.start_run(Mixed, priority=7)
    version = Run.objects.get(pk=run.pk).version
    change = change_priority(run.pk, 7)
    assert (change.previous, change.steps) == (7, 0)
    assert Run.objects.get(pk=run.pk).version == version
    assert not Event.objects.filter(run=run, type="run.priority_changed").exists()


def test_a_finished_run_refuses_and_a_bad_priority_is_invalid_input():
    run = workflows.start_run(Mixed)
    run_pending()
    with pytest.raises(InvalidTransition, match="run is completed; priority needs"):
        change_priority_service(run, 5)
    live = workflows.start_run(Mixed)
    for bad in (1001, -1001, "5", 2.0, True, None):
        with pytest.raises(InvalidInput, match="priority must be an integer from -1000 to 1000"):
            change_priority_service(live, bad)
    with pytest.raises(InvalidInput, match="priority must be"):
        workflows.start_run(Mixed, priority=5000)


def test_the_service_records_who_and_changes_live_children_too():
    operator = staff("operator")
    parent = workflows.start_run(Waiting)
    child = Run.objects.get(parent_run=parent)
    assert child.priority == 0
    done = change_priority_service(parent, -20, user=operator)
    assert done.priority == -20
    assert Run.objects.get(pk=child.pk).priority == -20
    assert changed_event(parent)["by"] == "operator"
    assert changed_event(child)["to"] == -20


def test_command_changes_the_priority_and_says_so():
    run = workflows.start_run(Mixed)
    out = StringIO()
    call_command("workflows_priority", str(run.pk), "25", stdout=out)
    assert out.getvalue().strip().endswith(", priority 25")
    assert Run.objects.get(pk=run.pk).priority == 25
    with pytest.raises(CommandError, match="priority must be an integer from -1000 to 1000"):
        call_command("workflows_priority", str(run.pk), "2000")
    with pytest.raises(CommandError, match="PRIORITY must be a whole number"):
        call_command("workflows_priority", str(run.pk), "high")


def test_start_command_takes_a_priority():
    out = StringIO()
    call_command(
        "workflows_start", "priority_mixed", "--input", "{}", "--priority", "-3", stdout=out
    )
    assert Run.objects.get(workflow_name="priority_mixed").priority == -3


def test_admin_action_confirms_then_changes_as_the_signed_in_user(client):
    client.force_login(staff("operator"))
    run = workflows.start_run(Mixed)
    url = reverse("admin:workflows_run_act", args=[run.pk, "priority"])
    page = client.get(url)
    assert page.status_code == 200
    assert b"change the run&#x27;s priority" in page.content
    assert b'name="priority"' in page.content
    done = client.post(url, {"priority": "60"})
    assert done.status_code == 302
    assert Run.objects.get(pk=run.pk).priority == 60
    assert changed_event(run)["by"] == "operator"
    refused = client.post(url, {"priority": "6000"})
    assert refused.status_code == 200  # the form shows the error
    assert b"less than or equal to 1000" in refused.content
    assert Run.objects.get(pk=run.pk).priority == 60


@pytest.mark.parametrize("role", ["nobody", "viewer", "starter"])
def test_admin_action_needs_the_operate_permission(client, role):
    client.force_login(staff(role))
    run = workflows.start_run(Mixed)
    url = reverse("admin:workflows_run_act", args=[run.pk, "priority"])
    assert client.get(url).status_code == 403
    assert client.post(url, {"priority": "5"}).status_code == 403
    assert Run.objects.get(pk=run.pk).priority == 0


def test_the_run_page_offers_the_action(client):
    client.force_login(staff("operator"))
    run = workflows.start_run(Mixed)
    assert "priority" in {a.verb for a in explain(run).allowed_actions if a.allowed}
    page = client.get(reverse("admin:workflows_run_change", args=[run.pk]))
    assert reverse("admin:workflows_run_act", args=[run.pk, "priority"]).encode() in page.content
