"""Signal tokens: one signal to one run until expiry; every tampered, expired, foreign or
wrong-signal token refused with its own code and nothing written; key rotation."""

from __future__ import annotations

import inspect
import time
import uuid
import zlib
from datetime import timedelta
from typing import Any

import pytest
from django.core import signing
from django.test import override_settings

import workflows
from tests.support.handlers import NOOP
from tests.support.runs import run_inline
from workflows import (
    Gate,
    IdempotencyConflict,
    InvalidInput,
    InvalidTransition,
    RunNotFound,
    SignalTokenExpired,
    SignalTokenForeign,
    SignalTokenInvalid,
    SignalTokenRefused,
    SignalTokenWrongSignal,
    Task,
    UnknownSignal,
    WaitForSignal,
    Workflow,
)
from workflows.approvals.links import LINK_SALT
from workflows.engine.nodes.callback import SALT as CALLBACK_SALT, make_token
from workflows.models import Event, Run, Signal, Step
from workflows.services.signal_tokens import SALT, token_idempotency_key
from workflows.testing import run_pending

pytestmark = pytest.mark.django_db

OLD_KEY = "flowsite-test-old-key-" + "x" * 40
NEW_KEY = "flowsite-test-new-key-" + "y" * 40
OTHER_KEY = "flowsite-test-other-key-" + "z" * 40


class Payment(Workflow):
    name = "signal_token_payment"
    invoice = Task(NOOP)
    payment = WaitForSignal("paid", timeout=timedelta(days=1))
    refund = WaitForSignal("refunded", after=["invoice"])
    receipt = Task(NOOP, after=["payment"])


class Later(Workflow):
    name = "signal_token_later"
    first = Task(NOOP)
    wait = WaitForSignal("go")


class Approval(Workflow):
    name = "signal_token_approval"
    approve = Gate(prompt="Pay?")


@pytest.fixture
def run() -> Run:
    """A run waiting at ``payment`` (and ``refund``)."""
    started = run_inline(Payment, business_key="INV-1")
    assert started.status == "waiting"
    return started


@pytest.fixture
def token(run: Run) -> str:
    return workflows.signal_token(run, "paid")


def written(run: Run) -> tuple[Any, ...]:
    """Everything a delivery would change: signals, history, the run and its steps."""
    fresh = Run.objects.get(pk=run.pk)
    return (
        Signal.objects.count(),
        Event.objects.count(),
        fresh.version,
        fresh.status,
        list(Step.objects.filter(run=run).values_list("name", "status", "version")),
    )


def parts(token: str) -> tuple[str, str, str]:
    payload, stamp, signature = token.split(":")
    return payload, stamp, signature


def flip(text: str, index: int) -> str:
    """``text`` with one character changed (another of the base64url alphabet)."""
    char = text[index]
    return text[:index] + ("A" if char != "A" else "B") + text[index + 1 :]


def claims_of(token: str) -> dict[str, Any]:
    return signing.loads(token, salt=SALT)


def with_claims(token: str, **changes: Any) -> str:
    """``token``'s payload rewritten with ``changes``, its old signature kept."""
    _, stamp, signature = parts(token)
    raw = signing.b64_encode(
        zlib.compress(signing.JSONSerializer().dumps({**claims_of(token), **changes}))
    ).decode()
    return f".{raw}:{stamp}:{signature}"


def signed(claims: Any, *, salt: str = SALT, key: str | None = None) -> str:
    return signing.dumps(claims, salt=salt, key=key, compress=True)


def other_run_token() -> str:
    other = workflows.start_run(Payment, business_key="INV-2")
    run_pending()
    return workflows.signal_token(other, "paid")


# (label, how to make the bad token from a good one, the error expected). Each builder
# takes the good token and the run; every one must be refused and write nothing.
TAMPERED: list[tuple[str, Any, type[SignalTokenRefused]]] = [
    ("payload bit flip", lambda t, r: flip(t, 5), SignalTokenInvalid),
    ("payload last char flipped", lambda t, r: flip(t, len(parts(t)[0]) - 1), SignalTokenInvalid),
    (
        "timestamp flipped",
        lambda t, r: ":".join([parts(t)[0], flip(parts(t)[1], 0), parts(t)[2]]),
        SignalTokenInvalid,
    ),
    ("signature bit flip", lambda t, r: flip(t, len(t) - 3), SignalTokenInvalid),
    ("truncated by one", lambda t, r: t[:-1], SignalTokenInvalid),
    ("truncated by half", lambda t, r: t[: len(t) // 2], SignalTokenInvalid),
    ("signature dropped", lambda t, r: t.rsplit(":", 1)[0], SignalTokenInvalid),
    ("payload only", lambda t, r: parts(t)[0], SignalTokenInvalid),
    ("a space appended", lambda t, r: t + " ", SignalTokenInvalid),
    (
        "payload of another run's token, this signature",
        lambda t, r: ":".join([parts(other_run_token())[0], *parts(t)[1:]]),
        SignalTokenInvalid,
    ),
    (
        "signature of another run's token",
        lambda t, r: ":".join([*parts(t)[:2], parts(other_run_token())[2]]),
        SignalTokenInvalid,
    ),
    (
        "claims rewritten to another signal",
        lambda t, r: with_claims(t, s="refunded"),
        SignalTokenInvalid,
    ),
    (
        "claims rewritten to a later expiry",
        lambda t, r: with_claims(t, e=claims_of(t)["e"] + 10**6),
        SignalTokenInvalid,
    ),
    (
        "signed with a key the site never had",
        lambda t, r: signed(claims_of(t), key=OTHER_KEY),
        SignalTokenInvalid,
    ),
    (
        "signed without a salt",
        lambda t, r: signing.dumps(claims_of(t), compress=True),
        SignalTokenInvalid,
    ),
    (
        "genuine signature, claims of another shape",
        lambda t, r: signed({"x": 1}),
        SignalTokenInvalid,
    ),
    (
        "genuine signature, expiry not a number",
        lambda t, r: signed({**claims_of(t), "e": "tomorrow"}),
        SignalTokenInvalid,
    ),
    (
        "genuine signature, run not an id",
        lambda t, r: signed({**claims_of(t), "r": "order-7"}),
        SignalTokenInvalid,
    ),
    ("empty", lambda t, r: "", SignalTokenInvalid),
    ("None", lambda t, r: None, SignalTokenInvalid),
    ("a number", lambda t, r: 12345, SignalTokenInvalid),
    ("bytes", lambda t, r: t.encode(), SignalTokenInvalid),
    ("a dict", lambda t, r: {"token": t}, SignalTokenInvalid),
    ("a megabyte", lambda t, r: t + "x" * (1024 * 1024), SignalTokenInvalid),
    ("a lone surrogate", lambda t, r: t[:10] + "\ud800" + t[10:], SignalTokenInvalid),
    ("NUL inside", lambda t, r: t[:10] + "\x00" + t[10:], SignalTokenInvalid),
    (
        "a callback token",
        lambda t, r: make_token(r.pk, r.steps.get(name="payment").pk, 1, timedelta(hours=1)),
        SignalTokenForeign,
    ),
    (
        "an approval link's token",
        lambda t, r: signing.dumps({"s": 1, "v": 1, "u": "1"}, salt=LINK_SALT),
        SignalTokenForeign,
    ),
    (
        "a genuine token for a run this site never had",
        lambda t, r: signed({**claims_of(t), "r": str(uuid.uuid4())}),
        SignalTokenForeign,
    ),
    (
        "a genuine token past its expiry",
        lambda t, r: signed({**claims_of(t), "e": int(time.time()) - 1}),
        SignalTokenExpired,
    ),
]


@pytest.mark.parametrize(
    ("make", "refusal"),
    [(make, refusal) for _, make, refusal in TAMPERED],
    ids=[label for label, _, _ in TAMPERED],
)
def test_a_tampered_or_foreign_token_is_refused_with_its_code_and_writes_nothing(
    run, token, make, refusal
):
    bad = make(token, run)
    before = written(run)
    with pytest.raises(refusal) as caught:
        workflows.send_signal_with_token(bad, {"amount": 12})
    assert caught.value.code == refusal.code
    assert type(caught.value) is refusal
    assert written(run) == before
    # The good token still works afterwards: nothing was used up.
    workflows.send_signal_with_token(token, {"amount": 12})
    assert Step.objects.get(run=run, name="payment").status == "completed"


def test_the_refusals_have_distinct_stable_codes():
    codes = [
        SignalTokenInvalid.code,
        SignalTokenExpired.code,
        SignalTokenForeign.code,
        SignalTokenWrongSignal.code,
    ]
    assert codes == [
        "signal_token_invalid",
        "signal_token_expired",
        "signal_token_foreign",
        "signal_token_wrong_signal",
    ]
    assert all(issubclass(error, SignalTokenRefused) for error in TAMPERED_CLASSES)


TAMPERED_CLASSES = {refusal for _, _, refusal in TAMPERED} | {SignalTokenWrongSignal}


def test_a_token_expires_at_its_time(run, monkeypatch):
    token = workflows.signal_token(run, "paid", expires_in=timedelta(hours=1))
    before = written(run)
    real = time.time
    monkeypatch.setattr(time, "time", lambda: real() + 3601)
    with pytest.raises(SignalTokenExpired) as caught:
        workflows.send_signal_with_token(token, {"amount": 1})
    monkeypatch.setattr(time, "time", real)
    assert "expired at" in caught.value.message
    assert written(run) == before
    workflows.send_signal_with_token(token, {"amount": 1})  # back in time: still good


def test_a_token_older_than_the_max_age_is_expired_even_before_its_own_expiry(run, settings):
    token = workflows.signal_token(run, "paid", expires_in=timedelta(days=30))
    settings.WORKFLOWS = {**settings.WORKFLOWS, "SIGNAL_TOKEN_MAX_AGE": timedelta(days=10)}
    real = time.time
    with pytest.MonkeyPatch.context() as patched:
        patched.setattr(time, "time", lambda: real() + 11 * 86400)
        with pytest.raises(SignalTokenExpired, match="more than 10\xa0days old"):
            workflows.send_signal_with_token(token, {})


def test_a_tampered_expired_token_is_invalid_not_expired(run, monkeypatch):
    token = workflows.signal_token(run, "paid", expires_in=timedelta(hours=1))
    real = time.time
    monkeypatch.setattr(time, "time", lambda: real() + 7200)
    with pytest.raises(SignalTokenInvalid):
        workflows.send_signal_with_token(flip(token, 5), {})


def test_naming_another_signal_than_the_token_allows_is_refused(run, token):
    before = written(run)
    with pytest.raises(SignalTokenWrongSignal) as caught:
        workflows.send_signal_with_token(token, {}, signal="refunded")
    assert caught.value.details == {"allowed": "paid", "sent": "refunded"}
    assert written(run) == before
    signal = workflows.send_signal_with_token(token, {"amount": 3}, signal="paid")
    assert signal.name == "paid"


def test_a_token_whose_run_was_deleted_is_foreign(run, token):
    Run.objects.filter(pk=run.pk).delete()
    before = (Signal.objects.count(), Event.objects.count())
    with pytest.raises(SignalTokenForeign) as caught:
        workflows.send_signal_with_token(token, {})
    assert caught.value.details == {"reason": "run_not_found", "run": str(run.pk)}
    assert (Signal.objects.count(), Event.objects.count()) == before


def test_a_run_that_has_ended_refuses_the_token_as_it_refuses_any_signal(run, token):
    workflows.cancel_run(run, reason="customer left")
    run_pending()
    before = written(run)
    with pytest.raises(InvalidTransition):
        workflows.send_signal_with_token(token, {})
    assert written(run) == before


def test_a_payload_the_database_cannot_store_is_refused(run, token):
    before = written(run)
    with pytest.raises(InvalidInput):
        workflows.send_signal_with_token(token, {"bad": "\x00"})
    with pytest.raises(InvalidInput):
        workflows.send_signal_with_token(token, {}, idempotency_key="k" * 256)
    assert written(run) == before


def test_a_good_token_delivers_once_through_the_engine(run, token):
    signal = workflows.send_signal_with_token(token, {"amount": 12})
    assert (signal.run_id, signal.name, signal.payload) == (run.pk, "paid", {"amount": 12})
    assert signal.idempotency_key == token_idempotency_key(token)
    assert token not in signal.idempotency_key
    step = Step.objects.get(run=run, name="payment")
    assert (step.status, step.output) == ("completed", {"amount": 12})
    received = Event.objects.get(run=run, type="signal.received")
    assert received.payload["via"] == "token"
    assert received.payload["by"] is None
    before = written(run)
    # Sent again (a retry after a lost answer): the first signal, nothing more.
    assert workflows.send_signal_with_token(token, {"amount": 12}).pk == signal.pk
    assert written(run) == before
    with pytest.raises(IdempotencyConflict):
        workflows.send_signal_with_token(token, {"amount": 99})
    assert written(run) == before
    run_pending()
    assert Run.objects.get(pk=run.pk).status == "waiting"  # refund still waits


def test_distinct_idempotency_keys_send_distinct_signals_with_one_token(run, token):
    first = workflows.send_signal_with_token(token, {"n": 1}, "payment-1")
    again = workflows.send_signal_with_token(token, {"n": 1}, "payment-1")
    second = workflows.send_signal_with_token(token, {"n": 2}, idempotency_key="payment-2")
    assert first.pk == again.pk != second.pk
    assert first.consumed_by_id is not None and second.consumed_by_id is None  # kept
    with pytest.raises(IdempotencyConflict):
        workflows.send_signal_with_token(token, {"n": 3}, "payment-1")
    assert Signal.objects.filter(run=run).count() == 2


def test_a_token_survives_key_rotation_until_the_old_key_is_dropped(run):
    with override_settings(SECRET_KEY=OLD_KEY, SECRET_KEY_FALLBACKS=[]):
        token = workflows.signal_token(run, "paid")
    before = written(run)
    for fallbacks in ([], [OTHER_KEY]):
        with (
            override_settings(SECRET_KEY=NEW_KEY, SECRET_KEY_FALLBACKS=fallbacks),
            pytest.raises(SignalTokenInvalid),
        ):
            workflows.send_signal_with_token(token, {})
    assert written(run) == before
    with override_settings(SECRET_KEY=NEW_KEY, SECRET_KEY_FALLBACKS=[OTHER_KEY, OLD_KEY]):
        assert workflows.send_signal_with_token(token, {"k": "old"}).payload == {"k": "old"}
        fresh = workflows.signal_token(run, "refunded")
    with override_settings(SECRET_KEY=NEW_KEY, SECRET_KEY_FALLBACKS=[]):
        assert workflows.send_signal_with_token(fresh, {}).name == "refunded"


def test_a_callback_token_or_approval_link_made_under_an_old_key_is_still_foreign(run):
    with override_settings(SECRET_KEY=OLD_KEY, SECRET_KEY_FALLBACKS=[]):
        callback = make_token(run.pk, 1, 1, timedelta(hours=1))
        link = signing.dumps({"s": 1, "v": 1, "u": "1"}, salt=LINK_SALT)
    with override_settings(SECRET_KEY=NEW_KEY, SECRET_KEY_FALLBACKS=[OLD_KEY]):
        for token in (callback, link):
            with pytest.raises(SignalTokenForeign):
                workflows.send_signal_with_token(token, {})
    assert CALLBACK_SALT != SALT != LINK_SALT


def test_making_a_token_checks_the_run_the_signal_and_the_expiry(run, settings):
    with pytest.raises(RunNotFound):
        workflows.signal_token(uuid.uuid4(), "paid")
    with pytest.raises(UnknownSignal, match="never waits for signal 'shipped'"):
        workflows.signal_token(run, "shipped")
    for name in ("", "x" * 201, "a\x00b", 7):
        with pytest.raises(InvalidInput):
            workflows.signal_token(run, name)
    for expires_in in (timedelta(0), timedelta(seconds=-1), 3600, None):
        with pytest.raises(InvalidInput, match="expires_in"):
            workflows.signal_token(run, "paid", expires_in=expires_in)
    with pytest.raises(InvalidInput, match="SIGNAL_TOKEN_MAX_AGE"):
        workflows.signal_token(run, "paid", expires_in=timedelta(days=91))
    gated = workflows.start_run(Approval)
    with pytest.raises(UnknownSignal, match="waits for no signal"):
        workflows.signal_token(gated, "paid")


def test_a_token_names_run_signal_and_an_absolute_expiry(run):
    made_at = time.time()
    token = workflows.signal_token(str(run.pk), "paid", expires_in=timedelta(hours=2))
    claims = claims_of(token)
    assert claims["r"] == str(run.pk) and claims["s"] == "paid"
    assert made_at + 7200 - 2 <= claims["e"] <= time.time() + 7200
    default = claims_of(workflows.signal_token(run, "paid"))
    assert default["e"] - made_at == pytest.approx(7 * 86400, abs=5)
    assert len(token) < 400


def test_a_signal_sent_with_a_token_before_its_step_waits_is_kept_until_then():
    later = workflows.start_run(Later)
    early = workflows.signal_token(later, "go")
    signal = workflows.send_signal_with_token(early, {"early": True})
    assert signal.consumed_by_id is None
    run_pending()
    assert Run.objects.get(pk=later.pk).status == "completed"


def test_the_contract_as_written():
    """``signal_token(run, signal, expires_in=...)``, ``send_signal_with_token(token,
    payload, idempotency_key=None)`` and ``pending_waits(...)``, from ``workflows``."""
    made = inspect.signature(workflows.signal_token).parameters
    assert list(made) == ["run", "signal", "expires_in"]
    assert made["expires_in"].default == timedelta(days=7)
    sent = inspect.signature(workflows.send_signal_with_token).parameters
    assert list(sent)[:3] == ["token", "payload", "idempotency_key"]
    assert sent["idempotency_key"].default is None
    waits = inspect.signature(workflows.pending_waits).parameters
    assert {"kind", "workflow", "older_than", "limit", "cursor"} <= set(waits)
    for name in ("signal_token", "send_signal_with_token", "pending_waits"):
        assert name in workflows.__all__
