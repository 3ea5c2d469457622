"""Healing a flow under concurrency, with real connections committing for real.

A retry of a failed upstream member races with the end of the flow's last running
member, whose commit ends the flow (``finish_flow``, after commit): whichever commits
first, the flow never stays ended while a member runs again. The retry locks the flow
row before the member's run, and ``finish_flow`` reads the members' statuses under the
same lock: either the flow ended first and the retry reopens it, or the retry committed
first and the flow goes on. Two retries of one upstream at once heal its downstream
once. Repeated, a new flow each round, to meet more interleavings; on SQLite the writers
take turns and the same races check the outcome of serialised writers.
"""

from __future__ import annotations

from functools import partial

import pytest

import workflows
from tests.engine.flows.test_flow_races import ROUNDS, claimed, complete, fail, no_errors
from tests.support.flows import flow_status, status
from tests.support.workflows import Unit
from workflows.engine.flows import settle
from workflows.errors import InvalidTransition
from workflows.models import Event, Flow, Run
from workflows.status import FlowStatus, RunStatus

pytestmark = pytest.mark.django_db(transaction=True)


def prepared(round_: int) -> tuple[Flow, Run, Run, Run]:
    """Sealed: ``alpha`` failed, ``beta`` (after it) cancelled, ``gamma`` claimed."""
    flow = workflows.create_flow(f"heal-race-{round_}")
    alpha = workflows.add_to_flow(flow, Unit, {}, member="alpha")
    beta = workflows.add_to_flow(flow, Unit, {}, member="beta", after=["alpha"])
    gamma = workflows.add_to_flow(flow, Unit, {}, member="gamma")
    workflows.seal_flow(flow)
    fail(claimed(alpha))
    assert status(beta) == RunStatus.CANCELLED
    return flow, alpha, beta, gamma


def test_a_retry_racing_the_flows_end_leaves_it_sealed(concurrently):
    for round_ in range(ROUNDS):
        flow, alpha, beta, gamma = prepared(round_)
        lease = claimed(gamma)
        no_errors(concurrently(partial(complete, lease), partial(workflows.retry_run, alpha.pk)))
        settle.finish_flow_if_done(flow.pk)  # what a lost after-commit would leave
        assert status(gamma) == RunStatus.COMPLETED
        assert status(alpha) == RunStatus.RUNNING, round_
        assert status(beta) == RunStatus.BLOCKED, round_
        assert flow_status(flow) == FlowStatus.SEALED, round_
        ended = Event.objects.filter(flow=flow, type="flow.failed").count()
        reopened = Event.objects.filter(flow=flow, type="flow.reopened").count()
        assert ended == reopened, round_  # each end it had was undone by a reopening


def test_a_retry_racing_finish_flow_leaves_it_sealed(concurrently):
    for round_ in range(ROUNDS):
        flow, alpha, beta, gamma = prepared(round_)
        complete(claimed(gamma))  # commits; its after-commit ends the flow failed
        Flow.objects.filter(pk=flow.pk).update(status=FlowStatus.SEALED, finished_at=None)
        no_errors(
            concurrently(
                partial(settle.finish_flow, flow.pk), partial(workflows.retry_run, alpha.pk)
            )
        )
        assert status(alpha) == RunStatus.RUNNING, round_
        assert status(beta) == RunStatus.BLOCKED, round_
        assert flow_status(flow) == FlowStatus.SEALED, round_


def test_two_retries_of_the_upstream_heal_once(concurrently):
    for round_ in range(ROUNDS):
        flow, alpha, beta, _ = prepared(round_)
        results = concurrently(
            partial(workflows.retry_run, alpha.pk), partial(workflows.retry_run, alpha.pk)
        )
        refused = [r for r in results if isinstance(r, BaseException)]
        assert len(refused) == 1 and isinstance(refused[0], InvalidTransition), results
        assert status(beta) == RunStatus.BLOCKED
        assert Event.objects.filter(flow=flow, type="flow.member_healed").count() == 1
