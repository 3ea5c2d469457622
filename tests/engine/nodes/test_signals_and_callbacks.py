"""Signals (kept until consumed, idempotent by key) and signed, expiring callbacks."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core import signing
from django.utils import timezone

import workflows
from tests.support.handlers import ASK_BANK, NOOP, TOKENS
from tests.support.runs import run_inline
from workflows import (
    CallbackAlreadyUsed,
    CallbackExpired,
    IdempotencyConflict,
    InvalidCallbackToken,
    Retry,
    Task,
    WaitForSignal,
    Workflow,
)
from workflows.engine.nodes.callback import SALT
from workflows.models import Signal, Step
from workflows.testing import run_pending

pytestmark = pytest.mark.django_db

HERE = "tests.engine.nodes.test_signals_and_callbacks"


def echo_payment(ctx):
    return {"paid": ctx.steps["payment"].output}


class Payment(Workflow):
    name = "signal_payment"
    invoice = Task(NOOP)
    payment = WaitForSignal("paid", timeout=timedelta(days=1))
    receipt = Task(f"{HERE}.echo_payment")


class Bank(Workflow):
    name = "callback_bank"
    transfer = Task(ASK_BANK, retry=Retry(max_attempts=2, retry_on={"transient", "timeout"}))
    done = Task(NOOP)


class BankOnce(Workflow):
    name = "callback_bank_once"
    transfer = Task(ASK_BANK, retry=Retry(max_attempts=2))


def test_signal_completes_the_waiting_step_with_its_payload():
    run = run_inline(Payment)
    assert run.status == "waiting"
    signal = workflows.send_signal(run, "paid", {"amount": 12})
    assert signal.consumed_by.name == "payment"
    run_pending()
    run.refresh_from_db()
    assert run.status == "completed"
    assert run.output == {"receipt": {"paid": {"amount": 12}}}


def test_who_sent_a_signal_is_in_the_history():
    from django.contrib.auth.models import User

    run = workflows.start_run(Payment)
    workflows.send_signal(run, "paid", {"amount": 1}, user=User.objects.create_user("cashier"))
    workflows.send_signal(run, "paid", {"amount": 2})  # a system, not a person
    received = run.events.filter(type="signal.received").order_by("id")
    assert [event.payload["by"] for event in received] == ["cashier", None]


def test_a_signal_sent_early_is_kept_until_the_step_starts():
    run = workflows.start_run(Payment)  # invoice not yet run: payment is pending
    workflows.send_signal(run, "paid", {"amount": 3})
    assert Signal.objects.get(run=run).consumed_by is None
    run_pending()
    run.refresh_from_db()
    assert run.status == "completed"
    assert Signal.objects.get(run=run).consumed_by.name == "payment"


def test_replayed_signal_has_one_effect_and_a_different_payload_conflicts():
    run = workflows.start_run(Payment)
    run_pending()
    first = workflows.send_signal(run, "paid", {"amount": 5}, idempotency_key="bank-1")
    again = workflows.send_signal(run, "paid", {"amount": 5}, idempotency_key="bank-1")
    assert again.pk == first.pk
    with pytest.raises(IdempotencyConflict, match="different name or payload"):
        workflows.send_signal(run, "paid", {"amount": 6}, idempotency_key="bank-1")
    assert Signal.objects.filter(run=run).count() == 1
    assert Signal.objects.get(run=run).payload == {"amount": 5}
    assert run.events.filter(type="signal.received").count() == 1


def test_signal_timeout_fails_the_run():
    run = run_inline(Payment, until=timezone.now() + timedelta(days=2))
    assert run.steps.get(name="payment").status == "timed_out"
    assert run.status == "failed"
    assert run.error["cause"] == "signal_timeout"


def test_signals_to_finished_runs_are_refused():
    run = workflows.start_run(Payment)
    workflows.send_signal(run, "paid", 1)
    run_pending()
    with pytest.raises(workflows.InvalidTransition, match="is completed"):
        workflows.send_signal(run, "paid", 2)


def test_callback_parks_the_step_and_completes_it():
    run = workflows.start_run(Bank)
    run_pending()
    transfer = run.steps.get(name="transfer")
    assert transfer.status == "waiting"
    assert transfer.lease_expires_at is None
    workflows.complete_callback(TOKENS[0], {"reference": "TX-1"})
    run_pending()
    run.refresh_from_db()
    assert run.steps.get(name="transfer").output == {"reference": "TX-1"}
    assert run.status == "completed"


def test_reused_tampered_and_expired_tokens_are_refused():
    run = workflows.start_run(Bank)
    run_pending()
    token = TOKENS[0]
    with pytest.raises(InvalidCallbackToken):
        workflows.complete_callback(token[:-2] + "xx", 1)
    workflows.complete_callback(token, 1)
    with pytest.raises(CallbackAlreadyUsed, match="already resolved"):
        workflows.complete_callback(token, 2)
    assert run.steps.get(name="transfer").output == 1
    claims = signing.loads(token, salt=SALT)
    expired = signing.dumps({**claims, "t": -1}, salt=SALT)
    with pytest.raises(CallbackExpired):
        workflows.complete_callback(expired, 3)


def test_failed_callback_is_retried_then_fails_the_run():
    run = workflows.start_run(Bank)
    run_pending()
    workflows.fail_callback(TOKENS[0], "insufficient funds")
    assert run.steps.get(name="transfer").status == "retry_scheduled"
    run_pending(until=timezone.now() + timedelta(minutes=1))
    assert len(TOKENS) == 2
    workflows.fail_callback(TOKENS[1], "insufficient funds")
    run.refresh_from_db()
    assert run.status == "failed"
    assert run.error["cause"] == "callback_failed"
    with pytest.raises(CallbackAlreadyUsed):
        workflows.complete_callback(TOKENS[0], "late")


def test_callback_timeout_counts_as_a_failed_attempt():
    run = workflows.start_run(Bank)
    run_pending(until=timezone.now() + timedelta(minutes=11))
    assert len(TOKENS) == 2  # the timeout retried the task, which asked again
    run_pending(until=timezone.now() + timedelta(minutes=30))
    run.refresh_from_db()
    assert run.status == "failed"
    assert run.error["cause"] == "callback_timeout"


def test_a_callback_timeout_is_not_retried_unless_retry_on_names_timeout():
    run = workflows.start_run(BankOnce)
    run_pending(until=timezone.now() + timedelta(minutes=11))
    assert len(TOKENS) == 1
    run.refresh_from_db()
    assert run.status == "failed" and run.error["cause"] == "callback_timeout"
    step = Step.objects.get(run=run, name="transfer")
    assert (step.attempt, step.failure_class) == (1, "timeout")


def test_a_signal_payload_that_is_not_json_is_refused():
    run = workflows.start_run(Payment)
    with pytest.raises(workflows.InvalidInput, match="not JSON-serialisable"):
        workflows.send_signal(run, "paid", {"when": timezone.now()})
    assert not Signal.objects.filter(run=run).exists()


class Refundable(Workflow):
    name = "signal_refundable"
    payment = WaitForSignal("paid")
    refund = WaitForSignal("refunded")


def test_a_reused_key_with_another_signal_name_conflicts():
    run = workflows.start_run(Refundable)
    workflows.send_signal(run, "paid", 1, idempotency_key="k")
    with pytest.raises(IdempotencyConflict):
        workflows.send_signal(run, "refunded", 1, idempotency_key="k")
