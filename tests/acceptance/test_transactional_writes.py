"""Same-transaction business writes with real worker processes: a transactional
handler's row lands exactly when its attempt's completion does.

``acceptance_ledger``'s first step writes a ``LedgerEntry`` row in its handler
(``transactional=True``). Each test makes one attempt go wrong after that write — its
worker is killed, or it was fenced out while it ran — and checks that the row of that
attempt never appears while the attempt that completed the step left exactly one.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path
from uuid import UUID

import pytest
from django.db import connection

import workflows
from tests.acceptance.flowapp.handlers import WRITTEN_DIR
from tests.acceptance.flowapp.models import LedgerEntry
from tests.acceptance.stack import Stack
from workflows.models import Event, Run, Step

pytestmark = [pytest.mark.acceptance, pytest.mark.django_db(transaction=True)]

INLINE = {"FLOWSITE_EXECUTOR": "inline"}
PROCESS_EXIT_TIMEOUT = 60.0


def start(stack: Stack, tmp_path: Path, data: dict) -> tuple[UUID, Path]:
    """Start one ``acceptance_ledger`` run; return its id and a runs file for drain workers."""
    run_id = workflows.start_run("acceptance_ledger", data).pk
    runs_file = tmp_path / f"runs-{run_id}.json"
    runs_file.write_text(json.dumps([str(run_id)]))
    return run_id, runs_file


def written_by(stack: Stack, run_id: UUID, attempt: int) -> Path:
    return stack.var_dir / WRITTEN_DIR / str(run_id) / str(attempt)


def ledger(run_id: UUID) -> list[tuple[int, int]]:
    """(attempt, pid) of every committed row of the run."""
    return list(LedgerEntry.objects.filter(run_id=run_id).values_list("attempt", "pid"))


def finish_with_a_fresh_worker(stack: Stack, run_id: UUID, runs_file: Path) -> Run:
    """Reclaim with the sweeper, finish with another worker; return the completed run."""
    stack.sweeper()
    fresh = stack.processes.start("fresh-worker", "acceptance_drain", str(runs_file), env=INLINE)
    fresh.watched = False  # it exits once the run is finished, maybe before the next poll
    run = stack.wait_finished([run_id], timeout=90)[run_id]
    assert run.status == "completed"
    assert fresh.popen.wait(timeout=PROCESS_EXIT_TIMEOUT) == 0
    return run


def test_a_worker_killed_between_its_write_and_its_completion_leaves_neither(
    stack: Stack, tmp_path: Path
):
    """SIGKILL right after the handler's write: the write was never committed, the step
    is still running under the dead worker's lease, and once reclaimed the next attempt
    writes the one row."""
    run_id, runs_file = start(stack, tmp_path, {"die_attempts": [1]})
    doomed = stack.processes.start("doomed-worker", "acceptance_drain", str(runs_file), env=INLINE)
    doomed.watched = False  # it is meant to die
    assert doomed.popen.wait(timeout=PROCESS_EXIT_TIMEOUT) == -signal.SIGKILL
    dead_pid = int(written_by(stack, run_id, 1).read_text())
    assert dead_pid == doomed.pid

    assert ledger(run_id) == []
    step = Step.objects.get(run_id=run_id, name="book")
    assert (step.status, step.attempt) == ("running", 1)
    assert step.lease_owner.split(":")[1] == str(dead_pid)

    run = finish_with_a_fresh_worker(stack, run_id, runs_file)
    rows = ledger(run_id)
    assert [attempt for attempt, _pid in rows] == [2]
    assert rows[0][1] != dead_pid
    assert run.steps.get(name="book").output["attempt"] == 2


def test_a_worker_that_wakes_up_after_losing_its_lease_writes_nothing(stack: Stack, tmp_path: Path):
    """A worker claims the step and stalls before its handler; its lease runs out, the
    step is reclaimed and completed by another worker. Woken up, the stale worker runs
    the handler, which writes its row, and the completion is fenced out: the row rolls
    back with it and only the lost lease is recorded."""
    run_id, runs_file = start(stack, tmp_path, {})
    go_file = tmp_path / "go"
    stale = stack.processes.start(
        "stale-worker", "acceptance_claim_then_run", str(run_id), "book", str(go_file), env=INLINE
    )
    stack.wait_for(
        "the stale worker to claim the step",
        lambda: Path(f"{go_file}.claimed").exists(),
        timeout=60,
        run_ids=[run_id],
    )

    finish_with_a_fresh_worker(stack, run_id, runs_file)
    go_file.touch()
    stale.watched = False
    assert stale.popen.wait(timeout=PROCESS_EXIT_TIMEOUT) == 0, stale.log_tail()

    assert int(written_by(stack, run_id, 1).read_text()) == stale.pid  # it did write
    assert [attempt for attempt, _pid in ledger(run_id)] == [2]
    assert_fenced_out(run_id, stale.pid)


@pytest.mark.skipif(
    connection.vendor == "sqlite",
    reason="SQLite has one write lock for the whole database: while a transactional "
    "handler's transaction is open no other process can reclaim its step, so its lease "
    "cannot be lost mid-handler (the stale case there is the one before the handler)",
)
def test_a_worker_fenced_out_while_its_write_is_pending_never_commits_it(
    stack: Stack, tmp_path: Path
):
    """The handler writes its row, then stalls with its transaction open while its lease
    runs out; another worker reclaims the step and completes it with its own row. When
    the stalled worker goes on, its completion is rejected and its row rolls back."""
    run_id, runs_file = start(stack, tmp_path, {"hold_attempts": [1], "hold_seconds": 90})
    stalled = stack.processes.start(
        "stalled-worker", "acceptance_drain", str(runs_file), env=INLINE
    )
    stack.wait_for(
        "the first attempt to write its row",
        lambda: written_by(stack, run_id, 1).exists(),
        timeout=60,
        run_ids=[run_id],
    )
    assert ledger(run_id) == []  # written, not committed

    finish_with_a_fresh_worker(stack, run_id, runs_file)
    stack.release(run_id)
    stalled.watched = False
    assert stalled.popen.wait(timeout=PROCESS_EXIT_TIMEOUT) == 0, stalled.log_tail()

    assert [attempt for attempt, _pid in ledger(run_id)] == [2]
    assert_fenced_out(run_id, stalled.pid)


def assert_fenced_out(run_id: UUID, stale_pid: int) -> None:
    """Attempt 1 (by ``stale_pid``) lost its completion to attempt 2, which completed."""
    step = Step.objects.get(run_id=run_id, name="book")
    assert (step.status, step.attempt, step.output["attempt"]) == ("completed", 2, 2)
    assert step.output["pid"] != stale_pid
    lost = Event.objects.get(run_id=run_id, type="lease.lost")
    assert (lost.payload["action"], lost.payload["attempt"]) == ("completion", 1)
    assert lost.payload["owner"].split(":")[1] == str(stale_pid)
