"""Issue #39's contract called by its names as written, from the package a user imports,
with the keyword arguments the issue shows: external work and awaits."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

import workflows
from tests.support.handlers import NOOP
from workflows.testing import run_pending

pytestmark = pytest.mark.django_db

HERE = "tests.workers.test_contract_names_issue39"


def ask(ctx):
    if ctx.resumed is None:
        return workflows.Await(["mapping", "skip"], timeout=timedelta(hours=1))
    return {"resumed": ctx.resumed}


class ContractCharge(workflows.Workflow):
    name = "contract_charge"
    prepare = workflows.Task(NOOP)
    charge = workflows.Task(
        external=True,
        queue="payments",
        retry=workflows.Retry(max_attempts=3),
        timeout=timedelta(seconds=30),
    )


class ContractAsk(workflows.Workflow):
    name = "contract_ask"
    ask = workflows.Task(f"{HERE}.ask", awaits=["mapping", "skip"])


def test_external_work_by_its_names():
    run = workflows.start_run(ContractCharge, {"order": 1})
    run_pending()
    (job,) = workflows.claim_external(["payments"], worker="go-1", limit=1, capabilities=(), wait=0)
    assert isinstance(job, workflows.ExternalJob)
    assert (job.run, job.step, job.attempt, job.input) == (run.pk, "charge", 1, {"order": 1})
    assert job.idempotency_key == f"{run.pk}/charge"
    assert job.deadline is None and job.lease_expires_at is not None
    workflows.heartbeat_external(job.lease, progress=(1, 2), message="half")
    workflows.log_external(job.lease, "charging", stream="stdout")
    assert workflows.fail_external(job.lease, "busy", permanent=False, failure_class=None) == (
        "retry_scheduled"
    )
    run_pending(until=timezone.now() + timedelta(minutes=1))  # the retry's backoff
    (retry,) = workflows.claim_external(["payments"], worker="go-1", wait=0)
    assert workflows.complete_external(retry.lease, {"charged": 1}) is True
    with pytest.raises(workflows.LeaseLost):
        workflows.complete_external(retry.lease, {"charged": 2})
    run.refresh_from_db()
    assert run.status == "completed"


def test_an_await_by_its_names():
    run = workflows.start_run(ContractAsk, {})
    run_pending()
    token = workflows.signal_token(run, "mapping")
    workflows.send_signal_with_token(token, {"sku": "A"})
    run_pending()
    run.refresh_from_db()
    assert run.output == {"ask": {"resumed": {"signal": "mapping", "payload": {"sku": "A"}}}}
