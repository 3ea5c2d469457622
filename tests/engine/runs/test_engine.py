"""Engine transitions end to end, executed inline: sequence, split/join, skip, fail."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

import workflows
from tests.support.handlers import CALLS
from tests.support.runs import run_inline
from workflows import IdempotencyConflict, InvalidInput, Sleep, Task, Workflow
from workflows.definitions import registry
from workflows.models import Event, Run, Step, Timer
from workflows.testing import run_pending

pytestmark = pytest.mark.django_db

HERE = "tests.engine.runs.test_engine"


def record(ctx):
    CALLS.append(ctx.step_name)
    return {"step": ctx.step_name, "n": ctx.input.get("n", 0)}


def add_outputs(ctx):
    return ctx.steps["left"].output["n"] + ctx.steps["right"].output["n"] + 1


def fail_always(ctx):
    raise RuntimeError("boom")


def returns_a_set(ctx):
    return {1, 2}


class Sequence(Workflow):
    name = "engine_sequence"
    one = Task(f"{HERE}.record")
    two = Task(f"{HERE}.record")
    three = Task(f"{HERE}.record")


class Diamond(Workflow):
    name = "engine_diamond"
    start = Task(f"{HERE}.record")
    left = Task(f"{HERE}.record", after=["start"])
    right = Task(f"{HERE}.record", after=["start"])
    join = Task(f"{HERE}.add_outputs", after=["left", "right"])


class Conditional(Workflow):
    name = "engine_conditional"
    start = Task(f"{HERE}.record")
    maybe = Task(f"{HERE}.record", when=lambda ctx: ctx.input.get("go", False))
    after_maybe = Task(f"{HERE}.record")
    other = Task(f"{HERE}.record", after=["start"])
    join = Task(f"{HERE}.record", after=["after_maybe", "other"])


class Failing(Workflow):
    name = "engine_failing"
    ok = Task(f"{HERE}.record")
    bad = Task(f"{HERE}.fail_always", retry=workflows.Retry(max_attempts=1))
    never = Task(f"{HERE}.record")
    parallel = Sleep(timedelta(hours=1), after=["ok"])


class Validated(Workflow):
    name = "engine_validated"
    only = Task(f"{HERE}.record")

    @classmethod
    def clean_input(cls, data):
        if "n" not in data:
            raise InvalidInput("engine_validated needs 'n'")
        return {"n": int(data["n"])}


def steps_of(run: Run) -> dict[str, str]:
    return dict(run.steps.values_list("name", "status"))


def event_types(run: Run) -> list[str]:
    return list(run.events.values_list("type", flat=True))


def test_start_creates_steps_and_readies_the_root():
    run = workflows.start_run("engine_sequence", {"n": 1})
    assert run.status == "running"
    assert run.workflow_version == 1
    assert run.snapshot == Sequence.snapshot()
    assert steps_of(run) == {"one": "ready", "two": "pending", "three": "pending"}
    assert event_types(run) == ["run.started", "step.ready"]


def test_sequence_completes_with_the_sink_output():
    run = workflows.start_run(Sequence, {"n": 5})
    result = run_pending()
    run.refresh_from_db()
    assert result.steps == 3
    assert CALLS == ["one", "two", "three"]
    assert run.status == "completed"
    assert run.output == {"three": {"step": "three", "n": 5}}
    assert run.finished_at is not None
    assert set(steps_of(run).values()) == {"completed"}
    assert event_types(run)[-1] == "run.completed"


def test_parallel_branches_join_once_and_read_upstream_outputs():
    run = run_inline("engine_diamond", {"n": 2})
    assert run.status == "completed"
    assert run.output == {"join": 5}
    assert sorted(CALLS) == ["left", "right", "start"]
    join = run.steps.get(name="join")
    assert run.events.filter(step=join, type="step.completed").count() == 1


def test_false_condition_skips_and_propagates_but_join_still_runs():
    run = run_inline("engine_conditional", {"go": False})
    assert steps_of(run) == {
        "start": "completed",
        "maybe": "skipped",
        "after_maybe": "skipped",
        "other": "completed",
        "join": "completed",
    }
    assert run.status == "completed"
    reasons = list(run.events.filter(type="step.skipped").values_list("payload__reason", flat=True))
    assert reasons == ["when= condition is false", "every upstream step was skipped"]


def test_true_condition_runs_the_branch():
    run = run_inline("engine_conditional", {"go": True})
    assert set(steps_of(run).values()) == {"completed"}


def test_failed_step_fails_the_run_naming_the_step_and_cancels_the_rest():
    run = run_inline("engine_failing")
    assert run.status == "failed"
    assert run.error["code"] == "step_failed"
    assert run.error["step"] == "bad"
    assert run.error["message"] == "boom"
    assert steps_of(run) == {
        "ok": "completed",
        "bad": "failed",
        "never": "cancelled",
        "parallel": "cancelled",
    }
    assert not Timer.objects.filter(run=run, status="scheduled").exists()
    assert "never" not in CALLS


def test_non_json_output_fails_the_step_for_good():
    class Unserialisable(Workflow):
        name = "engine_unserialisable"
        only = Task(f"{HERE}.returns_a_set")

    run = workflows.start_run(Unserialisable)
    run_pending()
    step = run.steps.get()
    assert step.status == "failed"
    assert step.attempt == 1
    assert "not JSON-serialisable" in step.error["message"]


def test_idempotent_start_returns_the_first_run_or_conflicts():
    first = workflows.start_run(Sequence, {"n": 1}, idempotency_key="order-1")
    again = workflows.start_run(Sequence, {"n": 1}, idempotency_key="order-1")
    assert again.pk == first.pk
    with pytest.raises(IdempotencyConflict) as conflict:
        workflows.start_run(Sequence, {"n": 2}, idempotency_key="order-1")
    assert conflict.value.code == "idempotency_conflict"
    assert str(first.pk) in str(conflict.value)
    assert Run.objects.filter(idempotency_key="order-1").count() == 1
    first.refresh_from_db()
    assert first.input == {"n": 1}


def test_input_is_validated_before_anything_is_written():
    with pytest.raises(InvalidInput, match="must be a JSON object"):
        workflows.start_run(Sequence, ["not", "a", "dict"])
    with pytest.raises(InvalidInput, match="needs 'n'"):
        workflows.start_run(Validated, {})
    with pytest.raises(InvalidInput, match="not JSON-serialisable"):
        workflows.start_run(Sequence, {"when": timezone.now()})
    assert not Run.objects.exists()
    run = workflows.start_run(Validated, {"n": "4"})
    assert run.input == {"n": 4}


def test_unknown_workflow_name_is_a_clear_error():
    with pytest.raises(workflows.DefinitionMissing, match="no workflow named 'nope'"):
        workflows.start_run("nope")


def test_run_of_an_unregistered_version_fails_with_definition_missing():
    class Temporary(Workflow):
        name = "engine_temporary"
        version = 4
        only = Task(f"{HERE}.record")

    run = workflows.start_run(Temporary)
    registry.unregister("engine_temporary", 4)
    result = run_pending()  # must not raise
    run.refresh_from_db()
    assert result.steps == 0
    assert run.status == "failed"
    assert run.error["code"] == "definition_missing"
    assert "'engine_temporary' v4" in run.error["message"]
    assert steps_of(run) == {"only": "cancelled"}


def test_events_are_appended_for_every_transition():
    run = workflows.start_run(Sequence)
    run_pending()
    assert event_types(run) == [
        "run.started",
        "step.ready",
        "step.started",
        "step.completed",
        "step.started",
        "step.completed",
        "step.started",
        "step.completed",
        "run.completed",
    ]
    assert Event.objects.filter(run=run, step__isnull=False).count() == 7


def test_step_rows_carry_attempts_and_timestamps():
    run = workflows.start_run(Sequence)
    run_pending()
    for step in Step.objects.filter(run=run):
        assert step.attempt == 1
        assert step.version > 1
        assert step.started_at is not None
        assert step.finished_at is not None
        assert step.lease_expires_at is None
