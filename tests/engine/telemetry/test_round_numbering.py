"""Attempts are numbered within the round on every surface, the events and the revoke
included (issue #35, point 5): after a retry starts a new round, the first attempt of
the round is 1 in the step's page, its API resource, its events, ``explain()`` and the
attempt a revoke is pinned to; the step's ``attempt`` column counts on as the fence."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

import workflows
from tests.support.handlers import WORK
from tests.support.users import staff
from workflows import Retry, Task, Workflow
from workflows.engine import STEP, claim_step, complete_work, fail_attempt, fire_timer, reclaim
from workflows.engine.lease import Lease
from workflows.models import Event, Run, Step, Timer
from workflows.testing import run_pending

pytestmark = pytest.mark.django_db


class Twice(Workflow):
    name = "round_numbering"
    work = Task(WORK, retry=Retry(max_attempts=2))


def step_of(run: Run) -> Step:
    return Step.objects.get(run=run, name="work")


def claimed(run: Run, owner: str = "worker-1") -> Lease:
    lease = claim_step(step_of(run).pk, owner)
    assert isinstance(lease, Lease)
    return lease


def payloads(run: Run, *types: str) -> list[tuple[str, int | None]]:
    return [
        (event.type, event.payload.get("attempt"))
        for event in Event.objects.filter(run=run, type__in=types).order_by("id")
    ]


def fire_retry(run: Run) -> None:
    """Fire the run's armed retry timer now: its step is ready again."""
    for timer in Timer.objects.filter(run=run, kind="retry", status="scheduled"):
        assert fire_timer(timer.pk)


def in_second_round() -> tuple[Run, Lease]:
    """A run whose step failed both attempts of its first round, was retried, and now
    runs attempt 1 of its second round (the step's third attempt in all)."""
    run = workflows.start_run(Twice)
    for _ in range(2):
        fail_attempt(claimed(run), RuntimeError("down"))
        fire_retry(run)
    assert step_of(run).status == "failed"
    workflows.retry_step(step_of(run))
    return run, claimed(run)


def test_the_events_number_attempts_within_the_round():
    run, lease = in_second_round()
    step = step_of(run)
    assert (step.attempt, step.round, step.attempts_in_round) == (3, 2, (1, 2))
    assert lease.attempt == 3  # the fence counts on

    fail_attempt(lease, RuntimeError("again"))
    fire_retry(run)
    complete_work(claimed(run), "done")

    assert payloads(
        run, "step.started", "step.retry_scheduled", "step.failed", "step.completed"
    ) == [
        ("step.started", 1),
        ("step.retry_scheduled", 1),
        ("step.started", 2),
        ("step.failed", 2),
        ("step.started", 1),
        ("step.retry_scheduled", 1),
        ("step.started", 2),
        ("step.completed", 2),
    ]
    # The error keeps the counter, as the fence and the frames do.
    assert step_of(run).attempt == 4


def test_a_revoke_is_pinned_to_the_attempt_as_shown_and_to_its_round():
    run, _ = in_second_round()

    late = workflows.revoke_lease(step_of(run), expected_attempt=1, expected_round=1)
    assert (late.revoked, late.reason) == (False, "replaced")
    early = workflows.revoke_lease(step_of(run), expected_attempt=1, expected_round=3)
    assert (early.revoked, early.reason) == (False, "not_started")
    beyond = workflows.revoke_lease(step_of(run), expected_attempt=2)
    assert (beyond.revoked, beyond.reason) == (False, "not_started")

    result = workflows.revoke_lease(step_of(run), expected_attempt=1, expected_round=2)
    assert (result.revoked, result.attempt) == (True, 1)
    assert payloads(run, "lease.revoked") == [("lease.revoked", 1)]
    again = workflows.revoke_lease(step_of(run), expected_attempt=1)
    assert (again.revoked, again.reason) == (False, "already_revoked")
    step = step_of(run)
    assert step.attempts_in_round == (1, 3)  # the revoked attempt was given back
    assert step.error["attempt"] == 3  # the error keeps the counter
    assert step.error["message"].startswith("attempt 1 of step")


def test_a_reclaimed_attempt_is_numbered_within_its_round():
    run, _ = in_second_round()
    assert reclaim(STEP, step_of(run).pk, now=timezone.now() + timedelta(days=1)) == "ready"
    assert payloads(run, "lease.expired") == [("lease.expired", 1)]
    assert step_of(run).error["message"].startswith("attempt 1 of ")


def test_explain_names_the_running_attempt_of_the_round():
    run, _ = in_second_round()
    holds = [hold for hold in workflows.explain(run).waiting_on if hold.kind == "lease"]
    assert [(hold.details["attempt"], hold.details["max_attempts"]) for hold in holds] == [(1, 2)]


def test_the_api_revokes_the_attempt_its_step_resource_shows():
    run, _ = in_second_round()
    api = APIClient()
    api.force_authenticate(staff("ops", "view_run", "operate_run"))
    shown = api.get(f"/api/steps/{step_of(run).pk}/").json()
    assert (shown["attempt"], shown["round"]) == (1, 2)

    body = {"attempt": shown["attempt"], "round": shown["round"], "reason": "wedged"}
    revoked = api.post(f"/api/steps/{step_of(run).pk}/revoke/", body, format="json")
    assert revoked.status_code == 200, revoked.content
    answer = revoked.json()
    assert (answer["revoked"], answer["revoked_attempt"], answer["attempt"]) == (True, 1, 1)
    repeat = api.post(f"/api/steps/{step_of(run).pk}/revoke/", body, format="json").json()
    assert (repeat["revoked"], repeat["reason"]) == (False, "already_revoked")


class Chain(Workflow):
    name = "round_numbering_chain"
    first = Task(WORK)
    then = Task(WORK, after=["first"])


def test_a_chained_claim_numbers_the_next_steps_attempt_within_its_round():
    """The worker that completes ``first`` claims ``then`` in the same statement as its
    event (on PostgreSQL one UPDATE carries the insert): after a rerun, that event says
    attempt 1 of the new round too."""
    run = workflows.start_run(Chain)
    run_pending()
    workflows.rerun_from(run, "first")
    run_pending()
    then = Step.objects.get(run=run, name="then")
    assert (then.attempt, then.round, then.attempts_in_round.attempt) == (2, 2, 1)
    started = Event.objects.filter(run=run, type="step.started", step=then)
    assert [event.payload["attempt"] for event in started.order_by("id")] == [1, 1]
