"""What the model-based test (``test_model_based.py``) found, one named regression test
each: the defects of issue #35 it reaches (points 1, 2 and 4), and one the issue did not
list (a rerun member of a completed flow running while the flow read ``completed``).
"""

from __future__ import annotations

import pytest

import workflows
from tests.engine.model_based.test_model_based import (
    OUTCOME,
    MbOne,
    cancel_flow,
)
from workflows.engine import claim_step
from workflows.errors import InvalidTransition
from workflows.models import Flow, Run, Step
from workflows.status import FlowStatus, RunStatus
from workflows.testing import run_pending

pytestmark = pytest.mark.django_db


def fail_member(run: Run) -> None:
    OUTCOME["next"] = "permanent"
    try:
        run_pending()
    finally:
        OUTCOME["next"] = "ok"
    run.refresh_from_db()
    assert run.status == RunStatus.FAILED


def test_retry_of_a_member_cancelled_by_a_failed_dependency_is_refused():
    flow = workflows.create_flow("model")
    alpha = workflows.add_to_flow(flow, MbOne, {}, member="alpha")
    beta = workflows.add_to_flow(flow, MbOne, {}, member="beta", after=["alpha"])
    fail_member(alpha)
    beta.refresh_from_db()
    assert beta.status == RunStatus.CANCELLED
    assert (beta.error or {}).get("code") == "dependency_failed"
    with pytest.raises(InvalidTransition, match="alpha"):
        workflows.retry_run(beta)
    assert Run.objects.get(pk=beta.pk).status == RunStatus.CANCELLED


def test_rerun_of_a_member_cancelled_by_a_failed_dependency_is_refused():
    flow = workflows.create_flow("model")
    alpha = workflows.add_to_flow(flow, MbOne, {}, member="alpha")
    beta = workflows.add_to_flow(flow, MbOne, {}, member="beta", after=["alpha"])
    fail_member(alpha)
    with pytest.raises(InvalidTransition, match="alpha"):
        workflows.rerun_from(beta, "work")
    assert Run.objects.get(pk=beta.pk).status == RunStatus.CANCELLED


def test_cancel_pending_cancels_downstream_first_with_the_flows_reason():
    """A member whose upstream was added after it: cancelled newest-first, it would end
    ``dependency_failed`` and the count would be one short."""
    flow = workflows.create_flow("model")
    workflows.add_to_flow(flow, MbOne, {}, member="gate")
    first = workflows.add_to_flow(flow, MbOne, {}, member="late", after=["gate"])
    second = workflows.add_to_flow(flow, MbOne, {}, member="early", after=["gate"])
    workflows.add_dependency(flow, "early", "late")
    assert cancel_flow(flow, "cancel_pending") == 2
    for run in (first, second):
        run.refresh_from_db()
        assert run.status == RunStatus.CANCELLED
        assert (run.error or {}).get("code") != "dependency_failed", run.error


def test_a_second_revoke_of_the_same_attempt_changes_nothing():
    run = workflows.start_run(MbOne, {})
    step = Step.objects.get(run=run)
    claim_step(step.pk, "wedged")
    assert workflows.revoke_lease(step, expected_attempt=1).revoked
    claim_step(step.pk, "fresh")  # the attempt that replaced the wedged one
    step.refresh_from_db()
    before = (step.status, step.attempt, step.version)
    again = workflows.revoke_lease(step, expected_attempt=1)
    step.refresh_from_db()
    assert (again.revoked, again.reason) == (False, "replaced")
    assert (step.status, step.attempt, step.version) == before


def test_a_rerun_member_reopens_its_ended_flow():
    """A member of a flow that ended runs again: the flow does not read ``completed``
    while it runs (found by the model-based test)."""
    flow = workflows.create_flow("model")
    member = workflows.add_to_flow(flow, MbOne, {}, member="only")
    workflows.seal_flow(flow)
    run_pending()
    assert Flow.objects.get(pk=flow.pk).status == FlowStatus.COMPLETED
    workflows.rerun_from(member, "work")
    assert Run.objects.get(pk=member.pk).status == RunStatus.RUNNING
    assert Flow.objects.get(pk=flow.pk).status == FlowStatus.SEALED
