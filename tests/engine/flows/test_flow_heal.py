"""Issue #35, contract point 1: flows heal, and retries never run past a dependency.

A member cancelled with ``dependency_failed`` is refused by the replay verbs while its
join is not satisfied (:class:`DependencyUnmet`, naming the failed upstream); retrying
or rerunning the upstream brings every member its end cancelled that way back to
``blocked``, transitively, and a flow that had ended ``failed`` is sealed again and
ends again by the usual rule. Members cancelled otherwise stay cancelled.
"""

from __future__ import annotations

from typing import Any

import pytest

import workflows
from tests.engine.flows.test_flows import Broken
from tests.support.flows import finish, flow_status, status, statuses
from tests.support.workflows import Echo
from workflows import DependencyUnmet, InvalidTransition
from workflows.engine.flows import settle
from workflows.models import Event, Flow, Run, Step
from workflows.status import FlowStatus, RunStatus, StepStatus
from workflows.testing import run_pending
from workflows.workers.scanners import repair_flows

pytestmark = pytest.mark.django_db


@pytest.fixture
def flow() -> Flow:
    return workflows.create_flow("heal")


def end_flow(flow: Flow) -> str:
    """The after-commit end of the flow, which these never-committing tests run by hand."""
    settle.finish_flow_if_done(flow.pk)
    return flow_status(flow)


def alpha_beta(flow: Flow) -> tuple[Run, Run]:
    """The issue's scenario: sealed, ``alpha`` fails, ``beta`` (after it) is cancelled."""
    alpha = workflows.add_to_flow(flow, Echo, {"value": 1}, member="alpha")
    beta = workflows.add_to_flow(flow, Echo, {"value": 2}, member="beta", after=["alpha"])
    workflows.seal_flow(flow)
    finish(alpha, fail=True)
    assert status(beta) == RunStatus.CANCELLED
    assert end_flow(flow) == FlowStatus.FAILED
    return alpha, beta


def types(run_or_flow: Any, prefix: str = "") -> list[str]:
    field = "flow" if isinstance(run_or_flow, Flow) else "run"
    return list(
        Event.objects.filter(**{field: run_or_flow}, type__startswith=prefix)
        .order_by("id")
        .values_list("type", flat=True)
    )


@pytest.mark.parametrize("verb", ["retry_run", "rerun_from"])
def test_a_member_cancelled_for_a_failed_dependency_is_refused(flow, verb):
    _, beta = alpha_beta(flow)
    with pytest.raises(DependencyUnmet) as raised:
        if verb == "retry_run":
            workflows.retry_run(beta.pk)
        else:
            workflows.rerun_from(beta.pk, "answer")
    assert isinstance(raised.value, InvalidTransition)
    assert raised.value.code == "dependency_unmet"
    assert "'alpha' (failed)" in raised.value.message
    assert raised.value.details["failed_upstream"] == ["alpha"]
    assert status(beta) == RunStatus.CANCELLED  # nothing changed
    assert flow_status(flow) == FlowStatus.FAILED


def test_the_explanation_lists_the_refusal(flow):
    _, beta = alpha_beta(flow)
    refused = {a.verb: a.reason or "" for a in workflows.explain(beta.pk).allowed_actions}
    assert "'alpha' (failed)" in refused["retry"]
    assert "'alpha' (failed)" in refused["rerun"]


def test_retrying_the_upstream_heals_the_flow(flow):
    alpha, beta = alpha_beta(flow)
    workflows.retry_run(alpha.pk)
    assert status(alpha) == RunStatus.RUNNING
    assert status(beta) == RunStatus.BLOCKED
    assert Step.objects.get(run=beta).status == StepStatus.PENDING
    assert flow_status(flow) == FlowStatus.SEALED
    healed = Event.objects.filter(run=beta, type="run.blocked").order_by("id").last()
    assert healed is not None
    assert healed.payload["source"] == RunStatus.CANCELLED
    assert healed.payload["healed_by"] == "alpha"
    assert Event.objects.get(flow=flow, type="flow.member_healed").payload["member"] == "beta"
    reopened = Event.objects.get(flow=flow, type="flow.reopened")
    assert reopened.payload["reopened"] == 1
    assert Flow.objects.get(pk=flow.pk).finished_at is None
    run_pending()  # alpha completes now, then beta starts and completes
    assert statuses(flow) == {"alpha": RunStatus.COMPLETED, "beta": RunStatus.COMPLETED}
    assert end_flow(flow) == FlowStatus.COMPLETED
    ended = Flow.objects.get(pk=flow.pk)
    assert ended.summary["reopened"] == 1
    assert ended.summary["not_completed"] == {}
    history = types(flow, "flow.")
    assert history.index("flow.failed") < history.index("flow.reopened")
    assert history[-1] == "flow.completed"


def test_rerunning_the_upstream_heals_too(flow):
    alpha, beta = alpha_beta(flow)
    workflows.rerun_from(alpha.pk, "answer")
    assert status(beta) == RunStatus.BLOCKED
    assert flow_status(flow) == FlowStatus.SEALED
    run_pending()
    assert statuses(flow) == {"alpha": RunStatus.COMPLETED, "beta": RunStatus.COMPLETED}


def test_healing_is_transitive_along_a_chain(flow):
    a = workflows.add_to_flow(flow, Echo, {}, member="a")
    workflows.add_to_flow(flow, Echo, {}, member="b", after=["a"])
    workflows.add_to_flow(flow, Echo, {}, member="c", after=["b"])
    workflows.add_to_flow(flow, Echo, {}, member="d", after=["c"], join="any")
    workflows.seal_flow(flow)
    finish(a, fail=True)
    assert set(statuses(flow).values()) == {RunStatus.FAILED, RunStatus.CANCELLED}
    workflows.retry_run(a.pk)
    assert statuses(flow) == {
        "a": RunStatus.RUNNING,
        "b": RunStatus.BLOCKED,
        "c": RunStatus.BLOCKED,
        "d": RunStatus.BLOCKED,
    }
    run_pending()
    assert set(statuses(flow).values()) == {RunStatus.COMPLETED}


def both_upstreams_failed(flow: Flow, join: str = "all") -> tuple[Run, Run, Run]:
    """``u1`` and ``u2`` failed in the sealed flow, and ``down`` after both (its ``join``)
    cancelled for it."""
    u1 = workflows.add_to_flow(flow, Echo, {}, member="u1")
    u2 = workflows.add_to_flow(flow, Echo, {}, member="u2")
    down = workflows.add_to_flow(flow, Echo, {}, member="down", after=["u1", "u2"], join=join)
    workflows.seal_flow(flow)
    finish(u1, fail=True)
    finish(u2, fail=True)
    assert status(down) == RunStatus.CANCELLED
    return u1, u2, down


def test_an_all_join_with_another_failed_upstream_stays_cancelled(flow):
    """Healing one upstream of an ``all`` join leaves the member cancelled while another
    upstream still failed; retrying that one heals it."""
    u1, u2, down = both_upstreams_failed(flow)
    workflows.retry_run(u1.pk)
    assert status(down) == RunStatus.CANCELLED
    with pytest.raises(DependencyUnmet) as raised:
        workflows.retry_run(down.pk)
    assert raised.value.details["failed_upstream"] == ["u2"]
    workflows.retry_run(u2.pk)
    assert status(down) == RunStatus.BLOCKED
    run_pending()
    assert status(down) == RunStatus.COMPLETED


def test_an_any_join_heals_with_one_upstream_back(flow):
    u1, u2, down = both_upstreams_failed(flow, join="any")
    workflows.retry_run(u2.pk)
    assert status(down) == RunStatus.BLOCKED
    finish(u2)
    assert status(down) == RunStatus.RUNNING
    run_pending()
    assert status(down) == RunStatus.COMPLETED
    assert status(u1) == RunStatus.FAILED
    assert end_flow(flow) == FlowStatus.FAILED  # u1 still failed: the usual rule


def test_an_operator_cancelled_member_is_not_healed(flow):
    alpha = workflows.add_to_flow(flow, Echo, {}, member="alpha")
    beta = workflows.add_to_flow(flow, Echo, {}, member="beta", after=["alpha"])
    gamma = workflows.add_to_flow(flow, Echo, {}, member="gamma", after=["alpha"])
    workflows.cancel_run(gamma.pk, reason="not wanted")
    assert status(gamma) == RunStatus.CANCELLED
    workflows.seal_flow(flow)
    finish(alpha, fail=True)
    assert status(beta) == RunStatus.CANCELLED
    workflows.retry_run(alpha.pk)
    assert status(beta) == RunStatus.BLOCKED
    assert status(gamma) == RunStatus.CANCELLED
    assert not Event.objects.filter(run=gamma, type="flow.member_healed").exists()


def test_a_cancelled_flow_does_not_heal(flow):
    alpha = workflows.add_to_flow(flow, Echo, {}, member="alpha")
    beta = workflows.add_to_flow(flow, Echo, {}, member="beta", after=["alpha"])
    finish(alpha, fail=True)
    assert status(beta) == RunStatus.CANCELLED
    workflows.cancel_flow(flow.pk)
    workflows.retry_run(alpha.pk)
    assert status(beta) == RunStatus.CANCELLED
    assert flow_status(flow) == FlowStatus.CANCELLED


def test_skipping_the_failed_step_heals_too(flow):
    alpha, beta = alpha_beta(flow)
    step = Step.objects.get(run=alpha)
    workflows.skip_step(step.pk, output={"skipped": True})
    assert status(alpha) == RunStatus.COMPLETED
    assert status(beta) == RunStatus.RUNNING  # healed, then released by alpha's end
    run_pending()
    assert end_flow(flow) == FlowStatus.COMPLETED


def test_a_permanently_broken_upstream_fails_the_flow_again(flow):
    alpha = workflows.add_to_flow(flow, Broken, {}, member="alpha")
    beta = workflows.add_to_flow(flow, Echo, {}, member="beta", after=["alpha"])
    workflows.seal_flow(flow)
    run_pending()
    assert end_flow(flow) == FlowStatus.FAILED
    workflows.retry_run(alpha.pk)
    assert flow_status(flow) == FlowStatus.SEALED
    run_pending()
    assert status(beta) == RunStatus.CANCELLED
    assert end_flow(flow) == FlowStatus.FAILED
    assert Flow.objects.get(pk=flow.pk).summary["reopened"] == 1


def test_the_scanner_reopens_a_flow_left_failed_while_a_member_runs(flow):
    alpha, _ = alpha_beta(flow)
    # What no verb leaves: alpha runs again, the flow still reads failed.
    Run.objects.filter(pk=alpha.pk).update(status=RunStatus.RUNNING)
    result = repair_flows()
    assert result.done >= 1
    assert flow_status(flow) == FlowStatus.SEALED
    assert Event.objects.filter(flow=flow, type="flow.reopened").count() == 1
    assert repair_flows().found == 0  # nothing left to repair


def test_retry_step_of_such_a_member_is_refused_too(flow):
    _, beta = alpha_beta(flow)
    step = Step.objects.get(run=beta)
    with pytest.raises(DependencyUnmet, match="'alpha' \\(failed\\)"):
        workflows.retry_step(step.pk)
    assert status(beta) == RunStatus.CANCELLED
