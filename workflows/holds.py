"""What a run can wait on, declared once: :class:`HoldKind` and the :data:`HOLDS` table.

Every surface that says what holds a run reads this table: ``explain(run)``'s
``waiting_on`` entries and ``pending_waits()``'s waits carry a :class:`HoldKind` as their
``kind``; the run page, the Waits page and ``workflows_show`` word an entry with
:func:`describe`; the API publishes the kinds as an enum; the Waits filter offers the
kinds that :attr:`Hold.listed` marks. A new kind of waiting is one row here plus the
engine code that produces it (``docs/architecture.md``, "What a run waits on").

A row's :attr:`Hold.sentence` is a small template over the entry's ``details`` (and
``step``):

- ``{name}`` is a detail; a time reads as "in 5 minutes", "40 seconds ago" or "just now"
  from ``now`` (:func:`workflows.text.relative`). ``{name:spec}`` shapes it: ``words``
  (``gate_timeout`` → ``gate timeout``), ``short`` (an id's short form,
  :func:`workflows.text.short_id`), ``items`` (``3 items``), ``capital`` (first letter
  upper case), ``holder`` / ``Holder`` (a lease's owner in words,
  :func:`workflows.text.lease_holder`: ``worker w-1``, ``external worker go-1``).
- ``{unit}`` / ``{Unit}`` name the work an entry is about: ``step “charge”``, ``item 7 of
  “charge”``, ``compensation of “charge”`` (from ``details["unit"]`` and ``details["item"]``).
- ``[...]`` is said only when every detail named inside it is set (not ``None``, empty or
  ``False``). ``{name:if}`` and ``{name:unless}`` say nothing themselves and make the
  brackets around them depend on ``name`` being set, or not.

A detail a sentence names that an entry lacks is a defect of the producer:
:func:`describe` raises ``KeyError`` (the completeness test renders every kind the engine
produces).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import models
from django.utils.translation import ngettext

from workflows.text import lease_holder, relative, short_id

__all__ = [
    "HOLDS",
    "LIMIT_KINDS",
    "Hold",
    "HoldKind",
    "await_details",
    "describe",
    "held_marker",
    "listed_kinds",
]


class HoldKind(models.TextChoices):
    """Everything a run, a step or a unit of work can wait on: the ``kind`` of an
    ``explain`` entry and of a wait. The labels say it in a few words (filters, the API
    schema)."""

    # The run as a whole
    PAUSED = "paused", "a run paused by an operator"
    QUEUED = "queued", "a run waiting for a place under max_concurrent_runs"
    BLOCKED = "blocked", "a flow member waiting for its upstream members"
    # A step that waits
    GATE = "gate", "a gate waiting for a decision"
    SIGNAL = "signal", "a step waiting for a signal"
    CALLBACK = "callback", "a task parked on a callback"
    AWAIT = "await", "a task whose handler awaits a signal"
    POLL = "poll", "a polling task waiting for its next poll"
    SLEEP = "sleep", "a sleep waiting for its time"
    CHILD = "child", "a step waiting for its child run"
    FANOUT = "fanout", "a fan-out waiting for its items"
    RETRY = "retry", "work waiting for its next attempt"
    TIMEOUT = "timeout", "the timer that ends a wait"
    COMPENSATION = "compensation", "a compensation being run"
    # Leased work, ready or running
    LEASE = "lease", "work a worker runs"
    DISPATCH = "dispatch", "ready work waiting for a worker to pick it up"
    WORKER = "worker", "ready work no live worker serves"
    EXTERNAL = "external", "ready work waiting for an external worker to claim it"
    CONCURRENCY = "concurrency", "ready work held by a concurrency limit"
    RATE = "rate", "ready work delayed by a rate limit"
    BUDGET = "budget", "ready work held by an exhausted budget"


@dataclass(frozen=True)
class Hold:
    """One kind of waiting: how it reads for a person, what ends it.

    ``releases`` are the verbs (``workflows.services.access.VERBS``) by which an operator
    ends or lifts it; ``released_by`` says what ends it without one. ``listed``: whether
    ``pending_waits`` lists it (a wait that lasts, as opposed to work in hand).
    ``defaults`` stand in for details an entry leaves unset. ``due`` says what happens
    when the wait's ``due_at`` comes (the Waits page's timeout column: "polls in 5 min").
    """

    kind: HoldKind
    sentence: str
    releases: tuple[str, ...]
    released_by: str
    listed: bool = False
    defaults: Mapping[str, Any] = field(default_factory=dict)
    due: str = "times out"


# The end of a sentence about a timer the sweeper should have fired already.
_OVERDUE = "[{overdue:if} — overdue: is a sweeper running?]"
_UNIT_WORDED = "{Unit}: {message}[; next start {due_at}]"

HOLDS: Mapping[HoldKind, Hold] = {
    hold.kind: hold
    for hold in (
        Hold(
            HoldKind.PAUSED,
            "Paused by {by} {at}[: {reason}]",
            ("resume", "cancel", "terminate"),
            "an operator resuming it",
            defaults={"by": "an operator"},
        ),
        Hold(
            HoldKind.QUEUED,
            "{message:capital}",
            ("priority", "cancel", "terminate"),
            "an earlier run of its workflow ending",
            listed=True,
        ),
        Hold(
            HoldKind.BLOCKED,
            "{message:capital}",
            ("set_join", "cancel", "terminate"),
            "its upstream members ending as its join asks",
            listed=True,
        ),
        Hold(
            HoldKind.GATE,
            "Gate “{step}” waits for a decision: {prompt}[ (claimed by {claimed_by})]"
            "[; times out {due_at}]",
            ("approve", "reject", "skip_step", "cancel"),
            "its timeout, when it has one",
            listed=True,
        ),
        Hold(
            HoldKind.SIGNAL,
            "Step “{step}” waits for signal “{name}”[; times out {due_at}]",
            ("signal", "skip_step", "cancel"),
            "its timeout, when it has one",
            listed=True,
        ),
        Hold(
            HoldKind.CALLBACK,
            "Task “{step}” waits for a callback[; expires {expires_at}]",
            ("skip_step", "cancel"),
            "the callback arriving (its token), or its expiry",
            listed=True,
            due="expires",
        ),
        Hold(
            HoldKind.AWAIT,
            "Task “{step}” awaits signal {names}[; times out {due_at}]"
            "[{due_at:unless} (no timeout)]",
            ("signal", "skip_step", "cancel"),
            "one of its signals arriving (sent, or by a signal token), or its timeout",
            listed=True,
            due="resumes",
        ),
        Hold(
            HoldKind.POLL,
            "Task “{step}” polls again {due_at}: round {iteration}[ of at most {max_iterations}]",
            ("skip_step", "cancel"),
            "its next poll's time",
            listed=True,
            due="polls",
        ),
        Hold(
            HoldKind.SLEEP,
            "Sleep “{step}” wakes {due_at}" + _OVERDUE,
            ("skip_step", "cancel"),
            "its time",
            listed=True,
            due="wakes",
        ),
        Hold(
            HoldKind.CHILD,
            "Child run {run:short} of {workflow} for “{step}”[ (item {item})] is {status}",
            ("cancel", "terminate"),
            "the child run ending",
            listed=True,
        ),
        Hold(
            HoldKind.FANOUT,
            "Fan-out “{step}”: {done} of {total:items} done, {failed} failed, "
            "{running} running, {pending} pending",
            ("cancel", "terminate"),
            "its items ending",
        ),
        Hold(
            HoldKind.RETRY,
            "“{step}”[ item {item}][ compensation #{compensation}] is tried again {due_at}"
            + _OVERDUE,
            ("skip_step", "cancel"),
            "its backoff running out",
            due="tried again",
        ),
        Hold(
            HoldKind.TIMEOUT,
            "The {fires:words} of “{step}”[ item {item}] fires {due_at}" + _OVERDUE,
            ("skip_step", "cancel"),
            "the wait it ends ending first",
            due="fires",
        ),
        Hold(
            HoldKind.COMPENSATION,
            "Compensation #{sequence} of “{step}” ({handler}) is {status}, attempt {attempt}",
            ("revoke", "terminate"),
            "the compensation ending",
        ),
        Hold(
            HoldKind.LEASE,
            # Once its run is cancelling, forward work says that it was asked to stop.
            "[{cancel_requested_at:unless}{worker:Holder} runs {unit} (attempt {attempt} of "
            "{max_attempts}), ]"
            "[Cancel requested {cancel_requested_at}; {unit} stops at its next heartbeat "
            "({worker:holder}, attempt {attempt} of {max_attempts}; ]"
            "[{cancel_requested_at:if}last heartbeat {heartbeat_at}, ]"
            "lease [{expired:if}expired {expires_at} — the worker died or hangs]"
            "[{expired:unless}until {expires_at}][{cancel_requested_at:if})]",
            ("revoke", "cancel", "terminate"),
            "the attempt ending, or its lease expiring",
            defaults={"worker": "?"},
        ),
        Hold(
            HoldKind.DISPATCH,
            "{Unit} is ready since {since}"
            "[{undispatched:if} — no worker picked it up: are workers running?]",
            ("priority", "skip_step", "cancel"),
            "a worker claiming it",
        ),
        Hold(
            HoldKind.WORKER,
            _UNIT_WORDED,
            ("skip_step", "cancel"),
            "a worker serving its queue and capabilities starting",
        ),
        Hold(
            HoldKind.EXTERNAL,
            "{Unit} waits for an external worker to claim it from queue {queue}"
            "[ with {capabilities}], ready since {since}",
            ("priority", "skip_step", "cancel"),
            "an external worker claiming it (claim_external, POST /api/work/claim/)",
        ),
        Hold(
            HoldKind.CONCURRENCY,
            _UNIT_WORDED,
            ("skip_step", "cancel"),
            "a place under the limit freeing up",
            listed=True,
        ),
        Hold(
            HoldKind.RATE,
            _UNIT_WORDED,
            ("skip_step", "cancel"),
            "the rate limit allowing its next start",
            listed=True,
            due="next start",
        ),
        Hold(
            HoldKind.BUDGET,
            _UNIT_WORDED,
            ("raise_budget", "reset_budget", "skip_step", "cancel"),
            "the budget's window rolling over",
            listed=True,
        ),
    )
}


# The kinds a limit holds ready work by; the claim marks such work ``held_on =
# "<kind>:<key>"`` (:func:`held_marker`), which ``explain`` and ``pending_waits`` read back.
LIMIT_KINDS = (HoldKind.CONCURRENCY, HoldKind.RATE, HoldKind.BUDGET)


def held_marker(kind: HoldKind, key: str) -> str:
    """What the claim writes into the ``held_on`` of ready work a limit holds."""
    return f"{kind}:{key}"


def await_details(awaiting: Mapping[str, Any], due_at: datetime | None) -> dict[str, Any]:
    """The details of an ``await`` hold, from its step's ``awaiting`` and its timer:
    ``signals`` (the names), ``names`` (them as said: “yes” or “no”), ``since`` and
    ``due_at`` (``None``: no timeout). ``explain`` and ``pending_waits`` both build them
    here, so the two read alike."""
    signals = list(awaiting["signals"])
    return {
        "signals": signals,
        "names": " or ".join(f"“{name}”" for name in signals),
        "since": datetime.fromisoformat(awaiting["since"]),
        "due_at": due_at,
    }


def listed_kinds() -> tuple[HoldKind, ...]:
    """The kinds ``pending_waits`` lists, in the table's order."""
    return tuple(kind for kind, hold in HOLDS.items() if hold.listed)


def describe(kind: str, step: str | None, details: Mapping[str, Any], now: datetime) -> str:
    """The entry as one sentence for a person, times counted from ``now``."""
    hold = HOLDS[HoldKind(kind)]
    values = {**hold.defaults, **{k: v for k, v in details.items() if _is_set(v)}}
    values["step"] = step
    said = []
    for piece in _PIECES.finditer(hold.sentence):
        optional, plain = piece.groups()
        if plain is not None:
            said.append(_fill(plain, values, now))
        elif all(_holds(name, spec, values) for name, spec in _FIELD.findall(optional)):
            said.append(_fill(optional, values, now))
    return "".join(said)


# A sentence's pieces: an optional one ``[...]`` (no nesting) or plain text; a
# placeholder ``{name}`` or ``{name:spec}``.
_PIECES = re.compile(r"\[([^\[\]]*)\]|([^\[]+)")
_FIELD = re.compile(r"\{(\w+)(?::(\w+))?\}")


def _is_set(value: Any) -> bool:
    return value is not None and value is not False and value != "" and value != [] and value != {}


def _holds(name: str, spec: str, values: Mapping[str, Any]) -> bool:
    """Whether an optional piece may be said, as far as placeholder ``name`` goes."""
    if name in ("unit", "Unit"):
        return True
    return (name not in values) if spec == "unless" else (name in values)


def _fill(text: str, values: Mapping[str, Any], now: datetime) -> str:
    return _FIELD.sub(lambda field: _field(field.group(1), field.group(2), values, now), text)


def _field(name: str, spec: str | None, values: Mapping[str, Any], now: datetime) -> str:
    if spec in ("if", "unless"):
        return ""
    if name in ("unit", "Unit"):
        phrase = _unit_phrase(values)
        return phrase[:1].upper() + phrase[1:] if name == "Unit" else phrase
    value = values[name]
    if isinstance(value, datetime):
        return relative(value, now)
    text = str(value)
    if spec == "words":
        return text.replace("_", " ")
    if spec == "short":
        return short_id(text)
    if spec == "items":
        return ngettext("%(count)d item", "%(count)d items", int(value)) % {"count": value}
    if spec in ("holder", "Holder"):
        text = lease_holder(text)
    if spec in ("capital", "Holder"):
        return text[:1].upper() + text[1:]
    return text


def _unit_phrase(values: Mapping[str, Any]) -> str:
    step, item, unit = values.get("step"), values.get("item"), values.get("unit")
    if unit == "compensation":
        return f"compensation of “{step}”" + (f" item {item}" if item else "")
    if unit == "item":
        return f"item {item} of “{step}”"
    if unit == "step":
        return f"step “{step}”"
    return f"work of “{step}”"
