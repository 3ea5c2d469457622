"""A heartbeat racing the lease scanner's reclaim, in two real OS processes (issue #41,
point 4: a heartbeat honours expiry).

One ``manage.py`` process renews the lease of attempt 1 as its worker held it; another
takes the step back as the lease scanner does, at the same instant, a new run each
round. The assertions read the database afterwards, never timings.

- The lease still live, the scanner's clock past it (a scanner ahead of the worker):
  either can win. Exactly one does: the heartbeat extends the lease and the reclaim
  finds nothing to take, or the reclaim takes the attempt back as ``lease_expired`` and
  the heartbeat is refused with ``LeaseExpired``. The loser writes nothing: the row
  moved on by one write, and the only events are the winner's.
- The lease expired (past the reclaim's grace, on the database clock): the heartbeat
  never wins, whether it comes before the reclaim or after it, and writes nothing
  either way; the reclaim records the attempt.
"""

from __future__ import annotations

import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone

import workflows
from tests.acceptance.harness import Processes, Side, race
from tests.engine.leases.test_expiry import Patient
from workflows.engine import claim_step
from workflows.engine.lease import Lease
from workflows.models import Event, Run, Step

pytestmark = [pytest.mark.acceptance, pytest.mark.django_db(transaction=True)]

ROUNDS = 6
OWNER = "stalled-worker"
KNOWING = ("--import", "tests.engine.leases.test_expiry")


def claimed(rounds: int) -> list[Lease]:
    """One run of :class:`Patient` per round, attempt 1 claimed by :data:`OWNER`."""
    runs = [workflows.start_run(Patient, {"round": round_}) for round_ in range(rounds)]
    return [claim_step(run.steps.get(name="work").pk, OWNER) for run in runs]


def racing(leases: list[Lease], clocks: list[str]) -> dict[str, Side]:
    return {
        "worker": Side(
            [
                ("heartbeat", str(lease.unit_id), f"{OWNER}/{lease.attempt}/{lease.version}")
                for lease in leases
            ]
        ),
        "scanner": Side(
            [
                ("reclaim", str(lease.unit_id), clock)
                for lease, clock in zip(leases, clocks, strict=True)
            ]
        ),
    }


def events_after_claim(run: Run) -> list[str]:
    claimed_at = Event.objects.get(run=run, type="step.started").pk
    return list(Event.objects.filter(run=run, pk__gt=claimed_at).values_list("type", flat=True))


def assert_reclaimed(step: Step, lease: Lease, worker: dict[str, Any]) -> None:
    assert worker["error"]["code"] == "lease_expired", worker
    assert (step.status, step.attempt, step.failure_class) == ("ready", 1, "lease_expired")
    assert step.version == lease.version + 1  # the reclaim's one write, nothing of the worker
    assert events_after_claim(step.run) == ["lease.expired", "step.ready"]


def test_a_heartbeat_and_the_reclaim_of_a_live_lease_exactly_one_wins(
    processes: Processes, tmp_path: Path
):
    leases = claimed(ROUNDS)
    expiries = [Step.objects.get(pk=lease.unit_id).lease_expires_at for lease in leases]
    clocks = [(expiry + timedelta(seconds=1)).isoformat() for expiry in expiries]
    # A renewal sets the lease a whole timeout past its own time: made over a second
    # after the claim, it reaches past the scanner's clock, so a heartbeat that wins
    # leaves nothing to reclaim. (Within a second of the claim, the reclaim would still
    # find the renewed lease behind that clock, and both would win in this race.)
    time.sleep(1.2)
    rounds = race(processes, tmp_path / "race", racing(leases, clocks), *KNOWING)
    winners = set()
    for lease, expiry, outcome in zip(leases, expiries, rounds, strict=True):
        worker, scanner = outcome["worker"], outcome["scanner"]
        assert "error" not in scanner, scanner
        step = Step.objects.select_related("run").get(pk=lease.unit_id)
        if scanner["result"]["status"] is None:
            winners.add("heartbeat")
            assert worker["result"] == {"renewed": True}, worker
            assert (step.status, step.attempt, step.lease_owner) == ("running", 1, OWNER)
            assert step.version == lease.version + 1
            assert step.lease_expires_at > expiry
            assert events_after_claim(step.run) == []
        else:
            winners.add("reclaim")
            assert scanner["result"]["status"] == "ready"
            assert_reclaimed(step, lease, worker)
    assert winners  # which of them, and how often, is the machine's to choose


def test_a_heartbeat_of_an_expired_lease_never_wins_and_writes_nothing(
    processes: Processes, tmp_path: Path
):
    leases = claimed(ROUNDS)
    Step.objects.filter(pk__in=[lease.unit_id for lease in leases]).update(
        lease_expires_at=timezone.now() - timedelta(minutes=1)
    )
    rounds = race(processes, tmp_path / "race", racing(leases, ["db"] * ROUNDS), *KNOWING)
    for lease, outcome in zip(leases, rounds, strict=True):
        assert outcome["scanner"]["result"] == {"status": "ready"}, outcome
        step = Step.objects.select_related("run").get(pk=lease.unit_id)
        assert_reclaimed(step, lease, outcome["worker"])
