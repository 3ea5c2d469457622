"""``workflows_show`` names the failure class of each step's last failed attempt."""

from __future__ import annotations

import json

import pytest

import workflows
from tests.support.commands import run_command
from tests.support.handlers import NOOP
from workflows import PermanentError, Retry, Task, Workflow
from workflows.testing import run_pending

pytestmark = pytest.mark.django_db

HERE = "tests.commands.test_show_failure_class"


def declines(ctx):
    raise PermanentError("card declined")


class Declines(Workflow):
    name = "show_failure_declines"
    check = Task(NOOP)
    charge = Task(f"{HERE}.declines", retry=Retry(max_attempts=2))


def show(*args: str) -> str:
    return run_command("workflows_show", *args)


def test_the_steps_table_says_how_the_last_attempt_failed():
    run = workflows.start_run(Declines)
    run_pending()
    steps = show(str(run.pk)).split("\nsteps\n")[1].split("\nhistory\n")[0].splitlines()
    assert "FAILED AS" in steps[0]
    charge = next(line for line in steps if " charge " in line)
    assert "permanent" in charge.split() and charge.endswith("card declined")
    check = next(line for line in steps if " check " in line)
    assert "permanent" not in check.split()

    data = json.loads(show(str(run.pk), "--json"))
    classes = {step["name"]: step["failure_class"] for step in data["steps"]}
    assert classes == {"check": None, "charge": "permanent"}
    explained = {step["name"]: step["last_failure"] for step in data["explain"]["steps"]}
    assert explained == {"check": None, "charge": "last attempt failed: permanent"}
