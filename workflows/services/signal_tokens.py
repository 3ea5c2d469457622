"""Signal tokens: a signed credential that lets an outside system send one signal to one
run, and nothing else, until it expires.

``signal_token(run, "payment_received")`` hands out a string; whoever holds it may call
``send_signal_with_token(token, payload)`` (or ``POST /api/signals/by-token/``, no
account needed) to deliver that signal to that run through the same path as
``send_signal``. It replaces giving a partner a user with ``operate_run`` on every run.

Why signed and not stored: the token is ``django.core.signing`` of (run, signal,
expiry) with a salt of its own, as callback tokens and approval links are. Nothing is
written when one is made, so making thousands costs nothing and there is no table to
purge; verifying one reads no row before the run itself. What a stored token would
add, revoking one token alone, is covered by its short life, by the run ending (an
ended run refuses every signal) and by rotating ``SECRET_KEY``.

Rotation: ``signing`` verifies with ``SECRET_KEY`` and then each of
``SECRET_KEY_FALLBACKS``, so tokens handed out before a rotation keep working while the
old key stays in the fallbacks, and stop when it is dropped.

Refusals write nothing and each has its code (:mod:`workflows.errors`):
``signal_token_invalid`` (not made by this site), ``signal_token_expired``,
``signal_token_foreign`` (made for another purpose, or naming a run this site does not
have) and ``signal_token_wrong_signal`` (the caller named another signal).
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

from django.core import signing

from workflows.approvals.links import LINK_SALT
from workflows.conf import workflow_settings
from workflows.engine.created import Created
from workflows.engine.nodes.callback import SALT as CALLBACK_SALT
from workflows.engine.nodes.wait_for_signal import send_signal_once as deliver_signal_once
from workflows.errors import (
    InvalidInput,
    RunNotFound,
    SignalTokenExpired,
    SignalTokenForeign,
    SignalTokenInvalid,
    SignalTokenWrongSignal,
)
from workflows.models import Run, Signal
from workflows.queries import get_run
from workflows.services.signals import check_signal
from workflows.text import duration

__all__ = [
    "DEFAULT_EXPIRES_IN",
    "MAX_TOKEN_LENGTH",
    "SALT",
    "SignalGrant",
    "read_signal_token",
    "send_signal_with_token",
    "signal_token",
    "token_idempotency_key",
]

# Keeps signal tokens apart from every other value the site signs (callback tokens,
# approval links, sessions, cursors): a value signed for another purpose never verifies.
SALT = "workflows.signal_token"
# How long a token lives when ``expires_in`` is not given: a week, long enough for a
# partner's batch job, short enough that a leaked token soon stops working.
DEFAULT_EXPIRES_IN = timedelta(days=7)
# A real token is a few hundred characters (a 200-character signal name fits well
# within this); anything longer is refused before any signature is computed.
MAX_TOKEN_LENGTH = 4096
# What a caller is told of a token that this site did not sign as it is: no more than
# that, since the caller may be anyone (the class docstring, for readers of the code,
# says why a token fails to verify).
INVALID_TOKEN = (
    "the signal token is not valid: it was cut short or changed on its way, or it was "
    "not made by this site"
)
# Values signed by the site for other purposes: a token that verifies under one of these
# was pasted into the wrong place (``signal_token_foreign``), not forged.
_OTHER_SALTS = (CALLBACK_SALT, LINK_SALT)


@dataclass(frozen=True)
class SignalGrant:
    """What a verified token allows: sending ``signal`` to ``run`` until ``expires_at``."""

    run: UUID
    signal: str
    expires_at: datetime


def signal_token(
    run: Run | UUID | str, signal: str, *, expires_in: timedelta = DEFAULT_EXPIRES_IN
) -> str:
    """A token that allows exactly one thing: sending ``signal`` to ``run``, until
    ``expires_in`` from now (default 7 days).

    Refused, with nothing made: a run that does not exist (:class:`RunNotFound`); a
    signal no ``WaitForSignal`` step of the run's workflow waits for
    (:class:`UnknownSignal`, as ``send_signal`` would refuse it); an empty or overlong
    name, or an ``expires_in`` that is not a positive ``timedelta`` or is longer than
    ``WORKFLOWS["SIGNAL_TOKEN_MAX_AGE"]`` (:class:`InvalidInput`). A token may be made
    for a run that has ended; using it is then refused as a signal to that run is.
    """
    target = run if isinstance(run, Run) else get_run(run)
    max_age = workflow_settings.SIGNAL_TOKEN_MAX_AGE
    if not isinstance(expires_in, timedelta) or expires_in <= timedelta(0):
        raise InvalidInput(
            "expires_in must be a positive timedelta, got "
            + (duration(expires_in) if isinstance(expires_in, timedelta) else repr(expires_in)),
            field="expires_in",
        )
    if expires_in > max_age:
        raise InvalidInput(
            f"expires_in {duration(expires_in)} is longer than "
            f"WORKFLOWS['SIGNAL_TOKEN_MAX_AGE'] ({duration(max_age)})",
            field="expires_in",
            max_age=max_age.total_seconds(),
        )
    if signal == "":
        raise InvalidInput("a signal token needs a signal name, not an empty one", field="signal")
    check_signal(target, signal, None, None)
    expires_at = int(time.time() + expires_in.total_seconds())
    claims = {"r": str(target.pk), "s": signal, "e": expires_at}
    return signing.dumps(claims, salt=SALT, compress=True)


def read_signal_token(token: Any) -> SignalGrant:
    """Verify ``token`` and return what it allows; reads nothing from the database.

    The signature is checked first, so a tampered old token is invalid, never expired;
    then what it was signed for (foreign), then its expiry and the age limit.
    """
    if not (isinstance(token, str) and 0 < len(token) <= MAX_TOKEN_LENGTH and token.isascii()):
        # Checked first: a lone surrogate cannot even be hashed, and a megabyte of text
        # is not worth one.
        raise SignalTokenInvalid(
            f"a signal token is text of 1 to {MAX_TOKEN_LENGTH} ASCII characters; this is not one"
        )
    max_age = workflow_settings.SIGNAL_TOKEN_MAX_AGE
    try:
        claims = signing.loads(token, salt=SALT, max_age=max_age)
    except signing.SignatureExpired:
        raise SignalTokenExpired(
            f"the signal token is more than {duration(max_age)} old, longer than this site "
            "accepts; ask for a new one"
        ) from None
    except signing.BadSignature:
        if _signed_for_another_purpose(token):
            raise SignalTokenForeign(
                "this token was made for another purpose (a callback or an approval link), "
                "not for sending a signal",
                reason="other_purpose",
            ) from None
        raise SignalTokenInvalid(INVALID_TOKEN) from None
    grant = _grant(claims)
    if time.time() >= grant.expires_at.timestamp():
        raise SignalTokenExpired(
            f"the signal token expired at {grant.expires_at.isoformat()}; ask for a new one",
            expired_at=grant.expires_at.isoformat(),
        )
    return grant


def send_signal_with_token(
    token: Any,
    payload: Any = None,
    idempotency_key: str | None = None,
    *,
    signal: str | None = None,
) -> Signal:
    """Deliver the signal ``token`` allows; the signal (see
    :func:`send_signal_with_token_once`)."""
    return send_signal_with_token_once(token, payload, idempotency_key, signal=signal).value


def send_signal_with_token_once(
    token: Any,
    payload: Any = None,
    idempotency_key: str | None = None,
    *,
    signal: str | None = None,
) -> Created[Signal]:
    """Deliver the signal ``token`` allows, with ``payload``, to the run it names.

    Checked and delivered as ``send_signal`` does it (:func:`check_signal`, then the
    engine's one transition): the same payload checks, the same refusal of a run that
    has ended (:class:`InvalidTransition`), the same idempotency; the run's history
    records the signal ``via: "token"``. Without ``idempotency_key`` the token is its
    own key (:func:`token_idempotency_key`), so a token delivers one signal however
    often it is sent: a repeat with the same payload returns that signal, one with
    another payload raises :class:`IdempotencyConflict`. Distinct keys deliver distinct
    signals with one token, until it expires.

    ``signal``, when given, must be the signal the token allows, else
    :class:`SignalTokenWrongSignal`: a caller holding tokens for several signals learns
    that it sent the wrong one instead of signalling what it did not mean to.

    Returns :class:`~workflows.engine.created.Created`: the signal, and whether this call
    created it (decided by the insert that won: of racing sends with one key exactly one
    says ``created``).

    Refusals write nothing: :class:`SignalTokenInvalid`, :class:`SignalTokenExpired`,
    :class:`SignalTokenForeign` (also for a run this site does not have: never had, or
    deleted since), :class:`SignalTokenWrongSignal`.
    """
    grant = read_signal_token(token)
    if signal is not None and signal != grant.signal:
        raise SignalTokenWrongSignal(
            f"this token allows signal {grant.signal!r}, not {signal!r}",
            allowed=grant.signal,
            sent=signal,
        )
    try:
        run = get_run(grant.run)
    except RunNotFound:
        raise SignalTokenForeign(
            f"this token names run {grant.run}, which this site does not have (never had, "
            "or deleted since)",
            reason="run_not_found",
            run=str(grant.run),
        ) from None
    key = idempotency_key if idempotency_key is not None else token_idempotency_key(token)
    check_signal(run, grant.signal, payload, key)
    return deliver_signal_once(run.pk, grant.signal, payload, idempotency_key=key, via="token")


def token_idempotency_key(token: str) -> str:
    """The idempotency key of a signal sent with ``token`` and no key of its own.

    A digest, not the token: the key is stored with the signal and shown in the API and
    the admin, where the token itself, still a credential, must not appear.
    """
    return "token:" + hashlib.sha256(token.encode()).hexdigest()


def _grant(claims: Any) -> SignalGrant:
    """The claims of a genuine signature, checked for their shape."""
    try:
        run, signal, expires = claims["r"], claims["s"], claims["e"]
        if not (isinstance(signal, str) and isinstance(expires, int)):
            raise TypeError("claims of the wrong types")
        return SignalGrant(
            run=UUID(run),
            signal=signal,
            expires_at=datetime.fromtimestamp(expires, tz=UTC),
        )
    except (KeyError, TypeError, ValueError, AttributeError, OverflowError, OSError):
        # A genuine signature over another shape: only a bug of ours could make one.
        raise SignalTokenInvalid("the signal token's contents are not a signal token") from None


def _signed_for_another_purpose(token: str) -> bool:
    """Whether ``token`` is a genuine value of this site signed with another salt."""
    for salt in _OTHER_SALTS:
        try:
            signing.loads(token, salt=salt)
        except (signing.BadSignature, ValueError):
            continue
        return True
    return False
