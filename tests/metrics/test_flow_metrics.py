"""Flows in the Prometheus scrape: flows by status and the member runs still blocked,
read from the database in a fixed number of queries, with no flow or run id as a label."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test import Client, override_settings
from django.test.utils import CaptureQueriesContext

import workflows
from tests.metrics.test_metrics import ENABLED, scrape
from tests.support.workflows import Broken, Waits, Work
from workflows import Workflow
from workflows.metrics.prometheus import SCRAPE_QUERIES
from workflows.models import Flow
from workflows.testing import run_pending

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("enabled")]


@pytest.fixture
def enabled():
    with override_settings(WORKFLOWS=ENABLED):
        yield


def waiting_flow(name: str, blocked: int) -> Flow:
    """``gate`` waits for a signal; ``blocked`` members wait behind it."""
    flow = workflows.create_flow(name)
    workflows.add_to_flow(flow, Waits, {}, member="gate")
    for index in range(blocked):
        workflows.add_to_flow(flow, Work, {}, member=f"after-{index}", after=["gate"])
    return flow


def ended_flow(name: str, workflow: type[Workflow]) -> Flow:
    flow = workflows.create_flow(name)
    workflows.add_to_flow(flow, workflow, {}, member="only")
    workflows.seal_flow(flow)
    return flow


def test_flows_are_counted_by_status_and_blocked_members_by_workflow(client: Client):
    waiting_flow("open-one", blocked=2)
    sealed = waiting_flow("sealed-one", blocked=1)
    workflows.seal_flow(sealed)
    ended_flow("completes", Work)
    ended_flow("fails", Broken)
    workflows.cancel_flow(workflows.create_flow("cancelled"))
    run_pending()

    samples = scrape(client)
    flows = {
        labels[0][1]: value for (name, labels), value in samples.items() if name == "flowsite_flows"
    }
    assert flows == {"open": 1, "sealed": 1, "completed": 1, "failed": 1, "cancelled": 1}
    blocked = ("flowsite_flow_members_blocked", (("workflow", Work.name),))
    assert samples[blocked] == 3
    # The blocked runs are active runs too, in their own status.
    active = ("flowsite_runs_active", (("status", "blocked"), ("workflow", Work.name)))
    assert samples[active] == 3


def test_with_no_flow_every_status_reads_zero_and_nothing_is_blocked(client: Client):
    samples = scrape(client)
    assert {
        labels: value for (name, labels), value in samples.items() if name == "flowsite_flows"
    } == {
        (("status", status),): 0.0
        for status in ("open", "sealed", "completed", "failed", "cancelled")
    }
    assert not any(name == "flowsite_flow_members_blocked" for name, _ in samples)


def test_flows_add_no_query_per_flow_and_no_id_label(client: Client):
    def queries_of_one_scrape() -> int:
        with CaptureQueriesContext(connection) as captured:
            scrape(client)
        return len(captured)

    waiting_flow("first", blocked=1)
    assert queries_of_one_scrape() == SCRAPE_QUERIES
    for index in range(5):
        waiting_flow(f"more-{index}", blocked=3)
    assert queries_of_one_scrape() == SCRAPE_QUERIES
    ids = {str(pk) for pk in Flow.objects.values_list("pk", flat=True)}
    label_values = {value for _, labels in scrape(client) for _, value in labels}
    assert label_values.isdisjoint(ids)
