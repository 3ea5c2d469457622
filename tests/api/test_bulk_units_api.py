"""``POST /api/bulk/units/{verb}/``: the bulk recovery of stuck units over HTTP, a dry
run by default, each bad filter a 400 naming its field, never a 500."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.revoke import Wedged, running_load
from workflows.models import Event, Step

from .test_api_basics import assert_error

pytestmark = pytest.mark.django_db


def url(verb: str) -> str:
    return f"/api/bulk/units/{verb}/"


def test_a_dry_run_then_the_apply_revoke_the_running_steps(api):
    _, step = running_load("w-1")
    client = api("operator")
    body = {"units": {"kind": "step", "held_on": "lease", "workflow": Wedged.name}}
    events = Event.objects.count()
    dry = client.post(url("revoke"), body, format="json")
    assert dry.status_code == 200, dry.content
    assert dry.json()["totals"] == {"matched": 1, "eligible": 1, "skipped": 0}
    [unit] = dry.json()["units"]
    assert (unit["unit"], unit["kind"], unit["attempt"], unit["outcome"]) == (
        step.pk,
        "step",
        1,
        "eligible",
    )
    assert Event.objects.count() == events
    done = client.post(url("revoke"), {**body, "dry_run": False, "reason": "wedged"}, format="json")
    assert done.status_code == 200, done.content
    assert done.json()["totals"] == {"matched": 1, "done": 1, "skipped": 0, "failed": 0}
    assert Step.objects.get(pk=step.pk).status == "ready"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"units": {"kind": "run"}}, "kind"),
        ({"units": {"kind": "step", "status": ["asleep"]}}, "status"),
        ({"units": {"kind": "step", "held_on": "gate"}}, "held_on"),
        ({"units": {"kind": "step", "older_than": "two hours"}}, "older_than"),
        ({"units": {"kind": "step", "queue": 7}}, "queue"),
        ({"units": {"kind": "step", "colour": "red"}}, "colour"),
        ({}, "units"),
        ({"units": {"kind": "step"}, "dry_run": "yes"}, "dry_run"),
    ],
)
def test_a_bad_body_is_a_400_naming_the_field(api, body: dict[str, Any], field: str):
    error = assert_error(
        api("operator").post(url("fail_step"), body, format="json"), 400, "validation_error"
    )
    assert field in str(error["details"]), error


@pytest.mark.parametrize(
    ("verb", "units", "words"),
    [
        ("retry_step", {"kind": "item"}, "retry_step does not apply to items"),
        ("fail_step", {"kind": "compensation", "status": ["waiting"]}, "compensation status"),
        ("fail_step", {"kind": "step", "workflow": "nope"}, "no workflow is called 'nope'"),
        ("cancel", {"kind": "step"}, "unknown unit verb 'cancel'"),
    ],
)
def test_a_refused_bulk_is_a_400_saying_why(api, verb: str, units: dict[str, Any], words: str):
    error = assert_error(
        api("operator").post(url(verb), {"units": units}, format="json"), 400, "invalid_input"
    )
    assert words in error["message"]


def test_a_viewer_may_not_recover_units(api):
    running_load("w-1")
    response = api("viewer").post(url("revoke"), {"units": {"kind": "step"}}, format="json")
    assert_error(response, 403, "permission_denied")
    assert Step.objects.get().status == "running"
