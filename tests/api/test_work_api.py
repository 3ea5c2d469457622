"""``/api/work/``: external work over HTTP, each verb and each refusal as a worker in
another language meets it."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.core import signing
from django.urls import resolve
from django.utils import timezone
from rest_framework.test import APIClient

import workflows
from tests.api.conftest import user_with
from workflows import Retry, Task, Workflow
from workflows.engine.external.tokens import REFUSED, SALT
from workflows.models import Event, Frame, Run, Step
from workflows.testing import run_pending

pytestmark = pytest.mark.django_db

VERBS = ("claim", "heartbeat", "complete", "fail", "log")


class Labels(Workflow):
    name = "api_external_labels"
    print_labels = Task(
        external=True,
        queue="labels",
        retry=Retry(max_attempts=3, initial_interval=timedelta(0)),
        timeout=timedelta(seconds=30),
    )


class Engraving(Workflow):
    name = "api_external_engraving"
    engrave = Task(external=True, queue="engraving", requires={"laser"})


@pytest.fixture
def worker() -> APIClient:
    """A service account holding ``do_external_work`` and nothing else."""
    client = APIClient()
    client.force_authenticate(user_with("label-service", ["do_external_work"]))
    return client


def post(client: APIClient, verb: str, body: Any) -> Any:
    """POST ``body`` as JSON (a string: as it is, for JSON Python does not write)."""
    if isinstance(body, str):
        return client.post(f"/api/work/{verb}/", body, content_type="application/json")
    return client.post(f"/api/work/{verb}/", body, format="json")


def started(**options: Any) -> Run:
    run = workflows.start_run(Labels, {"parcels": ["P-1", "P-2"]}, **options)
    run_pending()
    return run


def claimed(client: APIClient, worker_name: str = "printer-1") -> dict[str, Any]:
    response = post(client, "claim", {"queues": ["labels"], "worker": worker_name})
    assert response.status_code == 200, response.content
    (job,) = response.json()["jobs"]
    return job


def refused(response: Any, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.content
    error = response.json()["error"]
    assert error["code"] == code, error
    return error


# -- the verbs ----------------------------------------------------------------------------


def test_a_worker_claims_logs_heartbeats_and_completes_a_step(worker):
    run = started()
    job = claimed(worker)
    assert job["run"] == str(run.pk)
    assert (job["workflow"], job["step"], job["queue"]) == (Labels.name, "print_labels", "labels")
    assert (job["attempt"], job["max_attempts"], job["timeout"]) == (1, 3, 30)
    assert job["input"] == {"parcels": ["P-1", "P-2"]}
    assert job["steps"] == {}
    assert job["idempotency_key"] == f"{run.pk}/print_labels"
    assert job["deadline"] is None
    step = Step.objects.get(run=run)
    assert step.lease_owner == "external:printer-1"

    Step.objects.filter(pk=step.pk).update(lease_expires_at=timezone.now() + timedelta(seconds=1))
    beat = post(worker, "heartbeat", {"lease": job["lease"], "progress": [1, 2], "message": "P-1"})
    assert beat.status_code == 200, beat.content
    step.refresh_from_db()
    assert step.lease_expires_at > timezone.now() + timedelta(seconds=20)
    assert (step.progress_done, step.progress_total, step.progress_message) == (1, 2, "P-1")
    assert beat.json()["lease_expires_at"].startswith(step.lease_expires_at.strftime("%Y-%m-%dT"))

    logged = post(worker, "log", {"lease": job["lease"], "text": "printing P-2"})
    assert (logged.status_code, logged.json()) == (200, {})
    assert list(Frame.objects.values_list("stream", "text")) == [("stdout", "printing P-2")]

    done = post(worker, "complete", {"lease": job["lease"], "output": {"labels": 2}})
    assert (done.status_code, done.json()) == (200, {"duplicate": False})
    run.refresh_from_db()
    assert (run.status, run.output) == ("completed", {"print_labels": {"labels": 2}})


def test_nothing_ready_is_an_empty_answer_and_the_queue_and_capabilities_decide(worker):
    workflows.start_run(Engraving)
    run_pending()
    empty = post(worker, "claim", {"queues": ["labels"], "worker": "w"})
    assert empty.json() == {"jobs": [], "timed_out": False}
    assert post(worker, "claim", {"queues": ["engraving"], "worker": "w"}).json()["jobs"] == []
    found = post(
        worker, "claim", {"queues": ["engraving"], "worker": "w", "capabilities": ["laser"]}
    )
    assert [job["step"] for job in found.json()["jobs"]] == ["engrave"]


def test_limit_claims_several_jobs_at_once(worker):
    for _ in range(3):
        started()
    answer = post(worker, "claim", {"queues": ["labels"], "worker": "w", "limit": 2}).json()
    assert len(answer["jobs"]) == 2
    assert len({job["lease"] for job in answer["jobs"]}) == 2


def test_completing_again_with_the_same_output_is_a_duplicate_and_with_another_a_conflict(worker):
    started()
    job = claimed(worker)
    assert post(worker, "complete", {"lease": job["lease"], "output": [1]}).json() == {
        "duplicate": False
    }
    again = post(worker, "complete", {"lease": job["lease"], "output": [1]})
    assert (again.status_code, again.json()) == (200, {"duplicate": True})
    refused(post(worker, "complete", {"lease": job["lease"], "output": [2]}), 409, "lease_lost")
    assert Event.objects.filter(type="step.completed").count() == 1


def test_a_failure_is_retried_and_a_permanent_one_fails_the_run(worker):
    run = started()
    job = claimed(worker)
    failing = post(worker, "fail", {"lease": job["lease"], "error": "printer out of paper"})
    assert (failing.status_code, failing.json()) == (200, {"status": "retry_scheduled"})
    run_pending()
    retry = claimed(worker)
    assert retry["attempt"] == 2
    gone = post(worker, "fail", {"lease": retry["lease"], "error": "no address", "permanent": True})
    assert gone.json() == {"status": "failed"}
    run.refresh_from_db()
    assert run.status == "failed"
    assert Step.objects.get(run=run).failure_class == "permanent"


def test_a_failure_names_its_class(worker):
    run = started()
    job = claimed(worker)
    body = {"lease": job["lease"], "error": "took too long", "failure_class": "timeout"}
    assert post(worker, "fail", body).status_code == 200
    assert Step.objects.get(run=run).failure_class == "timeout"


# -- stale, forged and cancelled leases -----------------------------------------------------


def test_a_revoked_lease_is_a_conflict_and_the_next_claim_gets_the_next_attempt(worker):
    run = started()
    job = claimed(worker)
    workflows.revoke_lease(Step.objects.get(run=run), expected_attempt=1, reason="wedged")
    before = Step.objects.get(run=run).version
    for verb, body in (
        ("heartbeat", {"lease": job["lease"]}),
        ("log", {"lease": job["lease"], "text": "late"}),
        ("complete", {"lease": job["lease"], "output": 1}),
        ("fail", {"lease": job["lease"], "error": "late"}),
    ):
        error = refused(post(worker, verb, body), 409, "lease_lost")
        assert error["message"] == REFUSED
    assert Step.objects.get(run=run).version == before
    assert claimed(worker)["attempt"] == 2


def test_an_expired_lease_is_a_conflict(worker):
    run = started()
    job = claimed(worker)
    Step.objects.filter(run=run).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    refused(post(worker, "heartbeat", {"lease": job["lease"]}), 409, "lease_lost")
    refused(post(worker, "complete", {"lease": job["lease"], "output": 1}), 409, "lease_lost")
    assert Step.objects.get(run=run).status == "running"


def test_a_cancelled_run_answers_run_cancelled_at_the_heartbeat(worker):
    run = started()
    job = claimed(worker)
    workflows.cancel_run(run)
    refused(post(worker, "heartbeat", {"lease": job["lease"]}), 409, "run_cancelled")
    assert Step.objects.get(run=run).failure_class == "cancelled"
    refused(post(worker, "complete", {"lease": job["lease"], "output": 1}), 409, "lease_lost")


@pytest.mark.parametrize(
    "lease",
    [
        "",
        "garbage",
        "x" * 5000,
        signing.dumps({"r": "not-a-uuid", "s": 1, "a": 1, "o": "x"}, salt=SALT),
        signing.dumps({"r": "0" * 32, "s": 1, "a": 1, "o": "external:w"}, salt="another"),
    ],
    ids=["empty", "garbage", "huge", "bad-run", "other-salt"],
)
def test_a_forged_or_malformed_lease_is_the_same_conflict(worker, lease):
    started()
    claimed(worker)
    before = list(Step.objects.values_list("version", flat=True))
    for verb, extra in (
        ("heartbeat", {}),
        ("log", {"text": "x"}),
        ("complete", {"output": 1}),
        ("fail", {"error": "x"}),
    ):
        error = refused(post(worker, verb, {"lease": lease, **extra}), 409, "lease_lost")
        assert error["message"] == REFUSED
    assert list(Step.objects.values_list("version", flat=True)) == before


def test_a_lease_claimed_by_another_worker_for_the_same_step_is_refused(worker):
    run = started()
    job = claimed(worker)
    step = Step.objects.get(run=run)
    forged = signing.dumps(
        {"r": str(run.pk), "s": step.pk, "a": step.attempt, "o": "external:intruder"}, salt=SALT
    )
    assert forged != job["lease"]
    refused(post(worker, "complete", {"lease": forged, "output": 1}), 409, "lease_lost")
    assert Step.objects.get(run=run).status == "running"


# -- bad requests ---------------------------------------------------------------------------

LEASE = "any-string"


@pytest.mark.parametrize(
    ("verb", "body", "field"),
    [
        ("claim", {"worker": "w"}, "queues"),
        ("claim", {"queues": ["labels"]}, "worker"),
        ("claim", {"queues": [], "worker": "w"}, "queues"),
        ("claim", {"queues": "labels", "worker": "w"}, "queues"),
        ("claim", {"queues": [7], "worker": "w"}, "queues"),
        ("claim", {"queues": ["labels"], "worker": 7}, "worker"),
        ("claim", {"queues": ["labels"], "worker": "w", "limit": "1"}, "limit"),
        ("claim", {"queues": ["labels"], "worker": "w", "limit": 0}, "limit"),
        ("claim", {"queues": ["labels"], "worker": "w", "limit": 101}, "limit"),
        ("claim", {"queues": ["labels"], "worker": "w", "wait": "5"}, "wait"),
        ("claim", {"queues": ["labels"], "worker": "w", "wait": 61}, "wait"),
        ("claim", {"queues": ["labels"], "worker": "w", "wait": -1}, "wait"),
        ("claim", {"queues": ["labels"], "worker": "w", "wait": True}, "wait"),
        ("claim", {"queues": ["labels"], "worker": "w", "capabilities": "laser"}, "capabilities"),
        ("claim", {"queues": ["labels"], "worker": "w", "queue": "labels"}, "queue"),
        ("heartbeat", {}, "lease"),
        ("heartbeat", {"lease": 12}, "lease"),
        ("heartbeat", {"lease": LEASE, "progress": "half"}, "progress"),
        ("heartbeat", {"lease": LEASE, "progress": [1]}, "progress"),
        ("heartbeat", {"lease": LEASE, "progress": [1, 2, 3]}, "progress"),
        ("heartbeat", {"lease": LEASE, "progress": -1}, "progress"),
        ("heartbeat", '{"lease": "x", "progress": 1e400}', "progress"),
        ("heartbeat", {"lease": LEASE, "progress": True}, "progress"),
        ("heartbeat", {"lease": LEASE, "message": 5}, "message"),
        ("heartbeat", {"lease": LEASE, "ttl": 60}, "ttl"),
        ("complete", {"lease": LEASE}, "output"),
        ("complete", {"output": 1}, "lease"),
        ("complete", {"lease": LEASE, "output": 1, "status": "done"}, "status"),
        ("fail", {"lease": LEASE}, "error"),
        ("fail", {"lease": LEASE, "error": ""}, "error"),
        ("fail", {"lease": LEASE, "error": "x", "permanent": "yes"}, "permanent"),
        ("fail", {"lease": LEASE, "error": "x", "failure_class": "cancelled"}, "failure_class"),
        ("fail", {"lease": LEASE, "error": "x", "retry": False}, "retry"),
        ("log", {"lease": LEASE}, "text"),
        ("log", {"lease": LEASE, "text": ["a"]}, "text"),
        ("log", {"lease": LEASE, "text": "a", "stream": "stdlog"}, "stream"),
        ("log", {"lease": LEASE, "text": "a\x00b"}, "text"),
    ],
)
def test_a_bad_body_is_a_400_naming_the_field(worker, verb, body, field):
    error = refused(post(worker, verb, body), 400, "validation_error")
    assert list(error["details"]) == [field]


@pytest.mark.parametrize("verb", VERBS)
def test_a_body_that_is_not_an_object_is_a_400(worker, verb):
    refused(post(worker, verb, ["lease"]), 400, "validation_error")
    response = worker.post(f"/api/work/{verb}/", "{not json", content_type="application/json")
    refused(response, 400, "malformed_request")


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"queues": ["labels"], "worker": "has space"}, "worker"),
        ({"queues": ["labels"], "worker": ""}, "worker"),
        ({"queues": ["no spaces please"], "worker": "w"}, "queues"),
        ({"queues": ["labels"], "worker": "w", "capabilities": ["a b"]}, "capabilities"),
    ],
)
def test_names_the_verb_refuses_are_invalid_input_naming_the_field(worker, body, field):
    response = post(worker, "claim", body)
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert field in error["message"] or field in error["details"], error


def test_output_no_database_stores_is_invalid_input(worker):
    run = started()
    job = claimed(worker)
    body = {"lease": job["lease"], "output": {"text": "a\x00b"}}
    error = refused(post(worker, "complete", body), 400, "invalid_input")
    assert "output" in error["message"]
    assert Step.objects.get(run=run).status == "running"


def test_a_get_is_not_allowed(worker):
    refused(worker.get("/api/work/claim/"), 405, "method_not_allowed")


# -- who may ---------------------------------------------------------------------------------


@pytest.mark.parametrize("verb", VERBS)
def test_without_the_permission_every_verb_is_refused(verb):
    client = APIClient()
    client.force_authenticate(user_with("operator", ["view_run", "start_run", "operate_run"]))
    refused(post(client, verb, {"lease": "x"}), 403, "permission_denied")
    refused(post(APIClient(), verb, {"lease": "x"}), 401, "not_authenticated")


def test_the_permission_allows_external_work_and_nothing_else(worker):
    run = started()
    refused(worker.get("/api/runs/"), 403, "permission_denied")
    refused(worker.get(f"/api/runs/{run.pk}/"), 403, "permission_denied")
    refused(worker.get("/api/workflows/"), 403, "permission_denied")
    start = worker.post("/api/runs/", {"workflow": Labels.name, "input": {}}, format="json")
    refused(start, 403, "permission_denied")
    refused(worker.post(f"/api/runs/{run.pk}/cancel/", {}, format="json"), 403, "permission_denied")
    refused(worker.get("/api/schedules/"), 403, "permission_denied")
    assert claimed(worker)["run"] == str(run.pk)


# -- throttling ------------------------------------------------------------------------------


def test_a_worker_over_its_rate_is_throttled_and_another_worker_is_not(
    worker, settings, fresh_throttle
):
    settings.WORKFLOWS = {**settings.WORKFLOWS, "API_WORKER_RATE": "3/min"}
    started()
    job = claimed(worker, "printer-1")  # 1
    assert post(worker, "log", {"lease": job["lease"], "text": "a"}).status_code == 200  # 2
    assert post(worker, "heartbeat", {"lease": job["lease"]}).status_code == 200  # 3
    over = post(worker, "heartbeat", {"lease": job["lease"]})
    error = refused(over, 429, "throttled")
    assert error["retryable"] is True
    assert int(over["Retry-After"]) > 0
    refused(post(worker, "claim", {"queues": ["labels"], "worker": "printer-1"}), 429, "throttled")
    other = post(worker, "claim", {"queues": ["labels"], "worker": "printer-2"})
    assert other.status_code == 200, other.content
    # The same worker name of another account has a budget of its own.
    colleague = APIClient()
    colleague.force_authenticate(user_with("other-service", ["do_external_work"]))
    assert (
        post(colleague, "claim", {"queues": ["labels"], "worker": "printer-1"}).status_code == 200
    )


def test_a_forged_lease_cannot_spend_another_workers_budget(worker, settings, fresh_throttle):
    settings.WORKFLOWS = {**settings.WORKFLOWS, "API_WORKER_RATE": "2/min"}
    started()
    job = claimed(worker, "printer-1")  # printer-1: 1
    forged = "eyJvIjoiZXh0ZXJuYWw6cHJpbnRlci0xIn0:forged:signature"
    for _ in range(3):  # the nameless budget, not printer-1's
        post(worker, "heartbeat", {"lease": forged})
    assert post(worker, "heartbeat", {"lease": job["lease"]}).status_code == 200  # printer-1: 2
    refused(post(worker, "heartbeat", {"lease": job["lease"]}), 429, "throttled")


def test_no_rate_is_no_limit(worker, settings, fresh_throttle):
    settings.WORKFLOWS = {**settings.WORKFLOWS, "API_WORKER_RATE": None}
    for _ in range(5):
        assert post(worker, "claim", {"queues": ["labels"], "worker": "w"}).status_code == 200


# -- the long poll ---------------------------------------------------------------------------


def test_the_claim_holds_no_request_transaction_and_the_other_verbs_do():
    atomic = {
        verb: not getattr(resolve(f"/api/work/{verb}/").func, "_non_atomic_requests", set())
        for verb in VERBS
    }
    assert atomic == {
        "claim": False,
        "heartbeat": True,
        "complete": True,
        "fail": True,
        "log": True,
    }


@pytest.mark.django_db(transaction=True)
def test_a_claim_with_wait_times_out_when_nothing_comes(worker):
    answer = post(worker, "claim", {"queues": ["labels"], "worker": "w", "wait": 0.3})
    assert (answer.status_code, answer.json()) == (200, {"jobs": [], "timed_out": True})


@pytest.mark.django_db(transaction=True)
def test_a_claim_with_wait_answers_work_that_is_ready(worker):
    run = started()
    answer = post(worker, "claim", {"queues": ["labels"], "worker": "w", "wait": 5}).json()
    assert answer["timed_out"] is False
    assert [job["run"] for job in answer["jobs"]] == [str(run.pk)]


@pytest.mark.django_db(transaction=True)
def test_a_claim_with_wait_takes_one_of_the_users_long_poll_slots(worker, settings):
    settings.WORKFLOWS = {**settings.WORKFLOWS, "LONG_POLLS_PER_USER": 1}
    from workflows.api import long_poll

    key = f"user:{worker.handler._force_user.pk}"
    with long_poll._held_lock:
        long_poll._held[key] = 1
    try:
        waiting = post(worker, "claim", {"queues": ["labels"], "worker": "w", "wait": 5})
        refused(waiting, 429, "too_many_waits")
        assert post(worker, "claim", {"queues": ["labels"], "worker": "w"}).status_code == 200
    finally:
        with long_poll._held_lock:
            del long_poll._held[key]
