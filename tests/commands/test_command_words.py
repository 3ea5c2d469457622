"""The operator commands word time and ids alike: spans with the one formatter
(:func:`workflows.text.duration`), moments from now with :func:`workflows.text.relative`,
ids whole or in the one short form (:func:`workflows.text.short_id`); and a gate
decision says what was decided even when a loop has already reset the gate."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest

import workflows
from tests.support.commands import run_command
from tests.support.loop_review import review_in_round
from tests.support.users import staff
from workflows import Sleep, SubWorkflow, Workflow
from workflows.models import Run, Step
from workflows.testing import run_pending
from workflows.text import short_id

pytestmark = pytest.mark.django_db

# A span as the formatter says it: "45 seconds", "59 minutes, 59 seconds", "850 ms".
UNIT = r"\d+\xa0(?:ms|years?|days?|hours?|minutes?|seconds?)"
SPAN = rf"{UNIT}(?:, {UNIT})?"


class Napping(Workflow):
    name = "command_words_napping"
    nap = Sleep(timedelta(seconds=40))


class Parent(Workflow):
    name = "command_words_parent"
    deadline = timedelta(hours=1)
    child = SubWorkflow(Napping.name)


@pytest.fixture
def family() -> tuple[Run, Run]:
    parent = workflows.start_run(Parent)
    run_pending()
    return parent, Run.objects.get(parent_run=parent)


def ids_of(run: Run, text: str) -> set[str]:
    """Every way ``text`` writes ``run``'s id: its whole id, or a prefix of it."""
    whole = str(run.pk)
    found = re.findall(rf"{whole[:4]}[0-9a-f-]*", text)
    assert found, f"no id of run {whole} in {text!r}"
    return set(found)


def test_commands_print_ids_whole_or_in_the_one_short_form(family):
    parent, child = family
    forms = {str(child.pk), short_id(child.pk)}
    assert ids_of(child, run_command("workflows_status")) <= forms
    assert ids_of(child, run_command("workflows_show", str(child.pk))) <= forms
    shown = run_command("workflows_show", str(parent.pk))
    # The parent's hold names its child in short: the form every command takes back.
    assert f"Child run {short_id(child.pk)} of {Napping.name}" in shown
    assert ids_of(child, shown) <= forms
    assert run_command("workflows_show", short_id(child.pk)).startswith(
        run_command("workflows_show", str(child.pk)).splitlines()[0]
    )


def test_commands_say_spans_and_moments_with_the_one_formatter(family):
    parent, child = family
    shown = run_command("workflows_show", str(parent.pk))
    [left] = [line for line in shown.splitlines() if line.startswith("time left")]
    assert re.fullmatch(rf"time left +{SPAN}", left), left  # not "0:59:59"
    napping = run_command("workflows_show", str(child.pk))
    [sleep] = [line for line in napping.splitlines() if line.startswith("sleep ")]
    assert re.search(rf"in {SPAN}$", sleep), sleep  # never "in 0 minutes"
    assert "0\xa0minutes" not in napping


def test_rejecting_a_loops_gate_says_it_was_rejected_not_pending():
    reviewer = staff("reviewer", "view_run")
    run = review_in_round(1, reviewer)
    gate = Step.objects.get(run=run, name="review")
    output = run_command("workflows_reject", str(gate.pk), "--user", "reviewer")
    assert output == (
        f"step {gate.pk} 'review' (gate) of run {run.pk}: rejected by reviewer in round 1; "
        "a loop went back over it, so it is pending in round 2\n"
    )
