"""Eight processes making transitions on the same runs of one database at once."""

from __future__ import annotations

import json
from pathlib import Path
from uuid import UUID

import pytest

import workflows
from tests.acceptance.flowapp.models import HandlerCall, SharedCounter, SideEffect
from tests.acceptance.harness import Processes
from tests.acceptance.invariants import completion_problems, lock_error_problems
from tests.acceptance.stack import Stack
from workflows.models import Event, Run, Step

pytestmark = [pytest.mark.acceptance, pytest.mark.django_db(transaction=True)]

PROCESSES = 8
RUNS = 40
STEPS_PER_RUN = 9  # acceptance_grid
TIMEOUT = 180.0


def start_drains(
    processes: Processes, run_ids: list[UUID], tmp_path: Path
) -> tuple[Path, list[Path]]:
    """Start the racing processes; return the file that releases them and their reports."""
    runs_file = tmp_path / "runs.json"
    runs_file.write_text(json.dumps([str(pk) for pk in run_ids]))
    go = tmp_path / "go"
    reports = [tmp_path / f"report-{n}.json" for n in range(PROCESSES)]
    for n, report in enumerate(reports):
        processes.start(
            f"drain-{n}",
            "acceptance_drain",
            str(runs_file),
            f"--go-file={go}",
            f"--report={report}",
            f"--deadline={TIMEOUT}",
            # No queue: the racing processes themselves are the workers.
            env={"FLOWSITE_EXECUTOR": "inline"},
        )
    return go, reports


def test_eight_processes_racing_over_shared_runs_leave_an_exact_final_state(
    stack: Stack, tmp_path: Path
):
    """Every process is offered every ready step (``execute_step`` in a loop), so claims
    collide constantly. The result must be exact: each step claimed, run and completed
    once, the shared counter incremented once per step, and no lock error anywhere."""
    SharedCounter.objects.create(name="grid")
    run_ids = [workflows.start_run("acceptance_grid", {"counter": "grid"}).pk for _ in range(RUNS)]
    go, reports = start_drains(stack.processes, run_ids, tmp_path)
    stack.wait_for(
        "every racing process to be ready",
        lambda: len(list(tmp_path.glob("go.*.ready"))) == PROCESSES,
        timeout=60,
    )
    go.touch()
    stack.wait_for(
        "every racing process to finish",
        lambda: all(report.exists() for report in reports),
        timeout=TIMEOUT,
        run_ids=run_ids,
    )

    total = RUNS * STEPS_PER_RUN
    for process in stack.processes.started:
        assert process.popen.wait(timeout=30) == 0, process.log_tail()
        assert "Traceback" not in process.log_tail(100_000), process.log_tail()
    summaries = [json.loads(report.read_text()) for report in reports]
    assert sum(summary["attempts"] for summary in summaries) == total
    assert sum(1 for summary in summaries if summary["attempts"]) >= 2, summaries
    steps = Step.objects.filter(run__in=run_ids)
    assert set(steps.values_list("status", "attempt")) == {("completed", 1)}
    assert steps.count() == total
    assert Event.objects.filter(run__in=run_ids, type="step.started").count() == total
    assert completion_problems(run_ids) == []
    assert set(Run.objects.filter(pk__in=run_ids).values_list("status", flat=True)) == {"completed"}
    assert SharedCounter.objects.get(name="grid").value == total
    assert HandlerCall.objects.count() == SideEffect.objects.count() == total
    assert lock_error_problems() == []
    assert stack.monitor.problems == []
