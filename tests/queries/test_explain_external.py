"""What an external step waits on, as ``explain`` says it: ready, it waits for an
external worker to claim it from its queue (never for a worker of the cluster); claimed,
the external worker holds its lease like any worker, named as an external worker."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

import workflows
from tests.support.handlers import NOOP
from workflows import Task, Workflow
from workflows.admin.run_page import hold_text
from workflows.engine.routing import WorkerRoutes
from workflows.holds import HOLDS, HoldKind
from workflows.models import Run, Step
from workflows.queries.explain import QUERIES
from workflows.workers.presence import report_presence

pytestmark = pytest.mark.django_db

# Work goes to django-q2 workers only with this executor; inline, run_pending runs all.
WORKERS = override_settings(WORKFLOWS={"EXECUTOR": "django_q"})


class Rendering(Workflow):
    name = "explain_external_rendering"
    render = Task(external=True, queue="gpu", requires={"cuda"}, timeout=timedelta(seconds=30))
    stamp = Task(external=True, queue="labels", after=[])
    notify = Task(NOOP, after=[])


def entries(run: Run, kind: str) -> list[dict[str, Any]]:
    return [
        entry for entry in workflows.explain(run).as_dict()["waiting_on"] if entry["kind"] == kind
    ]


def test_a_ready_external_step_waits_for_an_external_worker_on_its_queue():
    run = workflows.start_run(Rendering)
    # A live worker of the cluster serving every queue changes nothing for external work.
    assert report_presence("host-a:1", WorkerRoutes(frozenset({"default", "gpu"}), frozenset()))
    with WORKERS:
        external = {entry["step"]: entry for entry in entries(run, "external")}
        assert entries(run, "worker") == []
        assert [entry["step"] for entry in entries(run, "dispatch")] == ["notify"]
    assert sorted(external) == ["render", "stamp"]
    assert {**external["render"], "since": None} == {
        "kind": "external",
        "step": "render",
        "unit": "step",
        "item": None,
        "since": None,
        "queue": "gpu",
        "requires": ["cuda"],
        "capabilities": "capability cuda",
    }
    explanation = workflows.explain(run)
    said = [hold_text(entry, timezone.now()) for entry in explanation.waiting_on]
    assert "Step “render” waits for an external worker to claim it from queue gpu with " in (
        " ".join(said)
    )
    assert any(
        text.startswith("Step “stamp” waits for an external worker to claim it from queue labels,")
        for text in said
    )
    assert not any("@external" in text for text in said)


def test_what_releases_a_ready_external_step_is_a_claim_or_an_operator_verb():
    hold = HOLDS[HoldKind.EXTERNAL]
    assert hold.releases == ("priority", "skip_step", "cancel")
    assert "claim" in hold.released_by
    # Work in hand, not a wait that lasts: pending_waits does not list it.
    assert not hold.listed
    run = workflows.start_run(Rendering)
    actions = {
        (action["verb"], action["step"]): action["allowed"]
        for action in workflows.explain(run).as_dict()["allowed_actions"]
    }
    assert actions[("skip_step", "render")] is True
    assert actions[("priority", None)] is True
    assert list(workflows.pending_waits(workflow=Rendering.name).waits) == []


def test_only_external_ready_work_costs_no_read_of_the_live_workers():
    run = workflows.start_run(Rendering)
    Step.objects.filter(run=run, name="notify").update(status="completed")
    with WORKERS, CaptureQueriesContext(connection) as captured:
        workflows.explain(run)
    assert len(captured.captured_queries) == QUERIES


def test_a_claimed_external_step_is_held_by_its_external_worker():
    run = workflows.start_run(Rendering)
    [job] = workflows.claim_external(["gpu"], worker="go-1", capabilities=["cuda"])
    [entry] = entries(run, "lease")
    assert entry["worker"] == "external:go-1"
    assert entry["step"] == "render"
    text = hold_text(workflows.explain(run).waiting_on[0], timezone.now())
    assert text.startswith(
        "External worker go-1 runs step “render” (attempt 1 of 3), lease until in "
    )
    assert [entry["step"] for entry in entries(run, "external")] == ["stamp"]
    workflows.cancel_run(run)
    stopping = [
        hold_text(entry, timezone.now())
        for entry in workflows.explain(run).waiting_on
        if entry.kind == HoldKind.LEASE
    ]
    assert len(stopping) == 1
    assert "stops at its next heartbeat (external worker go-1, attempt 1 of 3;" in stopping[0]
    with pytest.raises(workflows.RunCancelled):
        workflows.heartbeat_external(job.lease)
    assert entries(run, "lease") == []
