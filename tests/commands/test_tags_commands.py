"""Run tags in the commands: ``workflows_start --tag``, ``workflows_status --tag``
(repeatable, every tag must match; a malformed one a clear error), the TAGS column, and
``workflows_show``'s tags line."""

from __future__ import annotations

import pytest
from django.core.management import load_command_class

import workflows
from tests.support.commands import refused, run_command, run_json
from tests.support.handlers import WORK
from workflows import Task, Workflow
from workflows.models import Run

pytestmark = pytest.mark.django_db


class Tagged(Workflow):
    name = "commands_tags_tagged"
    work = Task(WORK)


def test_start_takes_tags():
    data = run_json(
        "workflows_start",
        Tagged.name,
        "--input",
        "{}",
        "--tag",
        "customer=acme",
        "--tag",
        "region=eu",
    )
    assert data["tags"] == {"customer": "acme", "region": "eu"}
    assert Run.objects.get().tags == {"customer": "acme", "region": "eu"}


@pytest.mark.parametrize(
    ("tag", "message"),
    [
        ("customer", "tag 'customer' must be key=value"),
        ("Customer=acme", "tag key 'Customer' must match"),
        ("=acme", "tag key '' must match"),
        (f"customer={'x' * 256}", "the limit is 255"),
    ],
)
def test_start_refuses_a_malformed_tag_naming_it_and_starts_nothing(tag, message):
    refused("workflows_start", Tagged.name, "--input", "{}", "--tag", tag, message=message)
    assert not Run.objects.exists()


def test_start_refuses_33_tags():
    tags = [arg for n in range(33) for arg in ("--tag", f"k{n}=v")]
    refused("workflows_start", Tagged.name, "--input", "{}", *tags, message="at most 32")
    assert not Run.objects.exists()


def test_status_filters_by_two_tags():
    both = workflows.start_run(Tagged, tags={"customer": "acme", "region": "eu"})
    workflows.start_run(Tagged, tags={"customer": "acme", "region": "us"})
    workflows.start_run(Tagged)
    found = run_json("workflows_status", "--tag", "customer=acme", "--tag", "region=eu")
    assert [run["id"] for run in found] == [str(both.pk)]
    assert len(run_json("workflows_status", "--tag", "customer=acme")) == 2
    text = run_command("workflows_status", "--tag", "customer=acme", "--tag", "region=eu")
    header, row = text.splitlines()
    assert header.split()[-1] == "TAGS"
    assert row.endswith("customer=acme region=eu")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--tag", "customer"], "tag 'customer' must be key=value"),
        (["--tag", "Region=eu"], "tag key 'Region' must match"),
        (["--tag", "region=eu", "--tag", "region=us"], "--tag 'region' is given twice"),
        (["--flows", "--tag", "region=eu"], "--tag do not apply"),
    ],
)
def test_status_refuses_a_malformed_tag_with_a_clear_error(args, message):
    refused("workflows_status", *args, message=message)


def test_show_prints_the_tags():
    run = workflows.start_run(Tagged, tags={"customer": "acme"})
    lines = run_command("workflows_show", str(run.pk)).splitlines()
    assert any(line.split() == ["tags", '{"customer":"acme"}'] for line in lines)
    assert run_json("workflows_show", str(run.pk))["tags"] == {"customer": "acme"}


@pytest.mark.parametrize("command", ["workflows_status", "workflows_start"])
def test_the_help_says_how_to_tag_and_filter(command):
    parser = load_command_class("workflows", command).create_parser("manage.py", command)
    assert "--tag KEY=VALUE" in parser.format_help()
