"""Issue #35, point 1 in the API: retrying a member a failed dependency cancelled is a
409 problem with the code ``dependency_unmet`` naming the failed upstream; retrying the
upstream heals the flow."""

from __future__ import annotations

import pytest

import workflows
from tests.support.workflows import Broken, Work
from workflows.models import Flow, Run
from workflows.status import FlowStatus, RunStatus
from workflows.testing import run_pending

from .test_api_basics import assert_error

pytestmark = pytest.mark.django_db


def alpha_beta() -> tuple[Flow, Run, Run]:
    flow = workflows.create_flow("api-heal")
    alpha = workflows.add_to_flow(flow, Broken, {}, member="alpha")
    beta = workflows.add_to_flow(flow, Work, {}, member="beta", after=["alpha"])
    workflows.seal_flow(flow)
    run_pending()
    assert Run.objects.get(pk=beta.pk).status == RunStatus.CANCELLED
    return flow, alpha, beta


@pytest.mark.parametrize("body", [{}, {"from_step": "only"}], ids=["retry", "rerun"])
def test_retrying_a_member_past_its_failed_dependency_is_409_dependency_unmet(api, body):
    _, _, beta = alpha_beta()
    verb = "rerun" if body else "retry"
    response = api("operator").post(f"/api/runs/{beta.pk}/{verb}/", body, format="json")
    error = assert_error(response, 409, "dependency_unmet")
    assert "'alpha' (failed)" in error["message"]
    assert Run.objects.get(pk=beta.pk).status == RunStatus.CANCELLED


def test_retrying_the_upstream_heals_the_flow(api):
    flow, alpha, beta = alpha_beta()
    response = api("operator").post(f"/api/runs/{alpha.pk}/retry/", {}, format="json")
    assert response.status_code == 200, response.content
    assert Run.objects.get(pk=beta.pk).status == RunStatus.BLOCKED
    assert Flow.objects.get(pk=flow.pk).status == FlowStatus.SEALED
