"""``workflows_consumers [list|create NAME|delete NAME] [--user U] [--json]``."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import Permission, User
from django.core.management import call_command
from django.core.management.base import CommandError

import workflows
from tests.support import commands
from workflows.models import Event, EventConsumer, Run

pytestmark = pytest.mark.django_db


def run_command(*args: str) -> str:
    return commands.run_command("workflows_consumers", *args)


def test_create_list_delete():
    assert "no event consumer" in run_command()
    run = Run.objects.create(workflow_name="cmd_consumers", workflow_version=1, snapshot={})
    Event.objects.create(run=run, type="one")
    assert (
        run_command("create", "billing")
        == "consumer 'billing' created at the start of the history; it reads everything\n"
    )
    assert "exists already; unchanged" in run_command("create", "billing")
    listed = run_command("list").splitlines()
    assert listed[0].split() == ["CONSUMER", "POSITION", "LAG", "LAST", "ACK", "CREATED", "READS"]
    assert listed[1].split()[:5] == ["billing", "the", "start", "1", "never"]
    rows = json.loads(run_command("--json"))
    assert [(row["consumer"], row["lag"], row["position"]) for row in rows] == [("billing", 1, 0)]
    done = json.loads(run_command("delete", "billing", "--json"))
    assert done["consumer"] == "billing" and done["deleted"] is True
    assert not EventConsumer.objects.exists()


def test_deleting_an_unknown_consumer_exits_non_zero_with_one_line():
    with pytest.raises(CommandError, match=r"^no event consumer is named 'ghost'$"):
        run_command("delete", "ghost")


def test_a_named_user_needs_the_permission():
    clerk = User.objects.create_user("clerk")
    clerk.user_permissions.add(Permission.objects.get(codename="view_run"))
    with pytest.raises(CommandError, match="manage_consumers"):
        run_command("create", "c", "--user", "clerk")
    assert not EventConsumer.objects.exists()
    clerk.user_permissions.add(Permission.objects.get(codename="manage_consumers"))
    clerk = User.objects.get(pk=clerk.pk)  # forget the cached permissions
    assert "created" in run_command("create", "c", "--user", "clerk")
    workflows.create_consumer("d")
    assert "deleted" in run_command("delete", "d", "--user", "clerk")


def test_a_blank_name_is_refused():
    with pytest.raises(CommandError, match="consumer must be a name"):
        run_command("create", "  ")


def test_help_says_how(capsys):
    with pytest.raises(SystemExit):
        call_command("workflows_consumers", "--help")
    text = " ".join(capsys.readouterr().out.split())
    assert "'create NAME' creates a consumer" in text and "'delete NAME' deletes one" in text
    assert "workflows.manage_consumers" in text


def test_create_with_a_filter_lists_it():
    run = Run.objects.create(workflow_name="billing", workflow_version=1, snapshot={})
    Event.objects.create(run=run, type="run.completed")
    Event.objects.create(run=run, type="step.completed")
    line = run_command(
        "create", "done", "--workflow", "billing", "--kind", "run.completed", "--kind", "run.failed"
    )
    assert line == (
        "consumer 'done' created at the start of the history; it reads workflows billing; "
        "types run.completed, run.failed\n"
    )
    assert (
        run_command("list")
        .splitlines()[1]
        .endswith("workflows billing; types run.completed, run.failed")
    )
    [row] = json.loads(run_command("--json"))
    assert (row["workflows"], row["kinds"], row["lag"]) == (
        ["billing"],
        ["run.completed", "run.failed"],
        1,
    )


@pytest.mark.parametrize(
    ("option", "value", "words"),
    [
        ("--kind", "run.finished", "kinds: 'run.finished' is no event type"),
        ("--workflow", " ", "blank"),
    ],
)
def test_a_bad_filter_is_refused_naming_it(option, value, words):
    with pytest.raises(CommandError, match=words):
        run_command("create", "done", option, value)
    assert not EventConsumer.objects.exists()
