"""``revoke_lease`` pinned to an attempt, raced by two real OS processes (issue #35,
point 4).

The engine tests race it with threads (:mod:`tests.engine.verbs.test_revoke`); here two
``manage.py`` processes, each with its own interpreter and connection, act at the same
instant on the step of that test's one-attempt workflow, as two operators' clicks (or a
click and a worker) arriving at two web processes would. The race is repeated, a new
run each round, to meet more interleavings; the assertions read the database
afterwards, never timings.

- Two revokes of attempt 1 while it runs: exactly one takes the lease, the other says
  ``already_revoked``; the step shows one revocation (``max_attempts`` + 1 once, one
  ``lease.revoked`` event, the winner's reason in its error) and the wedged worker's
  late result is refused.
- Attempt 1 already revoked, a worker claims attempt 2 while a late revoke of attempt 1
  arrives: whichever comes first, the late revoke changes nothing (``already_revoked``
  before the claim, ``replaced`` after it) and attempt 2 keeps running, untouched.
  The claim must succeed too: on PostgreSQL a late revoke that changed nothing used to
  hold the step's row lock, so the worker skipped the row as being claimed and dropped
  its nudge (``StaleState``); the revoke now locks the row only for an attempt it can
  take (the engine test of that: ``tests/engine/verbs/test_revoke.py``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model

import workflows
from tests.acceptance.harness import Processes, Side, race
from tests.engine.verbs.test_revoke import Single, running, step_of
from tests.support.events import payloads
from workflows import LeaseLost
from workflows.engine import complete_work
from workflows.engine.lease import Lease
from workflows.models import Event, Run, Step
from workflows.status import StepStatus

pytestmark = [pytest.mark.acceptance, pytest.mark.django_db(transaction=True)]

ROUNDS = 5
WEDGED = "wedged-worker"  # the owner of attempt 1 (``running``'s default)
HEALTHY = "healthy-worker"
# Both sides act as the operator, and must know the engine test's workflow, which only
# pytest's process imports otherwise.
ACTING = ("--user", "operator", "--import", "tests.engine.verbs.test_revoke")


def revoking(steps: list[Step], reason: str, attempt: int = 1) -> Side:
    """A side revoking attempt ``attempt`` of each round's step, with ``reason``."""
    return Side(
        [("revoke_lease", str(step.pk), str(attempt)) for step in steps], ("--reason", reason)
    )


def claiming(steps: list[Step], owner: str) -> Side:
    """A side claiming each round's ready step as worker ``owner``: its next attempt."""
    return Side([("claim_step", str(step.pk), owner) for step in steps])


def result(outcome: dict[str, Any]) -> dict[str, Any]:
    """What the call returned; a raised error fails the test with the error shown."""
    assert "result" in outcome, outcome
    return outcome["result"]


@pytest.fixture
def operator() -> Any:
    return get_user_model().objects.create_user("operator")


def started(rounds: int) -> tuple[list[Run], list[Lease]]:
    """One run of :class:`Single` per round, its step claimed: attempt 1 is running."""
    runs = [workflows.start_run(Single, {"round": round_}) for round_ in range(rounds)]
    return runs, [running(run) for run in runs]


def test_two_processes_revoking_one_attempt_revoke_it_once(
    processes: Processes, tmp_path: Path, operator: Any
):
    runs, leases = started(ROUNDS)
    steps = [step_of(run) for run in runs]
    before = steps[0].max_attempts
    rounds = race(
        processes,
        tmp_path / "race",
        {"a": revoking(steps, "click a"), "b": revoking(steps, "click b")},
        *ACTING,
    )
    for run, lease, outcomes in zip(runs, leases, rounds, strict=True):
        told = {side: result(outcome) for side, outcome in outcomes.items()}
        assert sorted((r["revoked"], r["reason"] or "", r["attempt"]) for r in told.values()) == [
            (False, "already_revoked", 1),
            (True, "", 1),
        ], told
        [winner] = [side for side, r in told.items() if r["revoked"]]

        work = step_of(run)
        assert (work.status, work.attempt, work.max_attempts) == (StepStatus.READY, 1, before + 1)
        assert (work.lease_owner, work.lease_expires_at, work.failure_class) == (
            "",
            None,
            "revoked",
        )
        assert {key: work.error[key] for key in ("code", "attempt", "owner", "by", "reason")} == {
            "code": "revoked",
            "attempt": 1,
            "owner": WEDGED,
            "by": "operator",
            "reason": f"click {winner}",
        }
        [revoked] = payloads(run, "lease.revoked")
        assert (revoked["attempt"], revoked["reason"], revoked["status"]) == (
            1,
            f"click {winner}",
            "ready",
        )
        assert Event.objects.filter(run=run, type="step.ready", step=work).count() == 2
        with pytest.raises(LeaseLost):
            complete_work(lease, "late")  # the wedged worker's result is refused


def test_a_late_revoke_racing_the_next_attempts_claim_leaves_that_attempt_alone(
    processes: Processes, tmp_path: Path, operator: Any
):
    runs, _ = started(ROUNDS)
    steps = [step_of(run) for run in runs]
    before = steps[0].max_attempts
    for step in steps:  # attempt 1 is revoked: the step is ready for attempt 2
        assert workflows.revoke_lease(step, expected_attempt=1, reason="wedged").revoked
    rounds = race(
        processes,
        tmp_path / "race",
        {"worker": claiming(steps, HEALTHY), "late": revoking(steps, "late click")},
        *ACTING,
    )
    for run, outcomes in zip(runs, rounds, strict=True):
        assert result(outcomes["worker"]) == {"attempt": 2, "owner": HEALTHY}
        late = result(outcomes["late"])
        # Before the claim it finds its revoke done, after it a newer attempt: either
        # way nothing changes.
        assert late["revoked"] is False, late
        assert late["reason"] in ("already_revoked", "replaced"), late
        work = step_of(run)
        assert (work.status, work.attempt, work.max_attempts) == (
            StepStatus.RUNNING,
            2,
            before + 1,
        )
        assert work.lease_owner == HEALTHY
        assert work.lease_expires_at is not None
        [revoked] = payloads(run, "lease.revoked")  # the setup's, of attempt 1
        assert (revoked["attempt"], revoked["reason"]) == (1, "wedged")
