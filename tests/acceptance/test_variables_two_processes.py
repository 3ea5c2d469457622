"""Run variables written by two parallel branches of one run, each run by a worker in a
process of its own (issue #41, point 1).

Each round starts a run of :class:`~tests.engine.variables.test_variables.Branches`,
whose two root steps write the same key (``last``) and one of their own; two
``manage.py`` processes claim and run one branch each at the same instant, as two
workers of a deployment would. Whatever the interleaving, the later commit wins: the
run's final ``last`` is the step of the later ``run.variables_set`` event in its
history, both writes are there with their step and attempt, and the run's variables
are exactly the history's patches merged in order. The assertions read the database
afterwards, never timings.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import workflows
from tests.acceptance.harness import Processes, Side, race
from tests.engine.variables.test_variables import Branches
from workflows.models import Event, Run, Step
from workflows.variables import patched

pytestmark = [pytest.mark.acceptance, pytest.mark.django_db(transaction=True)]

ROUNDS = 8
ACTING = ("--import", "tests.engine.variables.test_variables")


def running(steps: list[Step], owner: str) -> Side:
    """A side running each round's step to its end as worker ``owner``."""
    return Side([("run_step", str(step.pk), owner) for step in steps])


def writes(run: Run) -> list[dict[str, Any]]:
    events = Event.objects.filter(run=run, type="run.variables_set").order_by("id")
    return list(events.values_list("payload", flat=True))


def test_two_workers_writing_one_key_in_parallel_branches_the_later_commit_wins(
    processes: Processes, tmp_path: Path
):
    runs = [workflows.start_run(Branches) for _ in range(ROUNDS)]
    lefts = [Step.objects.get(run=run, name="left") for run in runs]
    rights = [Step.objects.get(run=run, name="right") for run in runs]
    rounds = race(
        processes,
        tmp_path / "race",
        {"left": running(lefts, "worker-left"), "right": running(rights, "worker-right")},
        *ACTING,
    )
    for run, outcomes in zip(runs, rounds, strict=True):
        for side, outcome in outcomes.items():
            assert outcome.get("result") == {"attempts": 1}, (side, outcome)
        run.refresh_from_db()
        assert run.status == "completed"
        history = writes(run)
        assert sorted((write["step"], write["attempt"]) for write in history) == [
            ("left", 1),
            ("right", 1),
        ]
        later = history[-1]["step"]
        assert run.variables == {"last": later, "seen": {"left": 1, "right": 1}}
        replayed: dict[str, Any] = {}
        for write in history:
            replayed = patched(replayed, write["patches"])
        assert replayed == run.variables
