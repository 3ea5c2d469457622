"""Hooks: Django signals sent after commit, read from the event history.

A transition writes its events in its own transaction, so an event row exists only if
the transition committed. The deliverer reads committed events not yet delivered (the
``published`` flag is the delivery cursor, with a partial index on the undelivered
rows), claims a batch with a compare-and-set, commits the claim, and only then sends
the matching signal for each event in event order. A rolled-back transition left no
event, so it fires no hook; a claimed event belongs to exactly one deliverer, so each
hook fires once per event however many deliverers run.

Delivery is at most once per event: a receiver that raises is logged and counted, the
other receivers and the rest of the batch still get their signals, and the event is not
sent again. See the "Hooks" section of ``docs/architecture.md`` for why.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypedDict

from django.db import connections, transaction
from django.db.models import F
from django.dispatch import Signal

from workflows.definitions import Gate
from workflows.engine.sql.connection import engine_alias
from workflows.models import Event
from workflows.status import RUN_FINAL
from workflows.webhooks.outbox import record_deliveries

if TYPE_CHECKING:
    from django_stubs_ext import WithAnnotations

    class _Named(TypedDict):
        """What :func:`claim_events` annotates each event with: its run's workflow, the
        sender of its hook."""

        workflow: str

    _NamedEvent = WithAnnotations[Event, _Named]

logger = logging.getLogger("workflows.hooks")

run_started = Signal()
"""A run started. ``sender`` is the workflow name; arguments ``run_id`` (UUID),
``step_id`` (None) and ``event`` (the ``run.started`` :class:`~workflows.models.Event`,
whose ``payload`` holds ``workflow``, ``version`` and ``idempotency_key``)."""

run_finished = Signal()
"""A run reached a final status. ``sender`` is the workflow name; arguments ``run_id``,
``step_id`` (None), ``status`` (``completed``, ``failed``, ``compensated``,
``compensation_failed``, ``cancelled`` or ``terminated``) and ``event`` (the
``run.<status>`` event)."""

step_failed = Signal()
"""A step failed for good (its attempts used, a permanent error, a rejected gate).
``sender`` is the workflow name; arguments ``run_id``, ``step_id`` and ``event`` (the
``step.failed`` event; ``payload["code"]`` says why)."""

gate_waiting = Signal()
"""A gate is waiting for a decision. ``sender`` is the workflow name; arguments
``run_id``, ``step_id`` (the gate's step) and ``event`` (the ``step.waiting`` event with
``payload["reason"] == "gate"``)."""

gate_decided = Signal()
"""A gate was approved or rejected, by a person or by its timeout. ``sender`` is the
workflow name; arguments ``run_id``, ``step_id`` and ``event`` (the ``gate.decided``
event; ``payload["decision"]`` and ``payload["by"]``)."""

gate_overridden = Signal()
"""A gate was skipped by someone its rule does not admit, under the separately granted
``workflows.override_gate_rule``: never sent as ``gate_decided``. ``sender`` is the
workflow name; arguments ``run_id``, ``step_id`` and ``event`` (the ``gate.overridden``
event; ``payload["decision"]``, ``payload["by"]`` and ``payload["rule"]``, the
permission and assignees set aside)."""

compensation_failed = Signal()
"""A compensation failed for good, leaving its run ``compensation_failed``. ``sender``
is the workflow name; arguments ``run_id``, ``step_id`` (the compensated step) and
``event`` (the ``compensation.failed`` event; ``payload["error"]``)."""

ALL_HOOKS = (
    run_started,
    run_finished,
    step_failed,
    gate_waiting,
    gate_decided,
    gate_overridden,
    compensation_failed,
)

# Event type → the hook it fires. ``step.waiting`` fires a hook only for some reasons.
_HOOK_OF_TYPE: dict[str, Signal] = {
    "run.started": run_started,
    **{f"run.{status}": run_finished for status in RUN_FINAL},
    "step.failed": step_failed,
    "gate.decided": gate_decided,
    "gate.overridden": gate_overridden,
    "compensation.failed": compensation_failed,
}
_HOOK_OF_WAITING_REASON: dict[str, Signal] = {Gate.kind: gate_waiting}


@dataclass
class Delivery:
    """One pass of :func:`deliver_events`: events claimed, and receivers that raised."""

    claimed: int = 0
    receiver_errors: int = 0


def hook_for(event: Event) -> tuple[Signal, dict[str, Any]] | None:
    """The signal ``event`` fires and its arguments, or None for an event with no hook."""
    if event.type == "step.waiting":
        signal = _HOOK_OF_WAITING_REASON.get(event.payload.get("reason", ""))
    else:
        signal = _HOOK_OF_TYPE.get(event.type)
    if signal is None:
        return None
    arguments: dict[str, Any] = {"run_id": event.run_id, "step_id": event.step_id, "event": event}
    if signal is run_finished:
        arguments["status"] = event.type.removeprefix("run.")
    return signal, arguments


def claim_events(limit: int) -> tuple[int, list[_NamedEvent]]:
    """Mark up to ``limit`` undelivered events delivered, oldest first; return how many,
    and those of them that have a hook some receiver listens to, in order.

    Loses no race and wins none twice: on PostgreSQL the read locks the rows it takes
    and skips those another deliverer holds (``FOR UPDATE SKIP LOCKED``); on SQLite
    ``BEGIN IMMEDIATE`` serialises deliverers, so the loser reads after the winner's
    commit and sees only what is left. The update is guarded by ``published = false``;
    should it ever change fewer rows than were read, the claim rolls back and delivers
    nothing rather than deliver twice. The claimed events' webhook deliveries are
    recorded in the same transaction (:mod:`workflows.webhooks.outbox`).
    """
    alias = engine_alias()
    with transaction.atomic(using=alias):
        ids = list(
            Event.objects.filter(published=False)
            .order_by("id")
            .select_for_update(
                skip_locked=connections[alias].features.has_select_for_update_skip_locked
            )
            .values_list("id", flat=True)[:limit]
        )
        if not ids:
            return 0, []
        claimed = Event.objects.filter(id__in=ids, published=False).update(published=True)
        if claimed != len(ids):
            raise RuntimeError(f"claimed {claimed} of {len(ids)} events; nothing delivered")
        # Webhook deliveries are recorded with the cursor move: once per event, or not
        # at all if this claim rolls back.
        record_deliveries(ids)
    # Read after the claim commits: SQLite's write lock is held no longer than needed.
    # Only the events a receiver waits for are loaded; most events fire no hook.
    hooked = _hooked_types()
    if not hooked:
        return len(ids), []
    events = Event.objects.filter(id__in=ids, type__in=hooked)
    return len(ids), list(events.annotate(workflow=F("run__workflow_name")).order_by("id"))


def _hooked_types() -> set[str]:
    """The event types whose hook has a receiver connected right now."""
    hooked = {type_ for type_, signal in _HOOK_OF_TYPE.items() if signal.receivers}
    if any(signal.receivers for signal in _HOOK_OF_WAITING_REASON.values()):
        hooked.add("step.waiting")
    return hooked


def send_hook(event: _NamedEvent) -> int:
    """Send ``event``'s hook to every receiver; return how many receivers raised."""
    hook = hook_for(event)
    if hook is None:
        return 0
    signal, arguments = hook
    errors = 0
    for receiver, response in signal.send_robust(sender=event.workflow, **arguments):
        if isinstance(response, Exception):
            errors += 1
            logger.error(
                "hook receiver %r failed on event %s (%s of run %s); not retried",
                receiver,
                event.pk,
                event.type,
                event.run_id,
                exc_info=response,
            )
    return errors


def deliver_events(*, limit: int = 500) -> Delivery:
    """Claim and send undelivered events in batches of ``limit`` until none are left.

    Each batch's claim commits before its hooks are sent, so receivers run outside any
    transaction of the deliverer and see the state the events describe.
    """
    delivery = Delivery()
    while True:
        claimed, hooked = claim_events(limit)
        delivery.claimed += claimed
        for event in hooked:
            delivery.receiver_errors += send_hook(event)
        if claimed < limit:
            return delivery
