"""The run page of a run with an external step: ready, it says it waits for an external
worker on its queue; claimed, its attempt shows like any running attempt (its worker
named as an external worker, progress, log lines); the steps table and the graph say
the step is external, and nothing prints the route's raw external mark."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse

import workflows
from tests.admin.admin_console import staff
from tests.support.handlers import NOOP
from workflows import Task, Workflow
from workflows.testing import run_pending

pytestmark = pytest.mark.django_db


class Labels(Workflow):
    name = "admin_external_labels"
    pack = Task(NOOP)
    print_label = Task(external=True, queue="labels", timeout=timedelta(minutes=2))


def run_page(client, run) -> str:
    client.force_login(staff("viewer"))
    response = client.get(reverse("admin:workflows_run_change", args=[run.pk]))
    assert response.status_code == 200
    return response.content.decode()


def ready_run():
    run = workflows.start_run(Labels)
    run_pending()
    return run


def test_a_ready_external_step_says_it_waits_for_an_external_worker_on_its_queue(client):
    html = run_page(client, ready_run())
    assert "Step “print_label” waits for an external worker to claim it from queue labels" in html
    assert '<div class="wf-quiet step-route">external queue &#x27;labels&#x27;</div>' in html
    assert "external · ready" in html  # the graph node's second line
    assert "(external task, queue labels): ready" in html  # and its tooltip
    assert "@external" not in html


def test_a_claimed_external_step_shows_its_attempt_like_any_running_attempt(client):
    run = ready_run()
    [job] = workflows.claim_external("labels", worker="go-1")
    workflows.heartbeat_external(job.lease, progress=(1, 4), message="printing on bay 3")
    workflows.log_external(job.lease, "label PL-7 sent to bay 3")
    html = run_page(client, run)
    assert "External worker go-1 runs step “print_label” (attempt 1 of 3), lease until in" in html
    assert "attempt 1 of 3 on external worker go-1" in html  # the "Running now" block
    assert "printing on bay 3" in html
    assert "label PL-7 sent to bay 3" in html
    # The raw owner is data: the history's payloads keep it, the words never say it.
    assert "on external:go-1" not in html and "Worker external:go-1" not in html
    assert "@external" not in html


def test_the_start_page_draws_the_workflows_external_step_as_external(client):
    client.force_login(staff("starter"))
    page = client.get(reverse("admin:workflows_run_start"), {"workflow": Labels.name})
    assert page.status_code == 200
    html = page.content.decode()
    assert "external · pending" in html
    assert "(external task, queue labels): pending" in html
