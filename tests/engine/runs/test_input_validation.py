"""Values the database cannot store are refused before anything is written, the same way
on SQLite and PostgreSQL: over-long keys and names, NUL characters, JSON that is not
JSON, signals no step waits for, selections that are not lists."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

import workflows
from tests.support import commands
from tests.support.commands import run_command
from tests.support.database import is_sqlite
from tests.support.handlers import ASK_BANK, CALLS, NOOP, TOKENS
from workflows import (
    DefinitionError,
    DefinitionMissing,
    Gate,
    InvalidDecision,
    InvalidInput,
    Option,
    Retry,
    Task,
    UnknownSignal,
    WaitForSignal,
    Workflow,
)
from workflows.definitions import registry
from workflows.models import Event, Run, Signal, Step
from workflows.testing import run_pending
from workflows.workers import runner

pytestmark = pytest.mark.django_db

HERE = "tests.engine.runs.test_input_validation"
NUL_OUTPUT = {"t": "a\u0000b"}


def count_and_return_nul(ctx):
    CALLS.append(ctx.step_name)
    return NUL_OUTPUT


def count_and_return_nested_nul_key(ctx):
    CALLS.append(ctx.step_name)
    return {"rows": [{"ok": 1}, {"bad\u0000key": 2}]}


class Payment(Workflow):
    name = "validation_payment"
    invoice = Task(NOOP)
    paid = WaitForSignal("paid")
    refunded = WaitForSignal("refunded", after=["invoice"])
    done = Task(NOOP, after=["paid", "refunded"])


class NoSignals(Workflow):
    name = "validation_no_signals"
    only = Task(NOOP)


class NulOutput(Workflow):
    name = "validation_nul_output"
    write = Task(f"{HERE}.count_and_return_nul", retry=Retry(max_attempts=3))
    after_write = Task(NOOP)


class NestedNulKey(Workflow):
    name = "validation_nested_nul_key"
    write = Task(f"{HERE}.count_and_return_nested_nul_key", retry=Retry(max_attempts=3))


class Bank(Workflow):
    name = "validation_bank"
    transfer = Task(ASK_BANK, retry=Retry(max_attempts=2))


class Packing(Workflow):
    name = "validation_packing"
    pack = Gate(prompt="Pack how?", options=[Option("a", "A"), Option("b", "B")])
    ship = Task(NOOP)


def max_length(model: type, field: str) -> int:
    return model._meta.get_field(field).max_length


def refused(name: str, *args: str, message: str) -> None:
    """Run a command that must exit 1 with one line containing ``message`` (a literal)
    and write no history."""
    refusal = commands.refused(name, *args, message=message)
    assert refusal.returncode == 1
    assert "\n" not in str(refusal)


# 3. A signal to a name the workflow never waits for


def test_a_signal_no_step_waits_for_is_refused_naming_those_it_waits_for():
    run = workflows.start_run(Payment)
    with pytest.raises(UnknownSignal) as refusal:
        workflows.send_signal(run, "payed", {"amount": 1})
    assert refusal.value.code == "unknown_signal"
    assert refusal.value.message == (
        f"run {run.pk} of 'validation_payment' v1 never waits for signal 'payed'; "
        "it waits for 'paid', 'refunded'"
    )
    assert refusal.value.details["waits_for"] == ["paid", "refunded"]
    assert not Signal.objects.exists()
    assert not run.events.filter(type="signal.received").exists()
    workflows.send_signal(run, "refunded")
    assert Signal.objects.get().name == "refunded"


def test_a_workflow_without_signal_steps_waits_for_no_signal():
    run = workflows.start_run(NoSignals)
    with pytest.raises(UnknownSignal, match="'paid'; it waits for no signal"):
        workflows.send_signal(run.pk, "paid")
    assert not Signal.objects.exists()


def test_a_run_whose_definition_is_missing_is_checked_against_its_snapshot(unregistered):
    run = workflows.start_run(Payment)  # invoice has not run: no step waits yet
    unregistered(Payment)
    with pytest.raises(UnknownSignal, match="it waits for 'paid', 'refunded'"):
        workflows.send_signal(run, "payed")
    # A known name reaches the engine, which fails the run: its code is gone.
    with pytest.raises(DefinitionMissing, match="is not registered"):
        workflows.send_signal(run, "paid", 1)
    run.refresh_from_db()
    assert (run.status, run.error["code"]) == ("failed", "definition_missing")
    Run.objects.filter(pk=run.pk).update(snapshot={"name": Payment.name, "version": 1})
    with pytest.raises(DefinitionMissing, match="snapshot does not list its steps' kinds"):
        workflows.send_signal(str(run.pk), "paid", 2)
    assert not Signal.objects.exists()


def test_the_signal_command_refuses_an_unknown_name_in_one_line():
    run = workflows.start_run(Payment)
    refused(
        "workflows_signal",
        str(run.pk),
        "payed",
        message="never waits for signal 'payed'; it waits for 'paid', 'refunded'",
    )
    assert not Signal.objects.exists()


# 7. A handler output the database cannot store


def test_an_output_with_a_nul_character_fails_the_step_once_for_good():
    run = workflows.start_run(NulOutput)
    run_pending()
    run_pending(until=timezone.now() + timedelta(hours=2))  # past any lease and backoff
    assert CALLS == ["write"]
    step = run.steps.get(name="write")
    assert (step.status, step.attempt, step.output) == ("failed", 1, None)
    message = step.error["message"]
    assert message == (
        "handler output contains a NUL character (\\x00) at position 1 of the string at "
        "['t'], which the database cannot store"
    )
    assert step.error["type"] == "workflows.errors.PermanentError"
    run.refresh_from_db()
    assert run.status == "failed"
    assert (run.error["step"], run.error["message"]) == ("write", message)
    assert run.error["cause"] != "lease_expired"
    assert run.steps.get(name="after_write").status == "cancelled"


def test_a_nul_character_in_a_nested_key_fails_the_step_naming_where_it_is():
    run = workflows.start_run(NestedNulKey)
    run_pending(until=timezone.now() + timedelta(hours=2))
    assert CALLS == ["write"]
    step = run.steps.get()
    assert step.status == "failed"
    assert (
        "NUL character (\\x00) at position 3 of the key 'bad\\x00key' at ['rows'][1]"
        in (step.error["message"])
    )


def test_an_output_the_database_refuses_after_the_check_fails_the_attempt_for_good(
    monkeypatch,
):
    if is_sqlite():
        pytest.skip("SQLite stores NUL characters; only PostgreSQL refuses them")
    # Let the output through the check to reach the database's own refusal, as an
    # output the check does not foresee would.
    monkeypatch.setattr(runner, "checked_output", lambda output: output)
    run = workflows.start_run(NulOutput)
    run_pending()
    run_pending(until=timezone.now() + timedelta(hours=2))
    assert CALLS == ["write"]
    step = run.steps.get(name="write")
    assert (step.status, step.attempt, step.output) == ("failed", 1, None)
    assert step.error["message"] == (
        "the database cannot store the handler's output: unsupported Unicode escape sequence"
    )
    assert "DataError" in step.error["traceback"]
    run.refresh_from_db()
    assert run.status == "failed"
    assert run.error["message"] == step.error["message"]
    assert run.error["cause"] != "lease_expired"


# 8. Over-long and NUL-bearing keys, names and inputs


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (
            {"idempotency_key": "k" * 256},
            "idempotency key is 256 characters long; the limit is 255",
        ),
        ({"business_key": "b" * 256}, "business key is 256 characters long; the limit is 255"),
        (
            {"idempotency_key": "a\x00b"},
            "idempotency key contains a NUL character (\\x00) at position 1, which the "
            "database cannot store",
        ),
        ({"business_key": "\x00"}, "business key contains a NUL character (\\x00) at position 0"),
        ({"business_key": 12}, "business key must be a string, got int"),
        ({"idempotency_key": "\ud800"}, "idempotency key contains a lone surrogate ('\\ud800')"),
        (
            {"input": {"t": "a\x00b"}},
            "input contains a NUL character (\\x00) at position 1 of the string at ['t']",
        ),
        (
            {"input": {"a\x00": 1}},
            "input contains a NUL character (\\x00) at position 1 of the key",
        ),
        ({"input": {"x": [float("nan")]}}, "input is not storable JSON"),
        ({"input": {"x": float("inf")}}, "input is not storable JSON"),
        ({"input": {"x": (1, 2)}}, "input changes in a JSON round trip"),
        ({"input": {1: "one"}}, "input changes in a JSON round trip"),
        ({"input": {"x": {1, 2}}}, "input is not JSON-serialisable"),
    ],
)
def test_start_refuses_what_the_database_cannot_store(arguments, message):
    data = arguments.pop("input", {})
    with pytest.raises(InvalidInput, match=re.escape(message)):
        workflows.start_run(NoSignals, data, **arguments)
    assert not Run.objects.exists()
    assert not Event.objects.exists()


def test_start_limits_are_the_model_fields_and_values_at_the_limit_are_kept():
    key = "k" * max_length(Run, "idempotency_key")
    business = "b" * max_length(Run, "business_key")
    run = workflows.start_run(NoSignals, {}, idempotency_key=key, business_key=business)
    run.refresh_from_db()
    assert (run.idempotency_key, run.business_key) == (key, business)
    assert workflows.start_run(NoSignals, {}, idempotency_key=key).pk == run.pk


@pytest.mark.parametrize(
    ("name", "arguments", "message"),
    [
        ("s" * 201, {}, "signal name is 201 characters long; the limit is 200"),
        ("pa\x00id", {}, "signal name contains a NUL character (\\x00) at position 2"),
        ("paid", {"idempotency_key": "k" * 256}, "signal idempotency key is 256 characters long"),
        ("paid", {"idempotency_key": "\x00"}, "signal idempotency key contains a NUL character"),
        ("paid", {"payload": "a\x00"}, "signal payload contains a NUL character (\\x00) at "),
        ("paid", {"payload": {"t": ["\x00"]}}, "the string at ['t'][0]"),
        ("paid", {"payload": float("nan")}, "signal payload is not storable JSON"),
        ("paid", {"payload": {"when": timezone.now()}}, "signal payload is not JSON-serialis"),
        (None, {}, "signal name must be a string, got NoneType"),
    ],
)
def test_send_signal_refuses_what_the_database_cannot_store(name, arguments, message):
    run = workflows.start_run(Payment)
    with pytest.raises(InvalidInput, match=re.escape(message)):
        workflows.send_signal(run, name, **arguments)
    assert not Signal.objects.exists()
    assert not run.events.filter(type="signal.received").exists()
    assert max_length(Signal, "name") == 200
    assert max_length(Signal, "idempotency_key") == 255


def test_the_start_command_refuses_bad_keys_and_input_in_one_line():
    refused(
        "workflows_start",
        NoSignals.name,
        "--input",
        "{}",
        "--idempotency-key",
        "k" * 256,
        message="idempotency key is 256 characters long; the limit is 255",
    )
    refused(
        "workflows_start",
        NoSignals.name,
        "--input",
        "{}",
        "--business-key",
        "b" * 300,
        message="business key is 300 characters long; the limit is 255",
    )
    refused(
        "workflows_start",
        NoSignals.name,
        "--input",
        '{"t": "a\\u0000b"}',
        message="input contains a NUL character (\\x00) at position 1 of the string at ['t']",
    )
    refused(
        "workflows_start",
        NoSignals.name,
        "--input",
        '{"x": NaN}',
        message="input is not storable JSON",
    )
    assert not Run.objects.exists()


def test_the_signal_command_refuses_bad_names_keys_and_payloads_in_one_line():
    run = workflows.start_run(Payment)
    refused(
        "workflows_signal",
        str(run.pk),
        "s" * 201,
        message="signal name is 201 characters long; the limit is 200",
    )
    refused(
        "workflows_signal",
        str(run.pk),
        "paid",
        "--idempotency-key",
        "k" * 256,
        message="signal idempotency key is 256 characters long; the limit is 255",
    )
    refused(
        "workflows_signal",
        str(run.pk),
        "paid",
        "--payload",
        '{"t": "a\\u0000b"}',
        message="signal payload contains a NUL character (\\x00) at position 1",
    )
    assert not Signal.objects.exists()


def test_a_workflow_name_longer_than_its_column_is_refused():
    class LongName(Workflow):
        name = "w" * 201
        only = Task(NOOP)

    try:
        with pytest.raises(DefinitionError, match="is 201 characters long; the limit is 200"):
            workflows.start_run(LongName)
        with pytest.raises(DefinitionError, match="is 201 characters long; the limit is 200"):
            workflows.start_run(LongName.name)
    finally:
        registry.unregister(LongName.name, LongName.version)
    assert not Run.objects.exists()


# 9. Callback and skip outputs


@pytest.fixture
def parked() -> tuple[Run, str]:
    run = workflows.start_run(Bank)
    run_pending()
    assert run.steps.get(name="transfer").status == "waiting"
    return run, TOKENS[0]


@pytest.mark.parametrize(
    ("output", "message"),
    [
        ({1}, "callback output is not JSON-serialisable: Object of type set"),
        ({"x": float("nan")}, "callback output is not storable JSON"),
        ({"t": "a\x00b"}, "callback output contains a NUL character (\\x00) at position 1"),
        ((1, 2), "callback output changes in a JSON round trip"),
    ],
)
def test_a_callback_output_the_database_cannot_store_is_refused(parked, output, message):
    run, token = parked
    events = Event.objects.count()
    with pytest.raises(InvalidInput, match=re.escape(message)):
        workflows.complete_callback(token, output)
    assert Event.objects.count() == events
    step = run.steps.get(name="transfer")
    assert (step.status, step.output) == ("waiting", None)
    workflows.complete_callback(token, {"reference": "TX-1"})  # the token still works
    assert run.steps.get(name="transfer").output == {"reference": "TX-1"}


@pytest.mark.parametrize(
    ("error", "message"),
    [
        ("no\x00funds", "callback error contains a NUL character (\\x00) at position 2"),
        (42, "callback error must be a string, got int"),
        (None, "callback error must be a string, got NoneType"),
    ],
)
def test_a_callback_error_the_database_cannot_store_is_refused(parked, error, message):
    run, token = parked
    with pytest.raises(InvalidInput, match=re.escape(message)):
        workflows.fail_callback(token, error)
    assert run.steps.get(name="transfer").status == "waiting"
    workflows.fail_callback(token, "no funds")
    assert run.steps.get(name="transfer").status == "retry_scheduled"


@pytest.mark.parametrize(
    ("output", "message"),
    [
        ({1}, "output of the skipped step is not JSON-serialisable"),
        ({"x": float("nan")}, "output of the skipped step is not storable JSON"),
        (["\x00"], "output of the skipped step contains a NUL character (\\x00) at position 0"),
    ],
)
def test_a_skip_output_the_database_cannot_store_is_refused(output, message):
    run = workflows.start_run(Payment)
    step = run.steps.get(name="paid")
    with pytest.raises(InvalidInput, match=re.escape(message)):
        workflows.skip_step(step, output=output)
    step.refresh_from_db()
    assert (step.status, step.output) == ("pending", None)
    assert not run.events.filter(type="step.skipped").exists()


def test_the_skip_command_refuses_an_output_with_a_nul_character_in_one_line():
    run = workflows.start_run(Payment)
    step = run.steps.get(name="paid")
    refused(
        "workflows_skip",
        str(step.pk),
        "--output",
        '"a\\u0000"',
        message="output of the skipped step contains a NUL character (\\x00) at position 1",
    )
    assert Step.objects.get(pk=step.pk).status == "pending"


# 10. Gate selections and decision texts


@pytest.fixture
def packer() -> User:
    return User.objects.create_user("packer")


@pytest.fixture
def waiting_gate() -> Step:
    run = workflows.start_run(Packing)
    gate = run.steps.get(name="pack")
    assert gate.status == "waiting"
    return gate


@pytest.mark.parametrize(
    ("selections", "message"),
    [
        ("ab", "must be a list of option values, got str 'ab'"),
        ({"a"}, "must be a list of option values, got set"),
        ({"a": True}, "must be a list of option values, got dict"),
        (["a", 1], "must be option values (strings), got int 1"),
        ([["a"]], "must be option values (strings), got list"),
    ],
)
def test_selections_that_are_not_a_list_of_strings_are_refused(
    packer, waiting_gate, selections, message
):
    with pytest.raises(InvalidDecision, match=re.escape(message)):
        workflows.approve_gate(waiting_gate, user=packer, selections=selections)
    waiting_gate.refresh_from_db()
    assert (waiting_gate.status, waiting_gate.selections) == ("waiting", [])


def test_selections_as_a_tuple_are_accepted(packer, waiting_gate):
    gate = workflows.approve_gate(waiting_gate, user=packer, selections=("b", "a"))
    assert (gate.decision, gate.selections) == ("approved", ["b", "a"])


def test_decision_feedback_and_cancel_reasons_with_nul_characters_are_refused(packer, waiting_gate):
    with pytest.raises(InvalidInput, match=re.escape("feedback contains a NUL character")):
        workflows.approve_gate(waiting_gate, user=packer, selections=["a"], feedback="ok\x00")
    with pytest.raises(InvalidInput, match=re.escape("feedback contains a NUL character")):
        workflows.reject_gate(waiting_gate, user=packer, feedback="\x00")
    with pytest.raises(InvalidInput, match=re.escape("cancel reason contains a NUL character")):
        workflows.cancel_run(waiting_gate.run_id, reason="gone\x00")
    waiting_gate.refresh_from_db()
    assert (waiting_gate.status, waiting_gate.feedback) == ("waiting", "")
    assert Run.objects.get(pk=waiting_gate.run_id).status == "waiting"


def test_the_approve_command_still_takes_its_selections_as_a_list(packer, waiting_gate):
    output = run_command(
        "workflows_approve", str(waiting_gate.pk), "--user", "packer", "--select", "a", "b"
    )
    assert output.endswith("approved by packer; selected a, b\n")
